"""`python -m rev student [--out DIR]`: write the student edition of every notebook from the instructor edition.

The repository holds the instructor edition: solutions filled in, so papermill, nbval and CI run it green. The
student edition is generated from it with nbformat, following nbgrader's markers (see `rev.book.exercises`):

* in a cell tagged `solution`, each region between `### BEGIN SOLUTION` and `### END SOLUTION` becomes
  `raise NotImplementedError("Exercise NN.k: <title>")`, indented like the region it replaces;
* a markdown cell tagged `answer` (the collapsed model answer) becomes a place to write one's own;
* outputs are cleared, and the notebook's metadata says which edition it is.

nbgrader itself would do the same with its `ClearSolutions` preprocessor, but it brings a Jupyter server
extension, a database layer and a grading workflow that a self-study workbook does not need; an instructor who
wants grading can still run nbgrader on the instructor edition, since the markers are nbgrader's own.
"""
from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
SOLUTION, CHECK, ANSWER = "solution", "check", "answer"
STUB = 'raise NotImplementedError("Exercise {id}: {title}")'
ANSWER_PROMPT = "**Your answer** (the model answer is in the instructor edition):\n\n_Write it here._"
_HEADING = re.compile(r"^#+\s*Exercise\s+(\w+\.\d+)\s*(?:\(([^)]*)\))?\s*:?\s*(.*)$", re.MULTILINE)
_CHECK_CALL = re.compile(r"""check\(\s*["'](\w+\.\d+)["']""")


class EditionError(ValueError):
    """A notebook breaks the exercise conventions; the message names the notebook and the cell."""


@dataclass(frozen=True)
class Exercise:
    notebook: str
    id: str
    kind: str
    title: str
    solution_cell: int | None     # index of its solution cell, None for written-only exercises
    check_cell: int | None


def _tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def exercises(nb, name: str = "notebook") -> list[Exercise]:
    """The exercises of a notebook, in order: heading, and the solution and check cells that follow it."""
    found: list[dict] = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            for m in _HEADING.finditer(cell.source):
                found.append(dict(id=m.group(1), kind=(m.group(2) or "").strip(), title=m.group(3).strip(),
                                  solution_cell=None, check_cell=None))
        elif found and SOLUTION in _tags(cell):
            found[-1]["solution_cell"] = i
        elif found and CHECK in _tags(cell):
            m = _CHECK_CALL.search(cell.source)
            if not m or m.group(1) != found[-1]["id"]:
                raise EditionError(f"{name}, cell {i}: a check cell after exercise {found[-1]['id']} must call "
                                   f"check({found[-1]['id']!r}, ...)")
            found[-1]["check_cell"] = i
    return [Exercise(name, **f) for f in found]


def _stub_solution(source: str, ex_id: str, title: str, where: str) -> str:
    out, inside, indent = [], False, ""
    for line in source.splitlines():
        stripped = line.strip()
        if stripped == BEGIN:
            if inside:
                raise EditionError(f"{where}: {BEGIN} inside another solution region")
            inside, indent = True, line[:len(line) - len(line.lstrip())]
            out.append(indent + STUB.format(id=ex_id, title=title.replace('"', "'")))
        elif stripped == END:
            if not inside:
                raise EditionError(f"{where}: {END} without {BEGIN}")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise EditionError(f"{where}: {BEGIN} without {END}")
    return "\n".join(out)


def student_notebook(nb, name: str = "notebook"):
    """A student copy of instructor notebook `nb` (nbformat object); `nb` itself is left as it is."""
    import copy

    nb = copy.deepcopy(nb)
    by_cell = {e.solution_cell: e for e in exercises(nb, name) if e.solution_cell is not None}
    for i, cell in enumerate(nb.cells):
        tags = _tags(cell)
        if SOLUTION in tags:
            if i not in by_cell:
                raise EditionError(f"{name}, cell {i}: a solution cell with no '### Exercise NN.k' heading above it")
            if BEGIN not in cell.source:
                raise EditionError(f"{name}, cell {i}: a solution cell without {BEGIN} / {END} markers")
            ex = by_cell[i]
            cell.source = _stub_solution(cell.source, ex.id, ex.title, f"{name}, cell {i}")
        elif ANSWER in tags:
            cell.source = ANSWER_PROMPT
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata["revbook_edition"] = "student"
    return nb


def write_student_edition(out: str | Path = "build/student", source: str | Path | None = None) -> dict[Path, int]:
    """Write the student edition of every notebook in `source` (default: the repository's notebooks/) to
    `out`/notebooks/; returns each written path with its number of exercises."""
    import nbformat

    from .workbook import NOTEBOOK_DIR

    src = Path(source) if source else NOTEBOOK_DIR
    dest = Path(out) / "notebooks"
    dest.mkdir(parents=True, exist_ok=True)
    written = {}
    for path in sorted(src.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        target = dest / path.name
        nbformat.write(student_notebook(nb, path.name), target)
        written[target] = len(exercises(nb, path.name))
    return written


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, default=Path("build/student"),
                   help="folder for the student edition (notebooks land in OUT/notebooks/)")


def run_cli(args: argparse.Namespace) -> int:
    try:
        paths = write_student_edition(args.out)
    except EditionError as e:
        raise SystemExit(f"error: {e}")
    print(f"student edition: {len(paths)} notebooks, {sum(paths.values())} exercises -> {Path(args.out) / 'notebooks'}")
    print("open them with: jupyter lab " + str(Path(args.out) / "notebooks"))
    return 0
