"""Builds the native FUSE bridge (tracefs_fuse.fuse._bridge) against libfuse3.

Everything else about the package lives in pyproject.toml; setuptools needs this
file only because the extension's flags come from pkg-config.
"""

import glob
import shlex
import subprocess

from setuptools import Extension, setup


def pkg_config(*args: str) -> list[str]:
    out = subprocess.run(["pkg-config", *args, "fuse3"], check=True,
                         capture_output=True, text=True).stdout
    return shlex.split(out)


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
        )
    ]
)
