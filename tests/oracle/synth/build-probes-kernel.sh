#!/usr/bin/env bash
# build-probes-kernel.sh — a variant of the kernel oracle with kprobe events and
# event injection, for the captures of tests/data/synth-*-6.12.*.
#
# The shared oracle (/work/shared/tools/kernel-oracle) is built without
# CONFIG_KPROBES and CONFIG_TRACE_EVENT_INJECT, so its tracefs has neither
# kprobe_events nor events/*/*/inject. This script reuses that oracle's
# unpacked source and build tree (read-only: the build tree is copied) and adds
#   CONFIG_KPROBES=y CONFIG_KPROBE_EVENTS=y CONFIG_TRACE_EVENT_INJECT=y
# into $PROBES_DIR (default ~/.cache/kernel-oracle-probes), next to a link to
# the shared initramfs, so that
#   ORACLE_DIR=$PROBES_DIR oracle-run.sh FILES -- COMMAND
# boots it. Kbuild's per-option dependencies keep the rebuild incremental.
set -eu
BASE=${ORACLE_BASE_DIR:-$HOME/.cache/kernel-oracle}
OUT=${PROBES_DIR:-$HOME/.cache/kernel-oracle-probes}
SRC=$(ls -d "$BASE"/src/linux-source-*/ | head -n1)
[ -f "$BASE/bzImage" ] || { echo "build the shared oracle first (oracle-build.sh)" >&2; exit 1; }
mkdir -p "$OUT"
if [ ! -f "$OUT/build/.config" ]; then
	cp -a "$BASE/build" "$OUT/build"
	cat >>"$OUT/build/.config" <<'CFG'
CONFIG_KPROBES=y
CONFIG_KPROBE_EVENTS=y
CONFIG_TRACE_EVENT_INJECT=y
CFG
	make -s -C "$SRC" O="$OUT/build" olddefconfig >/dev/null
fi
for opt in CONFIG_KPROBES=y CONFIG_KPROBE_EVENTS=y CONFIG_TRACE_EVENT_INJECT=y CONFIG_SYNTH_EVENTS=y; do
	grep -qxF "$opt" "$OUT/build/.config" || { echo "option did not stick: $opt" >&2; exit 1; }
done
make -C "$SRC" O="$OUT/build" -j"$(nproc)" bzImage >"$OUT/make.log" 2>&1 ||
	{ tail -n 30 "$OUT/make.log" >&2; exit 1; }
cp "$OUT/build/arch/x86/boot/bzImage" "$OUT/bzImage"
cp "$OUT/build/.config" "$OUT/config"
ln -sf "$BASE/initramfs.cpio.gz" "$OUT/initramfs.cpio.gz"
[ -f "$BASE/accel" ] && cp "$BASE/accel" "$OUT/accel"
cp "$BASE/VERSION" "$OUT/VERSION"
echo "built $OUT/bzImage"
