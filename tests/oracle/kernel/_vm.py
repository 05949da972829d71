"""Booting an oracle kernel in QEMU for one command.

The guest has three serial ports, each a file here: ttyS0 the kernel's
console, ttyS1 the command's output, ttyS2 its exit status (``_initramfs``).
It reboots when the command ends, and ``-no-reboot`` turns that (and a
panic, ``panic=-1``) into QEMU's exit; a run that outlives its timeout is
killed. No status means the guest died: the console says why.

KVM is used when it works. Some hosts offer a ``/dev/kvm`` that cannot run
an ordinary guest (QEMU aborts, or the guest hangs silently), so the first
run probes it with a short boot and the verdict is kept in the cache
(``accel``; delete it to probe again). TCG boots this kernel in about
3 seconds too.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ._log import OracleError, log

KVM = ("-accel", "kvm", "-cpu", "host")
TCG = ("-accel", "tcg", "-cpu", "max")
KVM_PROBE_TIMEOUT_S = 30


@dataclass(frozen=True)
class Run:
    """What one command did in the guest."""

    output: str
    #: The command's exit status; None if the guest died or timed out first.
    status: int | None
    console: str
    timed_out: bool


def boot(bzimage: Path, initrd: bytes, *, accel: tuple[str, ...], timeout: float,
         cpus: int = 2, memory: str = "1G", append: str = "") -> Run:
    """Boot once with ``initrd`` and collect the three serial ports."""
    with tempfile.TemporaryDirectory(prefix="tracefs-fuse-oracle-") as tmp:
        d = Path(tmp)
        (d / "initrd").write_bytes(initrd)
        command = [
            "qemu-system-x86_64", *accel, "-m", memory, "-smp", str(cpus),
            "-nodefaults", "-display", "none", "-no-reboot", "-monitor", "none",
            "-kernel", str(bzimage), "-initrd", str(d / "initrd"),
            "-append", f"console=ttyS0 panic=-1 quiet {append}".strip(),
            "-serial", f"file:{d / 'console'}", "-serial", f"file:{d / 'output'}",
            "-serial", f"file:{d / 'status'}",
        ]
        timed_out = False
        try:
            qemu = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        else:
            if qemu.returncode != 0:
                raise OracleError(f"qemu failed ({qemu.returncode}): {qemu.stderr.strip()}")

        def read(name: str) -> str:
            path = d / name
            # surrogateescape: bytes that are not UTF-8 survive a round trip.
            return path.read_bytes().decode(errors="surrogateescape") if path.exists() else ""

        status_text = read("status").strip()
        return Run(output=read("output"), console=read("console"), timed_out=timed_out,
                   status=int(status_text) if status_text.isdigit() else None)


def choose_accel(root: Path, bzimage: Path, initrd: bytes) -> tuple[str, ...]:
    """KVM if a probe boot with it works here, else TCG; the verdict is cached."""
    forced = os.environ.get("ORACLE_ACCEL")
    if forced in ("kvm", "tcg"):
        return KVM if forced == "kvm" else TCG
    verdict_file = root / "accel"
    verdict = verdict_file.read_text().strip() if verdict_file.exists() else ""
    if verdict not in ("kvm", "tcg"):
        verdict = "tcg"
        if os.access("/dev/kvm", os.R_OK | os.W_OK):
            try:
                probe = boot(bzimage, initrd, accel=KVM, timeout=KVM_PROBE_TIMEOUT_S)
                verdict = "kvm" if probe.status == 0 else "tcg"
            except OracleError:
                pass
        log(f"accelerator: {verdict} (cached in {verdict_file})")
        verdict_file.write_text(verdict + "\n")
    return KVM if verdict == "kvm" else TCG
