"""The layering of src/anycuda: no module imports, directly or through others, a module that
imports it back (imports inside functions count: they only hide a cycle), and the stages'
order lives in compiler/pipeline.py."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "anycuda"


def _modules() -> dict:
    """{dotted name: path} of every module of the package (a package by its __init__)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imported(name: str, path: Path, modules: dict) -> set:
    """The package's modules that module `name` imports anywhere in its text."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
            targets = subs + ([base] if len(subs) < len(node.names) else [])
        else:
            continue
        for t in targets:
            while t and t not in modules:
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def import_cycles() -> list:
    """Each set of modules that reach one another through imports (more than one module)."""
    modules = _modules()
    graph = {m: _imported(m, p, modules) for m, p in modules.items()}
    reach = {}

    def reachable(m):
        if m not in reach:
            seen, todo = set(), [m]
            while todo:
                for n in graph[todo.pop()]:
                    if n not in seen:
                        seen.add(n)
                        todo.append(n)
            reach[m] = seen
        return reach[m]
    cycles, placed = [], set()
    for m in sorted(graph):
        if m in placed:
            continue
        group = {m} | {n for n in reachable(m) if m in reachable(n)}
        placed |= group
        if len(group) > 1:
            cycles.append(sorted(group))
    return cycles


def test_no_import_cycles():
    cycles = import_cycles()
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_check_finds_a_cycle(tmp_path, monkeypatch):
    """The check itself: two modules importing each other inside functions are a cycle."""
    pkg = tmp_path / "anycuda"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("def f():\n    from . import b\n")
    (pkg / "sub" / "b.py").write_text("from .a import f\n")
    (pkg / "c.py").write_text("from .sub import a\n")
    monkeypatch.setattr(__import__(__name__), "SRC", tmp_path)
    monkeypatch.setattr(__import__(__name__), "PACKAGE", pkg)
    assert import_cycles() == [["anycuda.sub.a", "anycuda.sub.b"]]


def test_the_pipeline_module_exists():
    assert (PACKAGE / "compiler" / "pipeline.py").is_file()
