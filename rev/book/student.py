"""`python -m rev student [--out DIR]`: write the student edition of every notebook from the instructor edition.

The repository holds the instructor edition: solutions filled in, so papermill, nbval and CI run it green. The
student edition is generated from it with nbformat, following nbgrader's markers (see `rev.chapters.shared.exercises`):

* in a cell tagged `solution`, each region between `### BEGIN SOLUTION` and `### END SOLUTION` becomes
  `raise NotImplementedError("Exercise NN.k: <title>")`, indented like the region it replaces;
* a markdown cell tagged `answer` (the collapsed model answer) becomes a place to write one's own;
* outputs are cleared, and the notebook's metadata says which edition it is.

What is hidden is decided once, by `hidden_cells`; the course release (`rev.book.course`, an nbgrader course)
hides the same cells with the same stubs, so the two can never disagree. The student edition needs no nbgrader:
a self-study workbook has no use for its server extension, database and grading workflow.
"""
from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path

from ..base.cli import folder_arg
from ..base.files import check_output, edited_files, record_written, write_text
from .sequence import read_notebook

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


@dataclass(frozen=True)
class Hidden:
    """A cell that both the student edition and the course release hide."""
    cell: int
    kind: str           # SOLUTION (code between the markers is stubbed) or ANSWER (a model answer, replaced whole)
    exercise: Exercise


def _marker_lines(source: str) -> list[str]:
    # nbgrader treats any line *containing* "BEGIN SOLUTION" as a marker, the stub below only a line that *is*
    # one: a line that is one but not the other would make the two editions hide different code
    return [ln for ln in source.splitlines() if BEGIN[4:] in ln or END[4:] in ln]


def hidden_cells(nb, name: str = "notebook") -> list[Hidden]:
    """The cells that hold solutions, in order, each with its exercise: solution cells (tag `solution`) and
    model answers (tag `answer`, belonging to the last exercise heading above them).

    Raises `EditionError` where hiding would be ambiguous or leak: a solution cell without a heading above it or
    without markers, an answer before any heading, a solution marker outside a solution cell (the student
    edition would keep it, and nbgrader refuses it) or not alone on its line."""
    found = exercises(nb, name)
    by_solution = {e.solution_cell: e for e in found if e.solution_cell is not None}
    hidden, seen = [], 0        # seen: exercise headings met so far; found[seen - 1] is the current exercise
    for i, cell in enumerate(nb.cells):
        tags, markers = _tags(cell), _marker_lines(cell.source)
        if SOLUTION in tags:
            if i not in by_solution:
                raise EditionError(f"{name}, cell {i}: a solution cell with no '### Exercise NN.k' heading above it")
            if BEGIN not in cell.source:
                raise EditionError(f"{name}, cell {i}: a solution cell without {BEGIN} / {END} markers")
            if any(ln.strip() not in (BEGIN, END) for ln in markers):
                raise EditionError(f"{name}, cell {i}: a solution marker must stand alone on its line: "
                                   f"{next(ln for ln in markers if ln.strip() not in (BEGIN, END))!r}")
            hidden.append(Hidden(i, SOLUTION, by_solution[i]))
        elif markers:
            raise EditionError(f"{name}, cell {i}: {markers[0].strip()!r} outside a cell tagged 'solution'")
        elif ANSWER in tags:
            if not seen:
                raise EditionError(f"{name}, cell {i}: an answer cell with no '### Exercise NN.k' heading above it")
            hidden.append(Hidden(i, ANSWER, found[seen - 1]))
        if cell.cell_type == "markdown":
            seen += len(_HEADING.findall(cell.source))
    return hidden


def hidden_source(source: str, hidden: Hidden, where: str = "cell") -> str:
    """What a hidden cell shows instead of `source`: the solution regions stubbed, or the answer prompt."""
    if hidden.kind == ANSWER:
        return ANSWER_PROMPT
    return _stub_solution(source, hidden.exercise.id, hidden.exercise.title, where)


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
    for h in hidden_cells(nb, name):
        nb.cells[h.cell].source = hidden_source(nb.cells[h.cell].source, h, f"{name}, cell {h.cell}")
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata["revbook_edition"] = "student"
    return nb


def write_student_edition(out: str | Path = "build/student", source: str | Path | None = None,
                          force: bool = False) -> dict[Path, int]:
    """Write the student edition of every notebook in `source` (default: the repository's notebooks/) to
    `out`/notebooks/; returns each written path with its number of exercises.

    A learner works in these copies: one changed since it was written here (or not written here) is replaced only
    with `force` (`rev.base.files.check_output`), and `out` is never the checkout or one of its own folders."""
    import nbformat

    from .sequence import NOTEBOOK_DIR

    src = Path(source) if source else NOTEBOOK_DIR
    dest = Path(out) / "notebooks"
    editions = {}   # every notebook is made before any is written: a broken one leaves nothing half done
    for path in sorted(src.glob("*.ipynb")):
        nb = read_notebook(path)
        editions[dest / path.name] = (student_notebook(nb, path.name), len(exercises(nb, path.name)))
    check_output(dest, edited_files(out, editions), force=force)
    dest.mkdir(parents=True, exist_ok=True)
    for target, (nb, _) in editions.items():
        write_text(target, nbformat.writes(nb) + "\n")
    record_written(out, editions)
    return {target: n for target, (_, n) in editions.items()}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=folder_arg, default=Path("build/student"),
                   help="folder for the student edition (notebooks land in OUT/notebooks/)")
    p.add_argument("--force", action="store_true",
                   help="replace copies a learner changed since they were written (their answers are lost)")


def run_cli(args: argparse.Namespace) -> int:
    paths = write_student_edition(args.out, force=args.force)
    print(f"student edition: {len(paths)} notebooks, {sum(paths.values())} exercises -> {Path(args.out) / 'notebooks'}")
    print("open them with: jupyter lab " + str(Path(args.out) / "notebooks"))
    return 0
