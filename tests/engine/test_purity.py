"""The engine stays pure: no FUSE, no trio, no clocks, no threads, no I/O.

Checked on the source (every import statement of every module) and at run
time (importing the whole engine in a fresh interpreter pulls none of them in).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ENGINE = Path(__file__).parents[2] / "tracefs_fuse" / "engine"
FORBIDDEN = {"pyfuse3", "trio", "time", "threading", "ctypes", "subprocess", "socket",
             "select", "selectors", "asyncio", "mmap", "io", "shutil", "tempfile", "signal"}
#: What the engine may use from os: flag constants only.
OS_NAMES = {"O_ACCMODE", "O_RDONLY", "O_WRONLY", "O_RDWR", "O_TRUNC", "O_NONBLOCK", "O_APPEND"}


@pytest.mark.parametrize("module", sorted(ENGINE.glob("*.py")), ids=lambda p: p.name)
def test_engine_module_imports_nothing_impure(module: Path) -> None:
    tree = ast.parse(module.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                assert alias.name.split(".")[0] not in FORBIDDEN, f"{module.name}: {alias.name}"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            assert node.module.split(".")[0] not in FORBIDDEN, f"{module.name}: {node.module}"
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == "os":
            assert node.attr in OS_NAMES, f"{module.name}: os.{node.attr}"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in ("open", "print", "input"), f"{module.name}: {node.func.id}()"


def test_importing_the_engine_loads_nothing_impure() -> None:
    code = ("import sys; before = set(sys.modules); import tracefs_fuse.engine._tracefs; "
            "print(sorted(m for m in set(sys.modules) - before if m.split('.')[0] in %r))"
            % (FORBIDDEN,))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"
