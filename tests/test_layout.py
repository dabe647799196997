"""The package's rooms import in one direction, and no module imports itself round a circle.

Every import in `rev/` is read from the source (module level and inside functions alike, since a deferred import
is still a dependency), resolved to the module it names, and the graph is searched for cycles: a circle means
two modules that cannot be understood, tested or moved one without the other."""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "rev"
# which room may import which: imports point down this list only. `core` imports torch only; `base` (settings and
# plumbing) stands on core; `data` and `measure` stand on base and do not import each other; `training` uses both;
# `chapters` and `book` stand on everything below and do not import each other.
BELOW = {"core": set(), "base": {"core"}, "data": {"core", "base"}, "measure": {"core", "base"},
         "training": {"core", "base", "data", "measure"},
         "chapters": {"core", "base", "data", "measure", "training"},
         "book": {"core", "base", "data", "measure", "training"}}
MAY_IMPORT = {room: below | {room} for room, below in BELOW.items()}


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


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(module, target) pairs whose target's room the module's room may not import; a room not in `MAY_IMPORT`
    (a new folder nobody placed) may import nothing of the package's rooms."""
    def room(m: str) -> str | None:
        parts = m.split(".")
        # rev itself and rev.__main__ (the command line, which imports each command's module) stand above all
        return parts[1] if len(parts) > 1 and not parts[1].startswith("__") else None

    return sorted((m, t) for m, targets in graph.items() for t in targets
                  if room(m) is not None and room(t) is not None and room(t) not in MAY_IMPORT.get(room(m), set()))


def test_every_room_is_placed():
    rooms = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert rooms == set(MAY_IMPORT), "a folder of rev/ with no place in the layout (add it to BELOW, and to README)"


def test_rooms_import_downwards_only():
    assert upward_imports(import_graph()) == [], "imports that point up the rooms, or across data/measure, book/chapters"


def test_the_layout_check_finds_a_planted_upward_import(tmp_path):
    pkg = tmp_path / "rev"
    for room in ("core", "base", "measure", "training", "data"):
        (pkg / room).mkdir(parents=True)
        (pkg / room / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "training" / "loop.py").write_text("from ..measure import memory\n")        # down: allowed
    (pkg / "measure" / "memory.py").write_text("def f():\n    from ..training import loop\n")  # up, deferred
    (pkg / "measure" / "bench.py").write_text("from rev.data import tokens\n")           # across
    (pkg / "data" / "tokens.py").write_text("from ..base import files\n")
    (pkg / "base" / "files.py").write_text("")
    assert upward_imports(import_graph(pkg)) == [("rev.measure.bench", "rev.data.tokens"),
                                                 ("rev.measure.memory", "rev.training.loop")]


def test_what_chapters_share_imports_no_chapter():
    """`chapters.shared` is what several chapters stand on: one of its modules importing a chapter would be the one
    arrow that runs up the house (a chapter importing shared importing that chapter)."""
    up = sorted((m, t) for m, targets in import_graph().items() for t in targets
                if m.startswith("rev.chapters.shared") and t.startswith("rev.chapters.")
                and not t.startswith("rev.chapters.shared"))
    assert up == [], "chapters.shared importing a chapter"


CHAPTERS = PACKAGE / "chapters"
NOTEBOOKS = PACKAGE.parent / "notebooks"


def test_every_chapter_package_names_each_of_its_modules_in_its_story():
    """Each chapter package's `__init__` docstring tells the story module by module: a module it does not name is
    one a reader of the package cannot find."""
    unnamed = {}
    for pkg in sorted(p for p in CHAPTERS.iterdir() if (p / "__init__.py").is_file()):
        doc = ast.get_docstring(ast.parse((pkg / "__init__.py").read_text())) or ""
        missing = [m.stem for m in sorted(pkg.glob("*.py")) if m.stem != "__init__" and f"`{m.stem}`" not in doc]
        if missing:
            unnamed[pkg.name] = missing
    assert unnamed == {}, "chapter modules their package's docstring does not name"


def test_notebooks_call_chapters_not_editions():
    """The editions (`rev.book`) make books of the notebooks; a notebook that imported one would depend on what
    is made from it."""
    import json
    import re

    wrong = []
    for nb in sorted(NOTEBOOKS.glob("*.ipynb")):
        for cell in json.loads(nb.read_text())["cells"]:
            source = "".join(cell["source"]) if cell["cell_type"] == "code" else ""
            wrong += [(nb.name, line) for line in re.findall(r"^\s*(?:from|import) rev\.book\b.*$", source, re.M)]
    assert wrong == [], "notebooks importing rev.book"


def test_no_chapter_package_hides_one_of_its_modules_behind_a_name():
    """A package that re-exports a function named like one of its modules (`screening.screen`, say) makes
    `package.module` mean the function: a test patching the module patches nothing."""
    import importlib

    hidden = []
    for pkg in sorted(p for p in CHAPTERS.iterdir() if (p / "__init__.py").is_file()):
        package = importlib.import_module(f"rev.chapters.{pkg.name}")
        for module in sorted(m.stem for m in pkg.glob("*.py") if m.stem != "__init__"):
            attr = getattr(package, module, None)
            if attr is not None and not inspect.ismodule(attr):
                hidden.append(f"rev.chapters.{pkg.name}.{module}")
    assert hidden == [], "package names that hide a module"
