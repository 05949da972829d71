"""Builds the native FUSE bridge (tracefs_fuse.fuse._bridge) against libfuse3.

Everything else about the package lives in pyproject.toml; setuptools needs this
file only because the extension's flags come from pkg-config.
"""

import glob
import shlex
import subprocess
import sys

from setuptools import Extension, setup

# What Debian calls the packages the build needs (`make setup` installs them).
NEEDS = "libfuse3-dev and pkg-config (Debian: apt-get install libfuse3-dev pkg-config)"


def pkg_config(*args: str) -> list[str]:
    try:
        result = subprocess.run(["pkg-config", *args, "fuse3"], capture_output=True, text=True)
    except FileNotFoundError:
        sys.exit(f"tracefs-fuse: building the FUSE bridge needs pkg-config, which is not "
                 f"installed; install {NEEDS}")
    if result.returncode != 0:
        sys.exit("tracefs-fuse: pkg-config finds no fuse3 (no fuse3.pc: libfuse3-dev is not "
                 f"installed, or PKG_CONFIG_PATH leads elsewhere); install {NEEDS}")
    return shlex.split(result.stdout)


cflags = pkg_config("--cflags")
setup(
    ext_modules=[
        Extension(
            "tracefs_fuse.fuse._bridge",
            sources=["tracefs_fuse/fuse/_bridge.c",
                     *sorted(glob.glob("tracefs_fuse/fuse/_native/*.c"))],
            depends=sorted(glob.glob("tracefs_fuse/fuse/_native/*.h")),
            include_dirs=[f[2:] for f in cflags if f.startswith("-I")],
            define_macros=[("FUSE_USE_VERSION", "314")],
            extra_compile_args=[f for f in cflags if not f.startswith("-I")]
            + ["-Wall", "-Wextra", "-Werror", "-std=gnu11"],
            libraries=["fuse3", "dl", "pthread"],
        ),
        # perf_event_open inside `tracefs-fuse run`: the seccomp filter and its supervisor.
        Extension(
            "tracefs_fuse.perf._supervisor",
            sources=["tracefs_fuse/perf/_supervisor.c"],
            extra_compile_args=["-Wall", "-Wextra", "-Werror", "-std=gnu11"],
            libraries=["pthread"],
        ),
    ]
)
