"""`python -m rev course --out DIR [--notebooks NAME ...] [--profile smoke|cpu]`: an nbgrader course folder made
from the instructor edition, ready for nbgrader's own commands (`generate_assignment`, `autograde`,
`generate_feedback`) run inside DIR.

What it writes:

* ``DIR/nbgrader_config.py``: per-cell time limits for the chosen profile, and the release preprocessors
  (`release_preprocessors`), so that `nbgrader generate_assignment` hides exactly what the student edition hides,
  with the same stubs (`rev.book.student.hidden_cells` decides, for both).
* ``DIR/source/<assignment>/``: the chosen notebooks with nbgrader cell metadata derived from the tags they
  already carry -- a `solution` cell becomes an autograded answer, its `check` cell an autograded test worth
  `CHECK_POINTS`, an `answer` cell a manually graded written answer worth `ANSWER_POINTS`; the parameters and
  set-up cells become read-only, so autograde restores them -- and ``revbook.zip``, the code without any
  notebook.

One assignment per notebook, named after it (``01_integrator_theory``), unless `--assignment NAME` puts all the
chosen notebooks into one: every notebook runs on its own from its parameters cell, holds two to four exercises
(a problem set's worth), and is graded within its own time limit, so an instructor can release them week by
week and a slow notebook never holds up the grading of another.

Grading runs on the instructor's profile: each copy's parameters cell sets `PROFILE` (nbgrader passes no
papermill parameters, so "auto" would pick `cpu` and take minutes per student), and that cell is locked and
restored before grading. The release never points at solutions: the Colab badge (which opens the instructor
notebook on GitHub, and from which nothing could be submitted anyway) is replaced by a line on where the code
comes from, and `REPO_URL` (a clone would bring the instructor notebooks along) gives way to `BUNDLE_ZIP`, the
code zip handed out with the assignment, which the set-up cell installs where `rev` is missing.
"""
from __future__ import annotations

import argparse
import copy
import re
import zipfile
from pathlib import Path

from ..base.cli import folder_arg
from ..base.files import atomic_path, check_output, edited_files, record_written, write_text
from . import student
from .colab import SETUP_CELL, _BADGE, code_cells

CHECK_POINTS = 1              # an autograded check cell
ANSWER_POINTS = 1             # a written answer, graded by hand in nbgrader's formgrader
SCHEMA_VERSION = 3            # nbgrader's cell metadata schema (0.9)
CODE_ZIP = "revbook.zip"      # handed out with every assignment; unpacks into revbook/ like `python -m rev bundle`
CONFIG = "nbgrader_config.py"
# Seconds one cell may run while nbgrader executes it, per profile (nbgrader's default, 30 s, is too short for
# some). The whole smoke workbook runs in minutes and the whole cpu one in under half an hour on 2 cores, so a
# cell stays well inside these on a slower grading machine, while a hung one still ends: it is interrupted,
# fails (a check earns nothing), and grading goes on with the next cell.
CELL_TIMEOUT_S = {"smoke": 300, "cpu": 1800}
_CONFIG_MARK = re.compile(r"^# revbook course, profile (\w+)$", re.M)
_BADGE_LINE = re.compile(r"^.*" + _BADGE.pattern + r".*\n?", re.M)    # the whole line that holds a badge
_ID = re.compile(r"[^A-Za-z0-9_-]")
_SETUP_LINE = next(ln for ln in SETUP_CELL.splitlines() if ln.startswith("# Set-up:"))


class CourseError(ValueError):
    """The course cannot be built as asked; the message says why and what to do."""


def grade_id(exercise: str, part: str) -> str:
    """nbgrader's id for one cell of an exercise (letters, digits, _ and - only): ex01b_1_check."""
    return _ID.sub("_", f"ex{exercise}_{part}")


def _nbgrader(cell, grade_id_: str, *, solution: bool = False, grade: bool = False, locked: bool = False,
              points: int | None = None) -> None:
    meta = {"grade": grade, "grade_id": grade_id_, "locked": locked, "schema_version": SCHEMA_VERSION,
            "solution": solution}
    if points is not None:
        meta["points"] = points
    cell.metadata["nbgrader"] = meta


def _set_parameter(source: str, name: str, line: str, where: str) -> str:
    pattern = re.compile(rf"^{name} = .*$", re.M)
    if not pattern.search(source):
        raise CourseError(f"{where}: the parameters cell has no `{name} = ...` line")
    return pattern.sub(lambda _: line, source, count=1)


def course_notebook(nb, name: str, profile: str):
    """The course's source copy of instructor notebook `nb` (left as it is): nbgrader metadata from its tags,
    `PROFILE` fixed to `profile`, the code from `CODE_ZIP` instead of a clone, no Colab badge."""
    if profile not in CELL_TIMEOUT_S:
        raise CourseError(f"profile {profile!r}: a course grades on one of {', '.join(CELL_TIMEOUT_S)}")
    nb = copy.deepcopy(nb)
    hidden = {h.cell: h for h in student.hidden_cells(nb, name)}    # validates the conventions first
    answers: dict[str, int] = {}
    for h in hidden.values():
        cell = nb.cells[h.cell]
        if h.kind == student.SOLUTION:
            _nbgrader(cell, grade_id(h.exercise.id, "code"), solution=True)
        else:   # a second written answer to the same exercise gets its own id
            answers[h.exercise.id] = answers.get(h.exercise.id, 0) + 1
            part = "answer" + (str(answers[h.exercise.id]) if answers[h.exercise.id] > 1 else "")
            _nbgrader(cell, grade_id(h.exercise.id, part), solution=True, grade=True, points=ANSWER_POINTS)
    for ex in student.exercises(nb, name):
        if ex.check_cell is not None:
            _nbgrader(nb.cells[ex.check_cell], grade_id(ex.id, "check"), grade=True, locked=True,
                      points=CHECK_POINTS)

    code = code_cells(nb)
    params = code[0]
    if "parameters" not in student._tags(params):
        raise CourseError(f"{name}: its first code cell is not tagged 'parameters'")
    src = _set_parameter(params.source, "PROFILE", f'PROFILE = "{profile}"  # the course\'s profile: '
                         f'graded on it (this cell is restored before grading)', name)
    src = _set_parameter(src, "REPO_URL", 'REPO_URL = ""  # unused: the code comes with this assignment '
                         f'({CODE_ZIP})', name)
    params.source = _set_parameter(src, "BUNDLE_ZIP", f'BUNDLE_ZIP = "{CODE_ZIP}"  # the code (no notebooks), '
                                   f'next to this notebook', name)
    _nbgrader(params, "parameters", locked=True)
    if len(code) > 1 and _SETUP_LINE in code[1].source.splitlines():   # the set-up cell, as rev.book.colab writes it
        _nbgrader(code[1], "setup", locked=True)

    note = (f"*Course release: work on this notebook and submit it where your course hands it out. Where `rev` "
            f"is not installed, the set-up cell installs it from `{CODE_ZIP}`, which comes with the notebook.*\n")
    first = True
    for cell in nb.cells:
        if cell.cell_type == "markdown" and _BADGE.search(cell.source):
            cell.source = _BADGE_LINE.sub(note if first else "", cell.source)
            first = False
    nb.metadata["revbook_edition"] = f"course source, profile {profile}"
    return nb


def code_files(root: Path) -> list[Path]:
    """What `CODE_ZIP` holds, relative to `root`: the package, the tests notebook 02 runs, and what `pip install
    -e` needs; never a notebook (the repository's notebooks and the tests' reference copies hold solutions)."""
    from .bundle import code_files as bundle_files

    keep = ("rev", "tests", "pyproject.toml", "README.md")
    return [p for p in bundle_files(root) if p.parts[0] in keep and p.suffix != ".ipynb"]


def write_code_zip(path: Path, root: Path) -> Path:
    from .bundle import TOP

    with atomic_path(path) as tmp, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel in code_files(root):
            zf.write(root / rel, f"{TOP}/{rel.as_posix()}")
    return path


def release_preprocessors() -> list[type]:
    """nbgrader's `generate_assignment` preprocessors, with its `ClearSolutions` replaced by one that hides the
    cells `rev.book.student.hidden_cells` names, exactly as the student edition does (same stubs, same answer
    prompt); other cells still go through nbgrader's own. Used by the course's nbgrader_config.py."""
    from nbgrader.converters import GenerateAssignment
    from nbgrader.preprocessors import ClearSolutions

    class ClearExercises(ClearSolutions):
        def preprocess(self, nb, resources):
            # the notebook as nbgrader has it here (a configured header included), so cell indices match
            name = resources.get("unique_key", "notebook")
            self._hidden = {h.cell: h for h in student.hidden_cells(nb, name)}
            return super().preprocess(nb, resources)

        def preprocess_cell(self, cell, resources, index):
            h = self._hidden.get(index)
            if h is None:
                return super().preprocess_cell(cell, resources, index)
            cell.source = student.hidden_source(cell.source, h, f"cell {index}")
            return cell, resources

    stock = GenerateAssignment.class_traits()["preprocessors"].default()
    if ClearSolutions not in stock:
        raise CourseError("this nbgrader's generate_assignment has no ClearSolutions step to replace")
    return [ClearExercises if p is ClearSolutions else p for p in stock]


def config_text(profile: str, course_id: str) -> str:
    return f'''\
"""nbgrader settings of a revbook course. Run nbgrader's commands in this folder."""
# revbook course, profile {profile}
# (written by `python -m rev course`; a rebuild rewrites this file, so keep changes to the lines below few)
c = get_config()  # noqa: F821 (nbgrader defines it)
c.CourseDirectory.course_id = "{course_id}"

# Every notebook in source/ runs on the {profile!r} profile (its locked parameters cell says so). One cell may run
# {CELL_TIMEOUT_S[profile]} s; a cell over the limit is interrupted and fails, and grading goes on.
c.Execute.timeout = {CELL_TIMEOUT_S[profile]}
c.Execute.interrupt_on_timeout = True

# The release hides what the student edition hides, with the same stubs (rev.book.student.hidden_cells).
from rev.book.course import release_preprocessors  # noqa: E402

c.GenerateAssignment.preprocessors = release_preprocessors()
'''


def build_course(out: str | Path, notebooks: list[str] | None = None, profile: str = "smoke",
                 assignment: str | None = None, course_id: str = "revbook",
                 force: bool = False) -> dict[str, list[Path]]:
    """Write (or add to) the nbgrader course in `out`: `notebooks` (names in the workbook's order, default all),
    one assignment each or all in `assignment`; returns each assignment's source notebooks. A file it would
    overwrite or delete that changed since it wrote it (an instructor's edit in source/, or a file it never
    wrote) is replaced only with `force` (`rev.base.files.check_output`)."""
    import nbformat

    from .bundle import source_root
    from .sequence import NOTEBOOK_DIR, SEQUENCE, read_notebook

    if profile not in CELL_TIMEOUT_S:
        raise CourseError(f"--profile {profile}: a course grades on one of {', '.join(CELL_TIMEOUT_S)}")
    names = list(notebooks or SEQUENCE)
    unknown = [n for n in names if n not in SEQUENCE]
    if unknown:
        raise CourseError(f"no notebook {', '.join(unknown)}; choose from {', '.join(SEQUENCE)}")
    for flag, value in (("--assignment", assignment), ("--course-id", course_id)):
        if value is not None and (not value or _ID.search(value)):   # "" would silently mean the default
            raise CourseError(f"{flag} {value!r}: use letters, digits, _ and - only (at least one)")
    out = Path(out)
    config = out / CONFIG
    m = _CONFIG_MARK.search(config.read_text()) if config.is_file() else None
    if m is not None and m.group(1) != profile:
        raise CourseError(f"{out} grades on profile {m.group(1)} (its {CONFIG}); build with --profile "
                          f"{m.group(1)}, or into another --out")
    plan = {assignment: names} if assignment else {n: [n] for n in names}
    folders = {a: out / "source" / a for a in plan}
    # what a rebuild overwrites or deletes: an instructor edits source/ (points, say) and nbgrader_config.py
    replaced = [config] + [p for a, members in plan.items() for p in
                           {*folders[a].glob("*.ipynb"), *(folders[a] / f"{n}.ipynb" for n in members),
                            folders[a] / CODE_ZIP}]
    check_output(out, edited_files(out, replaced), force=force)

    root = source_root()
    written: dict[str, list[Path]] = {}
    for a, members in plan.items():
        folder = folders[a]
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.ipynb"):   # a rebuild with fewer notebooks leaves none behind
            old.unlink()
        written[a] = []
        for n in members:
            nb = read_notebook(NOTEBOOK_DIR / f"{n}.ipynb")
            target = folder / f"{n}.ipynb"
            write_text(target, nbformat.writes(course_notebook(nb, n, profile)) + "\n")
            written[a].append(target)
        write_code_zip(folder / CODE_ZIP, root)
    write_text(config, config_text(profile, course_id))
    record_written(out, [config] + [p for a, paths in written.items() for p in (*paths, folders[a] / CODE_ZIP)])
    return written


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=folder_arg, required=True, help="the course folder (nbgrader's commands run inside it)")
    p.add_argument("--notebooks", nargs="+", metavar="NAME", help="notebooks to include (default: all), e.g. "
                   "01_integrator_theory 02_tests")
    p.add_argument("--profile", choices=sorted(CELL_TIMEOUT_S), default="smoke",
                   help="the profile students run and grading uses (default smoke: seconds per notebook)")
    p.add_argument("--assignment", help="put all the notebooks into one assignment of this name "
                   "(default: one assignment per notebook, named after it)")
    p.add_argument("--course-id", default="revbook", help="nbgrader's course id (default revbook)")
    p.add_argument("--force", action="store_true",
                   help="rebuild although files in source/ or nbgrader_config.py changed since they were written")


def run_cli(args: argparse.Namespace) -> int:
    written = build_course(args.out, args.notebooks, args.profile, args.assignment, args.course_id, args.force)
    for a, paths in written.items():
        print(f"source/{a}/: {', '.join(p.name for p in paths)} + {CODE_ZIP}")
    first = next(iter(written))
    print(f"course in {args.out} (profile {args.profile}). Next, inside it: nbgrader generate_assignment {first}; "
          f"then collect submissions into submitted/<student>/{first}/, nbgrader autograde {first}, grade the "
          f"written answers in the formgrader, nbgrader generate_feedback {first}")
    try:
        import nbgrader  # noqa: F401
    except ImportError:
        print('nbgrader is not installed here: pip install -e ".[course]"')
    return 0
