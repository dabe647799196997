"""The package's rooms import in one direction, and no module imports itself round a circle.

Every import in `rev/` is read from the source (module level and inside functions alike, since a deferred import
is still a dependency), resolved to the module it names, and the graph is searched for cycles: a circle means
two modules that cannot be understood, tested or moved one without the other."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "rev"
# which room may import which: imports point down only (core is torch only), and book and chapters do not import
# each other
MAY_IMPORT = {"core": {"core"}, "engine": {"core", "engine"}, "chapters": {"core", "engine", "chapters"},
              "book": {"core", "engine", "book"}}


def _module(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """module -> the modules of the same package it imports."""
    paths = {_module(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                found |= {f"{target}.{a.name}" if f"{target}.{a.name}" in paths else target for a in node.names}
        graph[name] = {m for m in found if m in paths and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circles_in_rev():
    assert cycles(import_graph()) == [], "modules that import each other round a circle"


def test_the_cycle_search_finds_a_planted_circle(tmp_path):
    pkg = tmp_path / "rev"
    (pkg / "book").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "book" / "__init__.py").write_text("")
    (pkg / "book" / "a.py").write_text("from .b import x\n")
    (pkg / "book" / "b.py").write_text("def f():\n    from . import a\n")   # deferred, still a dependency
    (pkg / "book" / "c.py").write_text("from rev.book import a\n")
    assert cycles(import_graph(pkg)) == [["rev.book.a", "rev.book.b"]]


def test_rooms_import_downwards_only():
    wrong = [(m, t) for m, targets in import_graph().items() for t in targets
             if m.count(".") >= 1 and t.count(".") >= 1
             and t.split(".")[1] not in MAY_IMPORT.get(m.split(".")[1], {t.split(".")[1]})]
    assert wrong == [], "imports that point up (core imports torch only, engine only core) or across book/chapters"
