"""``python -m tracefs_fuse``: the same as the ``tracefs-fuse`` command."""

from tracefs_fuse.cli import main

raise SystemExit(main())
