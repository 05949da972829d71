"""The package's folders are its architecture, and the imports keep to it.

Each folder's ``__init__`` docstring states what it may import (its first
``May import:`` sentence names the folders, "nothing of ours" names none, and
"public names only" limits it to the folders' packages, never their private
modules). This test reads those sentences and every import of every module
(at the top, under ``TYPE_CHECKING`` or inside a function alike) and fails on
an arrow the docstrings do not allow, and on any import circle between modules.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "tracefs_fuse"
#: The package's own facade (``__init__``, ``__main__``) may name any folder.
FACADE = {"__init__", "__main__"}

_BACKTICKED = re.compile(r"``(\w+)``")


class Rule:
    """What one folder may import, as its docstring says."""

    def __init__(self, allowed: frozenset[str], public_only: bool) -> None:
        self.allowed = allowed
        self.public_only = public_only


def read_rules(package: Path) -> dict[str, Rule]:
    """Folder name -> its rule, from each folder's ``__init__`` docstring."""
    rules = {}
    for init in sorted(package.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        match = re.search(r"May import:(.*?)(?:\.\s|\.$)", doc, re.S)
        assert match, f"{init}: the docstring has no 'May import:' sentence"
        sentence = match.group(1)
        allowed = frozenset(_BACKTICKED.findall(sentence))
        assert allowed or "nothing of ours" in sentence, f"{init}: 'May import:' names nothing"
        rules[init.parent.name] = Rule(allowed, "public names only" in sentence)
    return rules


def module_name(package: Path, path: Path) -> str:
    parts = [package.name, *path.relative_to(package).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(package: Path, path: Path) -> list[tuple[int, str]]:
    """Every module of ours ``path`` imports: (line, dotted name)."""
    name = module_name(package, path)
    is_package = path.name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            # "from pkg import _mod" imports the module pkg._mod; other names, pkg itself
            targets = set()
            for alias in node.names:
                candidate = package.parent.joinpath(*module.split("."), alias.name)
                if candidate.with_suffix(".py").exists() or (candidate / "__init__.py").exists():
                    targets.add(f"{module}.{alias.name}")
                else:
                    targets.add(module)
            if module == package.name and all(a.name.startswith("__") for a in node.names):
                continue  # the package's metadata (__version__), not its facade
            found += [(node.lineno, target) for target in sorted(targets)]
    return [(line, mod) for line, mod in found
            if mod == package.name or mod.startswith(package.name + ".")]


def violations(package: Path) -> list[str]:
    """Arrows the folders' docstrings do not allow."""
    rules = read_rules(package)
    bad = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).parts
        if len(rel) == 1:
            assert path.stem in FACADE, f"{path}: a module outside every folder"
            continue
        folder = rel[0]
        rule = rules[folder]
        for line, module in imports(package, path):
            parts = module.split(".")
            if len(parts) < 2:
                bad.append(f"{path.relative_to(package)}:{line} imports the package facade")
                continue
            target = parts[1]
            if target == folder:
                continue
            if target not in rule.allowed:
                bad.append(f"{path.relative_to(package)}:{line} imports {module} "
                           f"({folder} may import: {', '.join(sorted(rule.allowed)) or 'nothing'})")
            elif rule.public_only and len(parts) > 2 and parts[2].startswith("_"):
                bad.append(f"{path.relative_to(package)}:{line} imports {module}, "
                           f"a private module ({folder} uses public names only)")
    return bad


def circles(package: Path) -> list[list[str]]:
    """Import circles between modules (strongly connected components > 1)."""
    graph: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        name = module_name(package, path)
        graph[name] = {m for _, m in imports(package, path) if m != name}
    modules = set(graph)
    for name in graph:
        graph[name] &= modules
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            # A package imports its own modules to re-export them; they import
            # their siblings, not the package, unless that is a real circle.
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_folder_imports_above_itself() -> None:
    assert violations(PACKAGE) == []


def test_no_import_circle() -> None:
    assert circles(PACKAGE) == []


def test_every_folder_states_its_rule() -> None:
    folders = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert set(read_rules(PACKAGE)) == folders
    assert folders >= {"engine", "lib", "process", "host", "fuse", "daemon", "cli", "decode",
                       "eventheader", "record", "testing", "synth"}


# The check itself, on small synthetic packages: it must be able to fail.

def make_package(root: Path, files: dict[str, str]) -> Path:
    package = root / "pkg"
    for rel, text in files.items():
        path = package / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    (package / "__init__.py").touch()
    return package


LOW = '"""Low.\n\nMay import: nothing of ours.\n"""\n'
HIGH = '"""High.\n\nMay import: ``low``.\n"""\n'
TOOL = '"""Tool.\n\nMay import: ``low`` (public names only).\n"""\n'


@pytest.mark.parametrize(("files", "expected"), [
    ({"low/__init__.py": LOW, "low/_a.py": "", "high/__init__.py": HIGH,
      "high/_b.py": "from ..low import _a\n"}, []),
    ({"low/__init__.py": LOW, "low/_a.py": "from ..high import _b\n", "high/__init__.py": HIGH,
      "high/_b.py": ""}, ["low/_a.py:1 imports pkg.high"]),
    ({"low/__init__.py": LOW, "low/_a.py": "from typing import TYPE_CHECKING\n"
      "if TYPE_CHECKING:\n    from pkg.high._b import B\n", "high/__init__.py": HIGH,
      "high/_b.py": ""}, ["low/_a.py:3 imports pkg.high._b"]),
    ({"low/__init__.py": LOW, "low/_a.py": "def f():\n    from .. import high\n",
      "high/__init__.py": HIGH}, ["low/_a.py:2 imports pkg.high"]),
    ({"low/__init__.py": LOW, "low/_a.py": "", "tool/__init__.py": TOOL,
      "tool/_t.py": "from ..low._a import x\n"}, ["tool/_t.py:1 imports pkg.low._a, a private"]),
    ({"low/__init__.py": LOW, "low/_a.py": "", "tool/__init__.py": TOOL,
      "tool/_t.py": "from ..low import x\n"}, []),
])
def test_violations_found_in_synthetic_packages(tmp_path: Path, files: dict[str, str],
                                                expected: list[str]) -> None:
    found = violations(make_package(tmp_path, files))
    assert len(found) == len(expected), found
    for line, start in zip(found, expected):
        assert line.startswith(start), found


def test_circle_found_in_synthetic_package(tmp_path: Path) -> None:
    package = make_package(tmp_path, {
        "low/__init__.py": LOW,
        "low/_a.py": "from . import _b\n",
        "low/_b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._a import A\n",
        "low/_c.py": "from . import _a\n",
    })
    assert circles(package) == [["pkg.low._a", "pkg.low._b"]]
