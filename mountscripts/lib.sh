# Helpers shared by the mountscripts (sourced, not run).

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

# What mounting needs, with a useful message instead of a failed mount(2).
preflight() {
    [ -c /dev/fuse ] || die "/dev/fuse is missing (containers: --device /dev/fuse)"
    [ "$(id -u)" = 0 ] || die "must run as root (a private mount namespace needs CAP_SYS_ADMIN)"
}
