"""Write the man page and the shell completions from the command line's own definition.

``make share`` runs this; ``tests/test_packaging.py`` fails when what is
committed under ``share/`` differs from what it writes now. The man page comes
from argparse-manpage, the completions from shtab, both reading
:func:`tracefs_fuse.cli._main.build_parser`.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

SHARE = Path(__file__).resolve().parent
#: Where each file goes under a prefix (pyproject's data-files says the same).
MAN_PAGE = SHARE / "man" / "man1" / "tracefs-fuse.1"
BASH = SHARE / "bash-completion" / "completions" / "tracefs-fuse"
ZSH = SHARE / "zsh" / "site-functions" / "_tracefs-fuse"
CHANGELOG = SHARE.parent / "CHANGELOG.md"


def release_date() -> str:
    """The man page's date: the newest release's in CHANGELOG.md (not today's,
    so that the page changes only with the program)."""
    match = re.search(r"^## \[[^\]]+\] - (\d{4}-\d{2}-\d{2})$", CHANGELOG.read_text(), re.M)
    assert match, "CHANGELOG.md has no dated release heading (## [X.Y.Z] - YYYY-MM-DD)"
    return match.group(1)


def generate() -> dict[Path, str]:
    """Each file's text, as it should be."""
    os.environ["COLUMNS"] = "100"  # argparse wraps help to the terminal's width
    import shtab
    from argparse_manpage.manpage import Manpage

    from tracefs_fuse import __version__
    from tracefs_fuse.cli._main import build_parser

    page = Manpage(build_parser())
    page.date = release_date()
    page.source = f"tracefs-fuse {__version__}"
    page.manual = "User Commands"
    page.description = "a user-space tracefs for Linux user_events, served over FUSE"
    return {
        MAN_PAGE: str(page),
        BASH: shtab.complete(build_parser(), shell="bash"),
        ZSH: shtab.complete(build_parser(), shell="zsh"),
    }


def main() -> int:
    for path, text in generate().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path.relative_to(SHARE.parent)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
