"""Like the engine, the decoders do no I/O: bytes and text in, records out."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[2] / "tracefs_fuse"
FORBIDDEN = {"pyfuse3", "trio", "time", "threading", "ctypes", "subprocess", "socket",
             "select", "selectors", "asyncio", "mmap", "io", "os", "shutil", "tempfile",
             "signal"}


@pytest.mark.parametrize("module", sorted([*PACKAGE.glob("decode/*.py"),
                                           *PACKAGE.glob("eventheader/*.py")]),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_decoder_module_imports_nothing_impure(module: Path) -> None:
    for node in ast.walk(ast.parse(module.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in ("open", "print", "input"), module.name
        for name in names:
            assert name.split(".")[0] not in FORBIDDEN, f"{module.name}: {name}"
