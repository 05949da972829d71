#!/bin/sh
# synth_capture.sh — what a real kernel answers about synthetic events,
# error_log, inject and refused kprobes. Runs inside the kernel oracle VM
# (busybox sh) with tfctl next to it; prints "@@ <case> <part>" headers, each
# followed by that part's raw output, for capture.py to turn into JSON.
#
#   python -m tests.oracle.kernel run 6.12 tfctl synth_capture.sh -- 'sh synth_capture.sh'
#   (capture.py does this, and builds tfctl)
#
# The same script runs against our FUSE tracefs for the integration test:
#   TRACEFS=/path/to/mount TFCTL_DIR=/dir/of/tfctl sh synth_capture.sh
# and its output compares with the golden file like the oracle's.
#
# Every step that changes state is a case ("run"), so the whole sequence can
# be replayed against the engine (tests/engine/synth_oracle.py). Parts:
# "op" (the tfctl call), "result" (tfctl's outcome), "error_log" (read, then
# cleared, after every step), then snapshots of files ("file:<path>") and
# drained ring-buffer pages ("raw").
# Sections that need CONFIG_TRACE_EVENT_INJECT / CONFIG_KPROBE_EVENTS are
# skipped when the kernel lacks them (the oracle's base build lacks both; its
# "probes" variant has them).
set -u
T=${TRACEFS:-/sys/kernel/tracing}
cd "$T" || exit 1
P=${TFCTL_DIR:-/oracle}
case_n=0

part() { echo "@@ $case_n $1"; }
# run LABEL ARGS...: one tfctl call as case LABEL, then the error log.
run() {
	case_n=$1
	shift
	part op
	echo "$*"
	part result
	"$P/tfctl" "$@"
	log
}
log() {
	part error_log
	cat error_log
	"$P/tfctl" trunc error_log >/dev/null
}
snap() {
	part "file:$1"
	cat "$1"
}
rawpages() {
	part raw
	"$P/tfctl" raw "$T"
}

echo "@@ meta kernel"
uname -r
echo "@@ meta config"
if [ -e kprobe_events ]; then echo CONFIG_KPROBE_EVENTS; fi
if [ -e synthetic_events ]; then echo CONFIG_SYNTH_EVENTS; fi
if [ -e user_events_data ]; then echo CONFIG_USER_EVENTS; fi
if [ -e uprobe_events ]; then echo CONFIG_UPROBE_EVENTS; fi

# ---------------------------------------------------------------- types
i=0
for t in s64 u64 s32 u32 s16 u16 s8 u8 char "unsigned char" int "unsigned int" \
	long "unsigned long" bool pid_t gfp_t short "unsigned short" size_t u128 \
	"char[16]" "char[]" "char[0]" "char[1]" "char[256]" "char[257]" "char[0x10]" \
	"char[1000]" "char[abc]" "char[-1]" "char[5]x" "unsigned char[8]" "unsigned char[]" \
	"long[]" "long[4]" "unsigned long[]" "u64[3]" "s32[]" "int[]" foo unsigned \
	"unsigned foo" "unsigned s64" "u64*" "char *" "__data_loc char[]"; do
	i=$((i + 1))
	run "type-$i" write synthetic_events "t $t f"
	if [ -d events/synthetic/t ]; then
		snap events/synthetic/t/format
		snap synthetic_events
		snap dynamic_events
		run "type-$i-del" write synthetic_events "!t"
	fi
done

# Field names carrying the array part.
i=0
for f in "char f[16]" "char f[]" "char f[300]" "u64 f[2]" "char[16] f[4]" "long f[]" \
	"unsigned char f[4]" "char f[" "char f]" "u64 9f" "u64 f-g" "u64 _f" "u64 [3]"; do
	i=$((i + 1))
	run "name-$i" write synthetic_events "t $f"
	if [ -d events/synthetic/t ]; then
		snap events/synthetic/t/format
		snap synthetic_events
		run "name-$i-del" write synthetic_events "!t"
	fi
done

# ---------------------------------------------------------------- commands
i=0
while IFS= read -r cmd; do
	i=$((i + 1))
	run "syn-$i" write synthetic_events "$cmd"
	snap synthetic_events
	run "syn-$i-trunc" trunc synthetic_events
done <<'EOF'

   
foo
foo u64
foo u64 a
  foo u64 a
foo u64 a;
foo u64 a; u32 b
foo u64 a u32 b
foo u64 a; ; u32 b;;
foo  u64   a
foo\tu64\ta
foo\tu64 a
foo\vu64 a
9foo u64 a
fo-o u64 a
_foo u64 a
foo u64 9a
foo unsigned
foo u64 a; unsigned
foo u64 a; u32
foo u64 a;u32 b c
foo ;u64 a
foo u64 a; s64 b; u64 c[2]
foo u64 a; char[400] s
foo u64 a; char s[400]
!foo
!nosuch
!
!foo u64 a
foo s8 a; s16 b; s32 c; s64 d; u8 e; u16 f; u32 g; u64 h; char i; unsigned char j
foo char[16] s; u64 a; char[] d; char[8] t; long[] st; u32 b
EOF

# Exists, delete, too many fields.
run exists-1 write synthetic_events "foo u64 a"
run exists-2 write synthetic_events "foo u32 b"
run exists-3 write dynamic_events "s:foo u32 b"
run exists-4 write synthetic_events "!foo"
run exists-5 write synthetic_events "!foo"
f64=""
f65=""
n=0
while [ $n -lt 65 ]; do
	[ $n -lt 64 ] && f64="${f64}u8 f$n;"
	f65="${f65}u8 f$n;"
	n=$((n + 1))
done
run many-64 write synthetic_events "many $f64"
run many-65 write synthetic_events "many2 $f65"
run many-65old write synthetic_events "many3 $(echo "$f65" | tr ';' ' ')"
snap synthetic_events
run many-trunc trunc synthetic_events

# dynamic_events forms.
i=0
while IFS= read -r cmd; do
	i=$((i + 1))
	run "dyn-$i" write dynamic_events "$cmd"
	snap dynamic_events
	snap synthetic_events
done <<'EOF'
s:foo u64 a
s:synthetic/bar u64 a; char[] s
s:other/baz u64 a
s:/baz u64 a
s:synthetic/ u64 a
s: u64 a
s:baz
s:baz u64
s:synthetic/baz
s:qux u64 a;
  s:lead u64 a
u:ue u32 x
s:after u64 a
-:foo
-:synthetic/bar
-:other/lead
!s:lead
!x:after u32 zz
-:nosuch
-:
-:synthetic/
-foo
EOF
run dyn-trunc trunc dynamic_events

# ---------------------------------------------------------------- busy
run busy-1 write synthetic_events "b1 u64 a"
run busy-2 write synthetic_events "b2 u64 a"
run busy-3 write synthetic_events "b3 u64 a"
run busy-enable write events/synthetic/b2/enable 1
run busy-del write synthetic_events "!b2"
run busy-dyndel write dynamic_events "-:b2"
run busy-trunc trunc synthetic_events
snap synthetic_events
run busy-dyntrunc trunc dynamic_events
snap dynamic_events
run busy-disable write events/synthetic/b2/enable 0
run busy-del2 write synthetic_events "!b2"
snap synthetic_events
run busy-end trunc dynamic_events

# ---------------------------------------------------------------- error_log
run elog-write write error_log "anything"
for n in 1 2 3 4 5 6 7 8 9 10; do
	case_n=elog-bad-$n
	part op
	echo "write synthetic_events bad$n x"
	part result
	"$P/tfctl" write synthetic_events "bad$n x"
done
snap error_log
case_n=elog-append
part op
echo "append error_log x"
part result
"$P/tfctl" append error_log "x"
snap error_log
run elog-trunc trunc error_log
snap error_log
part mode
ls -l error_log synthetic_events dynamic_events
ls -l kprobe_events 2>/dev/null
run dir-create write synthetic_events "d u64 a"
part "events-synthetic-dir"
find events/synthetic
ls -l events/synthetic/d
HAVE_INJECT=0
[ -e events/synthetic/d/inject ] && HAVE_INJECT=1
run dir-trunc trunc synthetic_events

# ---------------------------------------------------------------- inject
if [ "$HAVE_INJECT" = 1 ]; then
	run inj-clear trunc trace
	run inj-create write synthetic_events "inj u64 a; s8 sb; char[16] s; char[] d; gfp_t g; bool b; long[] st; u16 w"
	snap events/synthetic/inj/format
	part "inj-dir"
	find events/synthetic/inj
	ls -l events/synthetic/inj
	run inj-read read events/synthetic/inj/inject
	run inj-disabled write events/synthetic/inj/inject "a=1"
	rawpages
	run inj-enable write events/synthetic/inj/enable 1
	i=0
	while IFS= read -r cmd; do
		i=$((i + 1))
		run "inj-$i" write events/synthetic/inj/inject "$cmd"
		snap trace
		rawpages
	done <<'EOF'
a=5 sb=-2 s="hello" d='dyn' g=0 b=1 st=7 w=65535

   a = 9   
a=0x10
a=-1
sb=-129
sb=127
sb=-1
a=99999999999999999999
sb=99999999999999999999
a=1x
a=1.5
a="x"
s=5
s="abcdefghijklmnopqrstuvwxyz"
s='unterminated
s="esc\"aped"
d="one" d="two"
nosuch=1
a
a=
=1
a=1,sb=2
common_pid=42
common_type=1
common_flags=3
CPU=1
cpu=1
comm="x"
stacktrace=1
g=0x400cc0
g=0x100
EOF
	snap trace
	run inj-big write events/synthetic/inj/inject "s=\"$(head -c 300 /dev/zero | tr '\0' 'x')\""
	run inj-tracing-off write tracing_on 0
	run inj-off write events/synthetic/inj/inject "a=3"
	rawpages
	run inj-tracing-on write tracing_on 1
	# User events: static, dynamic and relative strings, a struct, no fields.
	run uinj-create write dynamic_events "u:uinj u32 n; char[20] s; __data_loc char[] d; __rel_loc char[] r; struct foo st 6; s64 big"
	run unone-create write dynamic_events "u:unone"
	snap events/user_events/uinj/format
	i=0
	while IFS= read -r cmd; do
		i=$((i + 1))
		run "uinj-$i" write events/user_events/uinj/inject "$cmd"
		snap trace
		rawpages
	done <<'EOF'
n=1 s="abc" d="dd" r="rr" big=-5
n=2
st=1
st="x"
big=-9223372036854775808
big=9223372036854775808
EOF
	run unone-1 write events/user_events/unone/inject ""
	rawpages
	run unone-2 write events/user_events/unone/inject "common_pid=3"
	rawpages
	snap trace
	run inj-long write events/synthetic/inj/inject "a=$(head -c 4100 /dev/zero | tr '\0' '1')"
fi

# ---------------------------------------------------------------- kprobes
if [ -e kprobe_events ]; then
	run kp-synth write synthetic_events "kpx u64 a"
	args=""
	n=0
	while [ $n -lt 129 ]; do
		args="$args a$n=%ax"
		n=$((n + 1))
	done
	run kp-args-128 write kprobe_events "p:manyargs 0x1234${args% a128=%ax}"
	run kp-args-129 write kprobe_events "p:manyargs 0x1234$args"
	for file in kprobe_events dynamic_events; do
		i=0
		while IFS= read -r cmd; do
			i=$((i + 1))
			run "kp-$file-$i" write "$file" "$cmd"
			snap "$file"
		done <<'EOF'
p:myprobe do_nosuch
p do_nosuch
p   do_nosuch   a=%ax
r:myret do_nosuch
p:myprobe do_nosuch+4 arg1=%ax
p:myprobe do_nosuch%return
p:myprobe do_nosuch%ret
p:myprobe do_nosuch+abc
p:myprobe do_nosuch-4
p:grp/ev do_nosuch
p:myprobe nosuchmod:func
r5:x do_nosuch
p5:x do_nosuch
r0:x do_nosuch
r99999:x do_nosuch
r0x10:x do_nosuch
p:x 0x1234
p:x 0
p:x 0x1234 arg=%ax
p:/x 0x1234
p:x/ 0x1234
p:synthetic/kpx 0x1234
p:kprobes/kpx 0x1234
p:9x 0x1234
p:g-x/y 0x1234
p:x.y 0x1234
p
p:x
x:foo bar
-:foo
-:kprobes/foo
!p:foo
p:x /bin/sh:0x10

EOF
	done
	snap kprobe_events
fi
# ---------------------------------------------------------------- trace text
# Last, as it leaves triggers behind that nothing else here can undo: records
# made by the kernel's own synth path (trace_event_raw_event_synth),
# from a hist trigger on two user events (action params need 2+ characters).
"$P/tfctl" write dynamic_events "u:start u32 id; u64 v; char[16] name" >/dev/null
"$P/tfctl" write dynamic_events "u:stop u32 id; s32 ww; u16 sm" >/dev/null
run hist-synth write synthetic_events "hs u64 v; u32 id; char[16] name; s32 w; char[] dname; u16 small"
run hist-t1 write events/user_events/start/trigger "hist:keys=id:v0=v,n0=name,n1=name"
run hist-t2 write events/user_events/stop/trigger "hist:keys=id:onmatch(user_events.start).trace(hs,\$v0,id,\$n0,ww,\$n1,sm)"
"$P/tfctl" write events/synthetic/hs/enable 1 >/dev/null
"$P/tfctl" trunc trace >/dev/null
run hist-w1 uwrite "$T" "start u32 id; u64 v; char[16] name" 07000000ffffffffffffff7f68656c6c6f0000000000000000000000
run hist-w2 uwrite "$T" "stop u32 id; s32 ww; u16 sm" 07000000feffffff3412
snap trace
"$P/tfctl" write options/verbose 1 >/dev/null
snap trace
"$P/tfctl" write options/verbose 0 >/dev/null
rawpages
snap events/synthetic/hs/format
run hist-busy write synthetic_events "!hs"
run hist-busy-trunc trunc synthetic_events
snap synthetic_events

echo "@@ end"
