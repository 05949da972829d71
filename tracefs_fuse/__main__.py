"""``python -m tracefs_fuse``: the same as the ``tracefs-fuse`` command."""

from .cli._main import console

console()
