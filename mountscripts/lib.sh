# shellcheck shell=bash
# Helpers shared by the mountscripts (sourced, not run). $here is the directory of the
# script that sources this.
# shellcheck disable=SC2154

die() { echo "$(basename "$0"): $*" >&2; exit 1; }
warn() { echo "$(basename "$0"): $*" >&2; }

# The tracefs-fuse command: $TRACEFS_FUSE, then this checkout's .venv, then PATH.
tracefs_fuse() {
    if [ -n "${TRACEFS_FUSE:-}" ]; then
        echo "$TRACEFS_FUSE"
    elif [ -x "$here/../.venv/bin/tracefs-fuse" ]; then
        echo "$here/../.venv/bin/tracefs-fuse"
    elif command -v tracefs-fuse >/dev/null; then
        command -v tracefs-fuse
    else
        die "tracefs-fuse not found (run 'make setup', or set TRACEFS_FUSE)"
    fi
}

# What mounting needs (/dev/fuse, namespaces, the mount point) is checked by
# tracefs-fuse itself, which says in one line what is missing and how to fix it.
