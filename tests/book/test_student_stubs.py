"""The student edition hides each solution whole: in every stubbed cell of every notebook, what stood between
`### BEGIN SOLUTION` and `### END SOLUTION` is gone (one stub line stands in its place) and everything outside the
markers is kept as it was. Written from the markers' definition, not from `rev.book.student`'s own loop."""
from __future__ import annotations

import nbformat
import pytest

from rev.book import student
from rev.book.sequence import NOTEBOOK_DIR, SEQUENCE


def _split(source: str) -> tuple[list[str], list[list[str]], list[str]]:
    """(lines outside the solution regions, each region's lines, each region's indentation)."""
    outside, regions, indents, inside = [], [], [], False
    for line in source.splitlines():
        if line.strip() == student.BEGIN:
            inside = True
            regions.append([])
            indents.append(line[:len(line) - len(line.lstrip())])
            outside.append(None)          # where the stub goes
        elif line.strip() == student.END:
            inside = False
        elif inside:
            regions[-1].append(line)
        else:
            outside.append(line)
    return outside, regions, indents


def _stubbed_cells(name: str):
    nb = nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4)
    edition = student.student_notebook(nb, name)
    return [(h, nb.cells[h.cell].source, edition.cells[h.cell].source)
            for h in student.hidden_cells(nb, name) if h.kind == student.SOLUTION]


@pytest.mark.parametrize("name", SEQUENCE)
def test_no_solution_line_survives_its_stub(name):
    cells = _stubbed_cells(name)
    for hidden, instructor, stubbed in cells:
        outside, regions, indents = _split(instructor)
        assert regions and all(regions), f"{name}, cell {hidden.cell}: a solution cell with an empty region"
        kept = set(ln for ln in outside if ln is not None)
        got = stubbed.splitlines()
        leaked = [ln for region in regions for ln in region if ln.strip() and ln not in kept and ln in got]
        assert not leaked, f"{name}, cell {hidden.cell}: solution code kept in the student edition: {leaked[:3]}"
        stubs = iter(indents)
        want = [ln if ln is not None else next(stubs) + student.STUB.format(
            id=hidden.exercise.id, title=hidden.exercise.title.replace('"', "'")) for ln in outside]
        assert got == want, f"{name}, cell {hidden.cell}: the student cell is not the instructor's with each " \
                            f"solution region replaced by its stub"


def test_every_notebook_with_code_exercises_is_walked():
    walked = {name for name in SEQUENCE if _stubbed_cells(name)}
    assert len(walked) >= len(SEQUENCE) // 2, f"only {sorted(walked)} have stubbed cells"
