"""Exercises in every notebook, and the two editions made from one source (rev.chapters.shared.exercises, rev.book.student).

Each code exercise is run as a learner would meet it, in a fresh namespace: the notebook's parameters cell (on
the smoke profile), its solution cell, its check cell. The instructor edition must pass; the student edition's
stub must be reported as not answered, by name, without an exception escaping the check cell.
"""
from __future__ import annotations

import contextlib
import io
import os

import matplotlib
import nbformat
import pytest

matplotlib.use("Agg")

from rev.book import student  # noqa: E402
from rev.chapters.shared.exercises import PASS, TODO, ExerciseFailed, check  # noqa: E402
from rev.book.sequence import NOTEBOOK_DIR, SEQUENCE  # noqa: E402


def _notebook(name: str):
    return nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4)


INSTRUCTOR = {name: _notebook(name) for name in SEQUENCE}
STUDENT = {name: student.student_notebook(nb, name) for name, nb in INSTRUCTOR.items()}
CODE_EXERCISES = [(name, ex) for name, nb in INSTRUCTOR.items() for ex in student.exercises(nb, name)
                  if ex.solution_cell is not None]


def test_check_reports_each_outcome_by_name(capsys):
    def stub():
        raise NotImplementedError("Exercise 99.1: stub")

    def wrong():
        assert 1 + 1 == 3, "1 + 1 is 2: look at the carry"

    assert check("99.1", stub) == TODO
    assert "Exercise 99.1: not answered yet" in capsys.readouterr().out
    with pytest.raises(ExerciseFailed, match=r"Exercise 99\.1: not yet right\. 1 \+ 1 is 2"):
        check("99.1", wrong)
    assert check("99.1", lambda: "checked the sum") == PASS
    assert "Exercise 99.1: passed. checked the sum" in capsys.readouterr().out


@pytest.mark.parametrize("name", SEQUENCE)
def test_every_notebook_has_exercises_of_the_conventions(name):
    found = student.exercises(INSTRUCTOR[name], name)
    assert 2 <= len(found) <= 5, f"{name} has {len(found)} exercises; the workbook asks for 2-4 per notebook"
    assert len({e.id for e in found}) == len(found), f"{name}: exercise ids repeat"
    prefix = name.split("_")[0]
    assert all(e.id.startswith(prefix + ".") for e in found), [e.id for e in found]
    for e in found:
        assert (e.solution_cell is None) == (e.check_cell is None), f"{name} {e.id}: a solution needs its check"


@pytest.mark.parametrize("name", SEQUENCE)
def test_editions_differ_only_where_they_should(name):
    inst, stud = INSTRUCTOR[name], STUDENT[name]
    inst_src = "\n".join(c.source for c in inst.cells)
    stud_src = "\n".join(c.source for c in stud.cells)
    assert 'NotImplementedError("Exercise' not in inst_src, "a stub was committed in the instructor edition"
    assert student.BEGIN not in stud_src and student.END not in stud_src, "a solution leaked into the student edition"
    assert "<details>" not in "\n".join(c.source for c in stud.cells if "answer" in student._tags(c))
    assert len(inst.cells) == len(stud.cells)
    for a, b in zip(inst.cells, stud.cells):
        if not ({"solution", "answer"} & set(student._tags(a))):
            assert a.source == b.source
    n_code = sum(e.solution_cell is not None for e in student.exercises(inst, name))
    assert stud_src.count('raise NotImplementedError("Exercise') >= n_code


def _run_pair(nb, ex) -> str:
    """Parameters cell, solution cell and check cell of `ex`, alone, in a fresh namespace; the printed text."""
    first_code = next(c for c in nb.cells if c.cell_type == "code")
    ns: dict = {"__name__": "__main__"}
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(NOTEBOOK_DIR)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(first_code.source, f"{ex.notebook}:parameters", "exec"), ns)
            ns["PROFILE"] = "smoke"
            for i in (ex.solution_cell, ex.check_cell):
                exec(compile(nb.cells[i].source, f"{ex.notebook}:cell{i}", "exec"), ns)
    finally:
        os.chdir(cwd)
    return out.getvalue()


@pytest.mark.parametrize("name,ex", CODE_EXERCISES, ids=[ex.id for _, ex in CODE_EXERCISES])
def test_code_exercise_passes_on_solution_and_waits_on_stub(name, ex):
    assert f"Exercise {ex.id}: {PASS}" in _run_pair(INSTRUCTOR[name], ex)
    assert f"Exercise {ex.id}: {TODO}" in _run_pair(STUDENT[name], ex)


def test_student_command_writes_every_notebook(tmp_path):
    from rev.__main__ import main

    assert main(["student", "--out", str(tmp_path)]) == 0
    written = sorted(p.stem for p in (tmp_path / "notebooks").glob("*.ipynb"))
    assert written == sorted(SEQUENCE)


def test_broken_markers_are_refused():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("### Exercise 99.1 (derive): x"),
                nbformat.v4.new_code_cell("def f():\n    ### BEGIN SOLUTION\n    return 1\n",
                                          metadata={"tags": ["solution"]})]
    with pytest.raises(student.EditionError, match="without ### END SOLUTION"):
        student.student_notebook(nb, "99_x")
