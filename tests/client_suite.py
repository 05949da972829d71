"""The C clients every environment must pass, as one shell script and what each must print.

Where tracefs-fuse runs is what the namespace and container tests vary (a new pid or network
namespace, a user namespace as an ordinary user, a podman container, rootful or rootless); what
the clients print does not vary. One ``tracefs-fuse run -- sh -c SCRIPT`` runs every client in
turn against ``/sys/kernel/tracing`` and frames each one's output::

    ### ue_flow
    registered index=0 size=28 bit=31 enabled=0x5a5a0000
    ...
    ### status 0

One mount for all clients keeps a case to one daemon start-up; the clients use distinct event
names, and the status-page clients' events, which outlive their programs as on 5.18 and 6.1, are
deleted through ``dynamic_events`` before the next client runs.

Rules:
  * Every line a client prints is checked, in order, except where two processes print (fork):
    there the lines are compared as a multiset.
  * A client that did not run, or exited non-zero, fails its own check with the run's stderr
    (the daemon's log) attached; the other clients' checks are unaffected.
  * The ABI is the default (``auto``): what a user gets in a container without options.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TRACING = "/sys/kernel/tracing"

#: stdin of the status-page clients: check, enable, check, disable, check, write, show the text.
STATUS_PAGE_FLOW = "check\nenable 1\ncheck\nenable 0\ncheck\nwrite\ntext\nquit\n"


@dataclass(frozen=True)
class Section:
    """One client run and the lines it must print.

    ``command`` is a shell command line; ``$b`` is the directory of the compiled clients and
    ``$t`` the tracefs. ``report`` (a regex with one group) keeps only the matching lines of the
    output, reduced to the group with white space collapsed: for tools whose output carries
    pids and timestamps.
    """

    name: str
    command: str
    expected: tuple[str, ...]
    stdin: str | None = None
    after: str | None = None
    unordered: bool = False
    report: str | None = None


#: The mainline flow, as tests/integration/test_user_events_mainline.py checks it on the host.
UE_FLOW = Section("ue_flow", '"$b/ue_flow" "$t"', (
    "registered index=0 size=28 bit=31 enabled=0x5a5a0000",
    "enabled=0xda5a0000",
    "writev=24",
    "disabled enabled=0x5a5a0000",
    "writev disabled=-1 errno=9",
    "unregistered enabled=0x5a5a0000",
    "after close: deleted",
))

#: The clients of tests/clients/ that every environment runs, each against a fresh event name.
CLIENT_SECTIONS = (
    UE_FLOW,
    Section("ue_procs-thread", '"$b/ue_procs" "$t" thread',
            ("ok thread: bit set by enable", "ok thread: bit cleared by disable")),
    Section("ue_procs-fork", '"$b/ue_procs" "$t" fork', (
        "ok parent: enabled seen", "ok child: enabled seen", "ok child: disabled seen",
        "ok parent: disabled seen", "ok parent: child exited 0"), unordered=True),
    Section("legacy_5_18", '"$b/legacy_5_18" "$t" "old u32 count"', (
        "registered index=1 write_index=0",
        "status=0x00", "enable=0", "status=0x01", "wrote=8 count=0", "enable=0", "status=0x00",
        "write=8",  # 5.18: a disabled write is a silent no-op
        r"text=old\n\nActive: 1\nBusy: 0\n",
    ), stdin=STATUS_PAGE_FLOW, after="echo '!u:old' >> \"$t/dynamic_events\""),
    Section("legacy_6_1", '"$b/legacy_6_1" "$t" "mid u32 count"', (
        "registered bit=32767 write_index=0",  # auto: 6.1 bits from the top of the page
        "enabled=0", "enable=0", "enabled=1", "wrote=8 count=0", "enable=0", "enabled=0",
        "write=EBADF",
        r"text=mid\n\nActive: 1\nBusy: 0\n",
    ), stdin=STATUS_PAGE_FLOW, after="echo '!u:mid' >> \"$t/dynamic_events\""),
)

#: A shell command that returns once every per-CPU recorder of a ``trace-cmd record`` run in the
#: current directory has created its ``trace.dat.cpuN``: trace-cmd 3.1.6 stops a recorder that
#: has not yet created it when the traced command is already gone ("can not stat
#: 'trace.dat.cpu0'"), and the file is the one sign of a recorder's start-up outside trace-cmd.
#: The recorders read what was written before they started: the ring buffer keeps it.
WAIT_FOR_RECORDERS = ("for c in /sys/kernel/tracing/per_cpu/cpu*; do "
                      "until [ -e trace.dat.${c##*/} ]; do sleep 0.01; done; done")

#: Debian's trace-cmd records five events of ue_emit and decodes them (as tests/integration/
#: test_trace_cmd.py on the host). The event is created first: trace-cmd enables it before the
#: program starts; the program starts once the recorders have (WAIT_FOR_RECORDERS).
TRACE_CMD_SECTION = Section("trace-cmd", """(
    d=$(mktemp -d) && trap 'rm -rf "$d"' EXIT && cd "$d" || exit
    echo 'u:emit u32 count; char[16] msg' >> "$t/dynamic_events" || exit
    trace-cmd record -e user_events:emit \
        sh -c '""" + WAIT_FOR_RECORDERS + """; exec "$0" "$1" 5' "$b/ue_emit" "$t" || exit
    trace-cmd report
)""", tuple(f"emit: count={i} msg=msg-{i}" for i in range(5)),
    report=r"^ *ue_emit-\d+ +\[\d{3}\] +[\d.]+: (emit: .*)$")

#: Every program the sections run: what a harness compiles (tests/clients/NAME.c).
CLIENTS = ("ue_flow", "ue_procs", "legacy_5_18", "legacy_6_1", "ue_emit")


def script(sections: tuple[Section, ...], clients_dir: str) -> str:
    """The shell script that runs ``sections`` inside ``tracefs-fuse run``."""
    lines = [f"b='{clients_dir}'", f"t='{TRACING}'"]
    for section in sections:
        lines.append(f"echo '### {section.name}'")
        if section.stdin is None:
            lines.append(f"{section.command} </dev/null 2>&1")
        else:
            lines += [f"{section.command} 2>&1 <<'END_OF_INPUT'",
                      section.stdin.rstrip("\n"), "END_OF_INPUT"]
        lines.append('echo "### status $?"')
        if section.after:
            lines.append(section.after)
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Printed:
    """What one section printed, and its exit status."""

    lines: tuple[str, ...]
    status: int


def parse(stdout: str) -> dict[str, Printed]:
    """Split the script's output into sections (a section cut short has status -1)."""
    out: dict[str, Printed] = {}
    name: str | None = None
    lines: list[str] = []
    for line in stdout.splitlines():
        if line.startswith("### status ") and name is not None:
            out[name] = Printed(tuple(lines), int(line.split()[-1]))
            name = None
        elif line.startswith("### "):
            if name is not None:
                out[name] = Printed(tuple(lines), -1)
            name, lines = line[4:], []
        else:
            lines.append(line)
    if name is not None:
        out[name] = Printed(tuple(lines), -1)
    return out


def check(section: Section, printed: dict[str, Printed], log: str) -> None:
    """Assert that ``section`` ran, exited 0 and printed exactly its expected lines."""
    got = printed.get(section.name)
    assert got is not None, f"{section.name} never ran; the run's stderr:\n{log}"
    lines = got.lines
    if section.report is not None:
        pattern = re.compile(section.report)
        lines = tuple(" ".join(m.group(1).split()) for m in map(pattern.match, lines) if m)
    printed_text = f"{section.name} printed:\n" + "\n".join(got.lines) + f"\n--- stderr:\n{log}"
    assert got.status == 0, f"exited {got.status}; {printed_text}"
    if section.unordered:
        assert sorted(lines) == sorted(section.expected), printed_text
    else:
        assert lines == section.expected, printed_text


def daemon_errors(log: str) -> list[str]:
    """Lines of a run's stderr that say the daemon failed (an ERROR, a traceback)."""
    return [line for line in log.splitlines() if " ERROR " in line or line.startswith("Traceback")]
