"""``python -m tracefs_fuse.testing._call CALL RESULT``: run a pickled callable, keep its result.

The child that :func:`tracefs_fuse.testing.run` starts for a Python callable,
under ``tracefs-fuse run`` like any command. The callable comes pickled (by
reference: the parent's import path is in ``TRACEFS_FUSE_CALL_PATH``); its return value
goes back pickled to RESULT. If it raises, the traceback goes to stderr and
the exit status is 1.
"""

from __future__ import annotations

import os
import pickle
import sys
import traceback


def main(argv: list[str]) -> int:
    call, result = argv
    sys.path[:0] = filter(None, os.environ.pop("TRACEFS_FUSE_CALL_PATH", "").split(os.pathsep))
    with open(call, "rb") as f:
        function = pickle.load(f)
    try:
        value = function()
    except BaseException:  # SystemExit included: the parent sees the traceback
        traceback.print_exc()
        return 1
    with open(result, "wb") as f:
        pickle.dump(value, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
