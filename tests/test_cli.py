"""The command line as text: help, version, option checks and -o (no mounting)."""

from __future__ import annotations

import argparse
import importlib.metadata
import subprocess

import msgspec
import pytest

from tracefs_fuse import __version__
from tracefs_fuse.cli import _main as cli
from tracefs_fuse.daemon import _config as config
from tracefs_fuse.daemon._config import MountConfig


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    out, err = capsys.readouterr()
    return int(exit_.value.code or 0), out, err


def test_version_names_pyfuse3_and_libfuse(capsys: pytest.CaptureFixture[str]) -> None:
    libfuse = subprocess.run(["pkg-config", "--modversion", "fuse3"], capture_output=True,
                             text=True, check=True).stdout.strip()
    assert run_main(["--version"], capsys) == (
        0, f"tracefs-fuse {__version__} (pyfuse3 {importlib.metadata.version('pyfuse3')}, "
           f"libfuse {libfuse})\n", "")


@pytest.mark.parametrize("argv", [[], ["run"], ["mount"], ["umount"]])
def test_help_is_plain_text(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_main([*argv, "--help"], capsys)
    assert status == 0 and out.startswith("usage: tracefs-fuse")
    for markup in ("``", ":class:", ":mod:", ":func:", "\n.. "):
        assert markup not in out


def test_run_help_says_the_command_is_root_without_sudo(
        capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_main(["run", "--help"], capsys)
    assert "Without sudo" in out and "runs\nas root (uid 0)" in out


@pytest.mark.parametrize("name", ["run", "mount", "umount"])
def test_every_option_has_help_and_its_default(name: str) -> None:
    parser = subparsers(cli.build_parser())[name]
    for action in parser._actions:
        if not action.option_strings or action.help == argparse.SUPPRESS:
            continue
        assert action.help, action.option_strings
        if action.nargs != 0 and action.dest != "help":
            assert "default" in action.help, action.option_strings


# Each error names the option (and -o word) and comes after the subcommand's usage.
USAGE_ERRORS = [
    (["mount", "--mode", "999", "/m"], "argument --mode: '999' is not an octal mode (like 750)"),
    (["mount", "--mode", "17777", "/m"], "argument --mode: 17777 is out of range: from 0 to 7777"),
    (["mount", "--cpus", "0", "/m"], "argument --cpus: 0 is out of range: from 1 to 8192"),
    (["run", "--cpus", "many", "--", "true"], "argument --cpus: 'many' is not a whole number"),
    (["mount", "--uid", "-1", "/m"], "argument --uid: -1 is out of range: from 0 to 4294967294"),
    (["mount", "--buffer-size-kb", "0", "/m"],
     "argument --buffer-size-kb: 0 is out of range: at least 1"),
    (["mount", "--abi", "6.2", "/m"],
     "argument --abi: invalid choice: '6.2' (choose from 'auto', '5.18', '6.1', 'mainline')"),
    (["mount", "-o", "mode=999", "/m"],
     "argument -o: mode=999: '999' is not an octal mode (like 750)"),
    (["mount", "-o", "cpus=0", "/m"], "argument -o: cpus=0: 0 is out of range: from 1 to 8192"),
    (["mount", "-o", "abi=6.2", "/m"],
     "argument -o: abi=6.2: choose from auto, 5.18, 6.1, mainline"),
    (["mount", "-o", "frob=1", "/m"], "argument -o: frob=1: unknown option"),
    (["mount", "-o", "ready_fd=3", "/m"], "argument -o: ready_fd=3: unknown option"),
    (["mount", "-o", "mode", "/m"], "argument -o: mode: mode needs a value (mode=...)"),
    (["mount", "-o", "debug=1", "/m"], "argument -o: debug=1: debug takes no value"),
    (["mount"], "the following arguments are required: DIR"),
    (["run"], "no command given (tracefs-fuse run [options] -- CMD [ARGS...])"),
    (["run", "--abi", "6.1"], "no command given (tracefs-fuse run [options] -- CMD [ARGS...])"),
    (["run", "--frob", "--", "true"], "unrecognized arguments: --frob"),
    (["mount", "--frob", "/m"], "unrecognized arguments: --frob"),
    (["umount", "/m", "/n"], "unrecognized arguments: /n"),
    (["show", "--frob", "f.jsonl"], "unrecognized arguments: --frob"),
]


@pytest.mark.parametrize(("argv", "message"), USAGE_ERRORS)
def test_usage_errors_name_the_option_under_the_subcommand_usage(
        argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run_main(argv, capsys)
    assert (status, out) == (2, "")
    assert err.startswith(f"usage: tracefs-fuse {argv[0]} ")
    assert err.splitlines()[-1] == f"tracefs-fuse {argv[0]}: error: {message}"


def test_unknown_command_shows_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run_main(["frob", "/m"], capsys)
    assert status == 2
    assert err.splitlines()[-1] == ("tracefs-fuse: error: argument COMMAND: invalid choice: "
                                    "'frob' (choose from 'run', 'mount', 'umount', 'show')")


def parsed(*argv: str) -> MountConfig:
    args = cli.build_parser().parse_args(["mount", *argv, "/m"])
    return cli._config(args, "/m", owner=(1000, 100))


DEFAULT = MountConfig(mountpoint="/m", uid=1000, gid=100)

OPTION_WORDS = [
    ((), {}),
    (("-o", "mode=750,gid=0,abi=6.1"), {"mode": 0o750, "gid": 0, "abi": "6.1"}),
    (("-o", "cpus=4,buffer_size_kb=2048", "-o", "user-events-max=10"),
     {"nr_cpus": 4, "buffer_size_kb": 2048, "user_events_max": 10}),
    # mount flags for mount(2); atime and fstab-only words have nothing to do
    (("-o", "rw,nosuid,dev,noatime,relatime,defaults,noauto,_netdev,x-systemd.automount"),
     {"mount_flags": ("rw", "nosuid", "dev", "noatime")}),
    (("-o", "allow_other,default_permissions,,"), {}),
    # later wins, as for repeated options
    (("--mode", "700", "-o", "mode=755"), {"mode": 0o755}),
    (("-o", "mode=755", "--mode", "711"), {"mode": 0o711}),
    (("-o", "debug"), {"log_level": "debug"}),
    (("-o", "log_level=info,debug_fuse"), {"log_level": "info", "debug_fuse": True}),
    (("--debug",), {"log_level": "debug"}),
]


@pytest.mark.parametrize(("argv", "changes"), OPTION_WORDS)
def test_option_words_are_the_options(argv: tuple[str, ...], changes: dict[str, object]) -> None:
    assert parsed(*argv) == msgspec.structs.replace(DEFAULT, **changes)


def test_config_crosses_to_the_background_daemon_unchanged() -> None:
    sent = parsed("-o", "mode=750,abi=5.18,ro", "--cpus", "3")
    assert config.decode(config.encode(sent)) == sent


@pytest.mark.parametrize(("argv", "expected"), [
    # mount.fuse3's call for `mount -t fuse.tracefs-fuse tracefs /mnt -o mode=750`
    (["tracefs", "/mnt", "-o", "rw,mode=750,dev,suid"],
     ["mount", "/mnt", "-o", "rw,mode=750,dev,suid"]),
    (["mount", "/mnt", "-o", "ro"], ["mount", "/mnt", "-o", "ro"]),
    (["run", "--", "mount", "/mnt", "-o", "ro"], ["run", "--", "mount", "/mnt", "-o", "ro"]),
    (["mnt", "/mnt"], ["mnt", "/mnt"]),  # a mistyped command stays a usage error
])
def test_mount_helper_form(argv: list[str], expected: list[str]) -> None:
    assert cli._from_mount_helper(argv) == expected


def test_one_line_unwraps_trio_exception_groups() -> None:
    error = ExceptionGroup("Exceptions from Trio nursery (1 sub-exception)",
                           [RuntimeError("fuse_session_mount failed")])
    assert cli.one_line(error) == "fuse_session_mount failed"
    assert cli.one_line(FileNotFoundError(2, "No such file or directory", "/x")) == (
        "/x: No such file or directory")
