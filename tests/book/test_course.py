"""The nbgrader course (rev.book.course): metadata derived from the notebooks' tags, the release hiding what the
student edition hides, and nbgrader's own commands grading blank / wrong / right submissions 0 / partial / full.

The end-to-end test runs nbgrader as an instructor would, in a course folder, on the smoke profile; it needs the
`course` extra and skips, saying so, where nbgrader is not installed.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from rev.book import course, student
from rev.book.colab import _BADGE
from rev.chapters.shared.exercises import TODO, ExerciseNotAnswered, check
from rev.book.sequence import NOTEBOOK_DIR, SEQUENCE

QUICK = "01_integrator_theory"   # seconds on smoke, and two code exercises: a partial score is possible


def _notebook(name: str):
    return nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4)


def _meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def _param(source: str, name: str) -> str:
    return re.search(rf'^{name} = "([^"]*)"', source, re.M).group(1)


def _stub(cell) -> str:
    """Lines the student edition's stub put in (the same stub nbgrader's release must carry)."""
    return "\n".join(ln for ln in cell.source.splitlines() if 'raise NotImplementedError("Exercise' in ln)


@pytest.mark.parametrize("name", SEQUENCE)
def test_metadata_comes_from_the_tags(name):
    inst = _notebook(name)
    nb = course.course_notebook(inst, name, "smoke")
    hidden = {h.cell: h for h in student.hidden_cells(inst, name)}
    checks = {e.check_cell for e in student.exercises(inst, name) if e.check_cell is not None}
    ids = [_meta(c)["grade_id"] for c in nb.cells if _meta(c)]
    assert len(ids) == len(set(ids)), f"{name}: grade ids repeat: {ids}"
    assert all(re.fullmatch(r"[A-Za-z0-9_-]+", i) for i in ids), ids
    for i, cell in enumerate(nb.cells):
        m = _meta(cell)
        if i in hidden and hidden[i].kind == student.SOLUTION:
            assert m["solution"] and not m["grade"] and not m["locked"], (name, i, m)
        elif i in hidden:     # a written answer, graded by hand
            assert cell.cell_type == "markdown" and m["solution"] and m["grade"], (name, i, m)
            assert m["points"] == course.ANSWER_POINTS
        elif i in checks:
            assert m["grade"] and m["locked"] and not m["solution"] and m["points"] == course.CHECK_POINTS
        elif m:               # only the parameters and set-up cells besides: read-only, restored when grading
            assert m["grade_id"] in ("parameters", "setup") and m["locked"] and not (m["grade"] or m["solution"])
    assert {_meta(c).get("grade_id") for c in nb.cells} >= {"parameters", "setup"}
    # the rest of the notebook is the instructor's, word for word
    for i, (a, b) in enumerate(zip(inst.cells, nb.cells)):
        if i > 1:
            assert a.source == b.source, (name, i)
    assert "nbgrader" not in json.dumps([c.metadata for c in inst.cells]), "the instructor edition was changed"


def test_profile_badge_and_code_source_of_the_copy():
    inst = _notebook(QUICK)
    nb = course.course_notebook(inst, QUICK, "cpu")
    params = nb.cells[1].source
    assert _param(params, "PROFILE") == "cpu"
    assert _param(params, "REPO_URL") == "", "a clone of the repository brings the instructor notebooks along"
    assert _param(params, "BUNDLE_ZIP") == course.CODE_ZIP
    text = "\n".join(c.source for c in nb.cells)
    assert not _BADGE.search(text) and "github.com" not in text, "the release would point at the solutions"
    assert course.CODE_ZIP in nb.cells[0].source and nb.cells[0].source.startswith(inst.cells[0].source[:20])
    with pytest.raises(course.CourseError, match="profile 'auto'"):
        course.course_notebook(inst, QUICK, "auto")


def test_markers_outside_a_solution_cell_stop_both_editions():
    nb = _notebook(QUICK)
    nb.cells[4].source += f"\n\n    {student.BEGIN}\n"
    with pytest.raises(student.EditionError, match="outside a cell tagged 'solution'"):
        student.student_notebook(nb, QUICK)
    with pytest.raises(student.EditionError, match="outside a cell tagged 'solution'"):
        course.course_notebook(nb, QUICK, "smoke")


def test_an_unanswered_check_fails_only_while_nbgrader_grades(monkeypatch, capsys):
    def stub():
        raise NotImplementedError("Exercise 99.1: stub")

    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    assert check("99.1", stub) == TODO
    alone = capsys.readouterr().out.strip()
    assert alone.startswith("Exercise 99.1: not answered yet")
    for mode in ("autograde", "validate"):
        monkeypatch.setenv("NBGRADER_EXECUTION", mode)
        with pytest.raises(ExerciseNotAnswered) as e:
            check("99.1", stub)
        assert str(e.value) == alone, "the learner alone and the grader must see the same message"


def test_course_folder_and_its_code_zip(tmp_path):
    out = tmp_path / "c"
    written = course.build_course(out, [QUICK], "smoke")
    assert list(written) == [QUICK] and written[QUICK] == [out / "source" / QUICK / f"{QUICK}.ipynb"]
    config = (out / course.CONFIG).read_text()
    assert f"c.Execute.timeout = {course.CELL_TIMEOUT_S['smoke']}" in config
    names = zipfile.ZipFile(out / "source" / QUICK / course.CODE_ZIP).namelist()
    assert {"revbook/pyproject.toml", "revbook/README.md", "revbook/rev/__init__.py",
            "revbook/tests/core/test_reversible.py"} <= set(names)
    assert not [n for n in names if n.endswith(".ipynb") or "__pycache__" in n], "the code zip holds notebooks"
    course.build_course(out, [QUICK], "smoke")        # untouched since it was written: rebuilt without a word
    edited = out / "source" / QUICK / f"{QUICK}.ipynb"
    edited.write_text(edited.read_text().replace('"points": 1', '"points": 3'))   # an instructor's edit
    with pytest.raises(ValueError, match=rf"source/{QUICK}/{QUICK}.ipynb would be replaced .* --force"):
        course.build_course(out, [QUICK], "smoke")
    assert '"points": 3' in edited.read_text()
    course.build_course(out, [QUICK], "smoke", force=True)
    assert '"points": 3' not in edited.read_text()
    with pytest.raises(course.CourseError, match="grades on profile smoke"):
        course.build_course(out, ["02_tests"], "cpu")
    with pytest.raises(course.CourseError, match="no notebook 99_nothing"):
        course.build_course(out, ["99_nothing"], "smoke")
    both = course.build_course(out, [QUICK, "02_tests"], "smoke", assignment="ps1")
    assert [p.name for p in both["ps1"]] == [f"{QUICK}.ipynb", "02_tests.ipynb"]


def test_the_command(tmp_path, capsys):
    from rev.__main__ import main

    assert main(["course", "--out", str(tmp_path), "--notebooks", QUICK, "--profile", "cpu"]) == 0
    assert f"nbgrader generate_assignment {QUICK}" in capsys.readouterr().out
    assert "profile cpu" in (tmp_path / course.CONFIG).read_text()
    with pytest.raises(SystemExit, match="grades on profile cpu"):
        main(["course", "--out", str(tmp_path), "--notebooks", "02_tests"])


def _nbgrader(course_dir: Path, *args: str) -> None:
    # the suite runs as two single-threaded workers; the grading kernels inherit one thread each
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    env.pop("NBGRADER_EXECUTION", None)
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course_dir, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


def _submit(course_dir: Path, student_id: str, nb) -> None:
    folder = course_dir / "submitted" / student_id / QUICK
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / f"{QUICK}.ipynb")


@pytest.mark.slow
def test_nbgrader_grades_blank_wrong_and_right_submissions(tmp_path):
    pytest.importorskip("nbgrader", reason="nbgrader is not installed: pip install -e '.[course]'")
    from nbgrader.api import Gradebook

    out = tmp_path / "course"
    course.build_course(out, [QUICK], "smoke")
    _nbgrader(out, "generate_assignment", QUICK)

    # the release: nothing of the solutions, and hidden exactly as the student edition hides
    inst = _notebook(QUICK)
    release_path = out / "release" / QUICK / f"{QUICK}.ipynb"
    release = nbformat.read(release_path, as_version=4)
    raw = release_path.read_text()
    for h in student.hidden_cells(inst, QUICK):
        if h.kind == student.SOLUTION:
            body, inside = [], False
            for ln in inst.cells[h.cell].source.splitlines():
                inside = (inside or ln.strip() == student.BEGIN) and ln.strip() != student.END
                if inside and len(ln.strip()) >= 10 and ln.strip() != student.BEGIN:   # long enough to be telling
                    body.append(ln.strip())
            leaked = [ln for ln in body if ln in release.cells[h.cell].source]
            assert not leaked, f"solution lines in the release: {leaked}"
    assert "BEGIN SOLUTION" not in raw and "<details>" not in raw
    assert not _BADGE.search(raw) and "github.com" not in raw
    assert _param(release.cells[1].source, "PROFILE") == "smoke"
    edition = student.student_notebook(inst, QUICK)
    assert len(edition.cells) == len(release.cells)
    for i, (a, b) in enumerate(zip(edition.cells, release.cells)):
        if i > 1:
            assert a.source == b.source, f"cell {i}: the release and the student edition differ"
    assert (out / "release" / QUICK / course.CODE_ZIP).is_file()

    # three learners: nothing answered; the first exercise right and the second wrong; everything right
    codes = [i for i, c in enumerate(release.cells) if _meta(c).get("grade_id", "").endswith("_code")]
    assert len(codes) == 2, "the test needs a notebook with two code exercises"
    source = nbformat.read(out / "source" / QUICK / f"{QUICK}.ipynb", as_version=4)
    right, wrong = nbformat.from_dict(release), nbformat.from_dict(release)
    for i in codes:
        right.cells[i].source = source.cells[i].source
    wrong.cells[codes[0]].source = source.cells[codes[0]].source
    second = wrong.cells[codes[1]]
    assert "x_next" in second.source and "x_curr" in second.source, "exercise 01.2's function changed"
    stub = _stub(second)
    second.source = second.source.replace(stub, stub[:len(stub) - len(stub.lstrip())] + "return x_next, x_curr")
    _submit(out, "blank", release)
    _submit(out, "wrong", wrong)
    _submit(out, "right", right)

    _nbgrader(out, "autograde", QUICK)
    with Gradebook(f"sqlite:///{out / 'gradebook.db'}") as gb:
        scores = {s: gb.find_submission_notebook(QUICK, QUICK, s) for s in ("blank", "wrong", "right")}
        got = {s: (nb.code_score, nb.max_code_score) for s, nb in scores.items()}
    assert got == {"blank": (0, 2), "wrong": (1, 2), "right": (2, 2)}, got

    def check_errors(student_id: str) -> list[str]:
        nb = nbformat.read(out / "autograded" / student_id / QUICK / f"{QUICK}.ipynb", as_version=4)
        return [f"{o.ename}: {o.evalue}" for c in nb.cells if _meta(c).get("grade_id", "").endswith("_check")
                for o in c.outputs if o.output_type == "error"]

    blank = check_errors("blank")
    assert len(blank) == 2 and all("ExerciseNotAnswered: Exercise 01." in e and "not answered yet" in e
                                   for e in blank), blank
    assert [e.split(":")[0] for e in check_errors("wrong")] == ["ExerciseFailed"]
    assert check_errors("right") == []

    _nbgrader(out, "generate_feedback", QUICK)
    feedback = (out / "feedback" / "wrong" / QUICK / f"{QUICK}.html").read_text()
    assert "Exercise 01.2: not yet right" in feedback
