"""Reference outputs of the checked notebook cells, for every notebook (CI's nbval step).

`notebooks/` carries no outputs (learners open clean notebooks), so nbval alone could only compare a notebook
with itself. Instead the repository keeps, under `tests/notebooks/`, a *reference copy* of each notebook
executed on the `smoke` profile in which only the outputs of checked cells (tagged `nbval-check-output`) are kept (no other
outputs, no images, no machine-specific metadata, no papermill-injected parameters).

    python -m rev nbref                              # execute the workbook (smoke) and write the references
    python -m rev nbref --from build/ci/notebooks    # or take an already executed build folder
    python -m rev nbref --check build/ci/notebooks   # CI: compare fresh executed copies with the references
                                                     # (and find what a reader should not see: `outputs.NOISE`)

The check does not execute anything: it compares the copies the workbook has just executed with the reference,
cell by cell, with nbval's own rules (which cells are checked, stream coalescing, which output keys are
compared: images, metadata and execution counts are not). Text must match word for word; the numbers in it
must match to `REL_TOL` (four significant digits), and two numbers both below `ROUNDOFF` in size count as
equal: they are round-off residues (an fp64 defect of 1e-13 on one CPU, 2e-13 on another), which differ
between machines whose vector units order or fuse a sum differently. A real change (a verdict, a count, a
third digit) is still reported. Re-running the notebooks under `pytest --nbval-lax`
would double CI's notebook time and, worse, run them a second time against the results the first run left
behind, which some notebooks reuse instead of recomputing: the outputs compared would not be the ones a fresh
run prints.
"""
from __future__ import annotations

import argparse
import copy
import difflib
import math
import re
from pathlib import Path

from ..base.cli import existing_folder, folder_arg
from ..base.files import check_output, write_text
from .outputs import noise_lines
from .sequence import read_notebook

REPO = Path(__file__).resolve().parents[2]
REFERENCE_DIR = REPO / "tests" / "notebooks"
REGENERATE = "python -m rev nbref"
INJECTED = "injected-parameters"  # papermill's tag for the cell holding the run's (machine-specific) parameters
DROPPED_KEYS = ("image/png", "image/jpeg", "image/svg+xml")  # figures: never stored in the reference
REL_TOL = 1e-3     # printed numbers agree to this relative difference (1126.402 ~ 1126.404; 0.384 !~ 0.385)
ROUNDOFF = 1e-10   # numbers smaller than this on both sides are round-off residues, whatever their digits
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def is_checked(cell) -> bool:
    """nbval's own rule for `--nbval-lax`: a `# NBVAL_CHECK_OUTPUT` comment or an `nbval-check-output` tag."""
    from nbval.plugin import find_comment_markers, find_metadata_tags

    if cell.get("cell_type") != "code":
        return False
    markers = dict(find_comment_markers(cell.source)) | dict(find_metadata_tags(cell.metadata))
    return bool(markers.get("check"))


def _clean_output(out):
    out = copy.deepcopy(out)
    if "data" in out:
        out["data"] = {k: v for k, v in out["data"].items() if k not in DROPPED_KEYS}
    if "metadata" in out:
        out["metadata"] = {}
    if "execution_count" in out:
        out["execution_count"] = None
    return out


def reference_copy(executed):
    """The reference kept for an executed notebook: every cell's source, only checked cells' outputs."""
    import nbformat

    ref = nbformat.v4.new_notebook()
    ref.metadata = {k: v for k, v in executed.metadata.items() if k == "kernelspec"}
    for cell in executed.cells:
        tags = list(cell.metadata.get("tags", []))
        if INJECTED in tags:
            continue
        keep = copy.deepcopy(cell)
        keep.metadata = {"tags": tags} if tags else {}
        if keep.cell_type == "code":
            keep.execution_count = None
            keep.outputs = [_clean_output(o) for o in cell.outputs] if is_checked(cell) else []
        ref.cells.append(keep)
    return ref


def _comparable(outputs) -> dict[str, list]:
    """nbval's view of a cell's outputs: streams merged, each compared key -> its values in order."""
    import nbformat
    from nbval.plugin import coalesce_streams, transform_streams_for_comparison

    # nbval 0.11's IPyNbFile.skip_compare, plus svg: figures are not facts
    skip = ("metadata", "traceback", "prompt_number", "output_type", "name", "execution_count",
            "application/vnd.jupyter.widget-view+json", *DROPPED_KEYS)
    flat: dict[str, list] = {}
    outs = transform_streams_for_comparison(coalesce_streams([nbformat.from_dict(o) for o in outputs]))
    for out in outs:
        for key, value in out.items():
            if key in skip:
                continue
            items = value.items() if key == "data" else [(key, value)]
            for k, v in items:
                if k not in skip:
                    flat.setdefault(k, []).append(v)
    return flat


def _text(flat: dict[str, list]) -> list[str]:
    return [line for k in sorted(flat) for v in flat[k] for line in (f"[{k}]", *str(v).splitlines())]


def _split_numbers(text: str) -> tuple[list[str], list[float]]:
    """The words of `text` with every number replaced by a slot, and the numbers; runs of blanks count as one
    (a table's column widths follow the widest entry, which round-off can lengthen)."""
    numbers = [float(m) for m in _NUMBER.findall(text)]
    words = " ".join(_NUMBER.sub("#", text).split())
    return words.split("#"), numbers


def _same_number(a: float, b: float) -> bool:
    return (abs(a) < ROUNDOFF and abs(b) < ROUNDOFF) or math.isclose(a, b, rel_tol=REL_TOL, abs_tol=0.0)


def equivalent_text(a: str, b: str) -> bool:
    """Whether two printed outputs say the same thing: the same words, the same numbers to `REL_TOL`, residues
    below `ROUNDOFF` alike."""
    (wa, na), (wb, nb) = _split_numbers(a), _split_numbers(b)
    return wa == wb and len(na) == len(nb) and all(_same_number(x, y) for x, y in zip(na, nb))


def _equivalent(a: dict[str, list], b: dict[str, list]) -> bool:
    return a.keys() == b.keys() and all(
        len(a[k]) == len(b[k]) and all(equivalent_text(str(x), str(y)) for x, y in zip(a[k], b[k])) for k in a)


def compare(fresh, reference, name: str = "notebook") -> list[str]:
    """Differences between the checked cells of a freshly executed notebook and its reference ([] = equal).

    Checked cells are matched in order and must have the same source: a checked cell edited since the
    reference was written is reported (regenerate), never silently skipped."""
    got = [c for c in fresh.cells if is_checked(c) and INJECTED not in c.metadata.get("tags", [])]
    want = [c for c in reference.cells if is_checked(c)]
    problems = []
    if [c.source for c in got] != [c.source for c in want]:
        return [f"{name}: the checked cells differ from the reference's ({len(got)} now, {len(want)} in the "
                f"reference, or a source changed): regenerate it with `{REGENERATE}`"]
    for k, (g, w) in enumerate(zip(got, want), 1):
        a, b = _comparable(w.outputs), _comparable(g.outputs)
        if not _equivalent(a, b):
            first = g.source.splitlines()[1] if "\n" in g.source else g.source
            diff = "\n".join(difflib.unified_diff(_text(a), _text(b), "reference", "fresh run", lineterm=""))
            problems.append(f"{name}, checked cell {k} ({first.strip()[:60]}...):\n{diff}")
    return problems


def write_references(executed_dir: str | Path, out_dir: str | Path = REFERENCE_DIR) -> list[Path]:
    """Write a reference copy for every notebook of the workbook, all found in `executed_dir`. Every copy is read
    and made before any reference is written: with one missing or unreadable, the references stay as they were."""
    import nbformat

    from .sequence import SEQUENCE

    missing = [name for name in SEQUENCE if not (Path(executed_dir) / f"{name}.ipynb").is_file()]
    if missing:
        raise FileNotFoundError(f"no executed copy of {', '.join(missing)} in {executed_dir}; no reference was "
                                f"written: give the folder of a whole workbook run, or run `{REGENERATE}`")
    refs = {Path(out_dir) / f"{name}.ipynb":
            reference_copy(read_notebook(Path(executed_dir) / f"{name}.ipynb")) for name in SEQUENCE}
    # its purpose is to write tests/notebooks/; nowhere else in the checkout
    check_output(out_dir, may_write=[REFERENCE_DIR], what="nbref")
    for path, ref in refs.items():
        write_text(path, nbformat.writes(ref) + "\n")
    return list(refs)


def check_references(executed_dir: str | Path, ref_dir: str | Path = REFERENCE_DIR) -> list[str]:
    """Compare every reference in `ref_dir` with its executed copy in `executed_dir`; returns the problems."""

    refs = sorted(Path(ref_dir).glob("*.ipynb"))
    if not refs:
        return [f"no reference notebooks in {ref_dir}: write them with `{REGENERATE}`"]
    from .sequence import SEQUENCE

    have = {r.stem for r in refs}
    problems = [f"{name}: no reference output yet: write it with `{REGENERATE}`" for name in SEQUENCE
                if name not in have]
    for ref in refs:
        fresh = Path(executed_dir) / ref.name
        if not fresh.exists():
            problems.append(f"{ref.stem}: no executed copy at {fresh}")
            continue
        executed = read_notebook(fresh)
        problems += compare(executed, read_notebook(ref), ref.stem)
        problems += [f"{line}\n  (print a sentence: paths through `shown_path`, checks through "
                     f"`rev.chapters.shared.tables.checked`, tables through `tidy`)"
                     for line in noise_lines(executed, ref.stem)]
    return problems


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from", dest="source", type=existing_folder,
                   help="take this folder of executed notebooks instead of executing the workbook")
    p.add_argument("--check", type=existing_folder, metavar="EXECUTED_DIR",
                   help="compare the executed notebooks in this folder with the references; exit 1 on a difference")
    p.add_argument("--out", type=folder_arg, default=Path("build/nbref"),
                   help="build folder when the workbook is executed (default build/nbref)")
    p.add_argument("--force", action="store_true",
                   help="build in --out although its results/ or notebooks/ hold files an nbref run did not write")


# Marks OUT/results as nbref's own scratch results, which every run clears (a fresh results folder, as in CI).
SCRATCH_MARK = ".nbref-scratch"


def _execute(out: Path, force: bool) -> Path:
    """Execute the workbook on smoke in `out` with fresh results; returns the folder of executed copies."""
    import shutil

    from .workbook import run_workbook, foreign_copies

    results = out / "results"
    theirs = [] if (results / SCRATCH_MARK).is_file() or not results.is_dir() else \
        [p for p in results.rglob("*") if p.is_file()]
    check_output(out, theirs + foreign_copies(out / "notebooks"), force=force)
    # a fresh results folder, as in CI: some notebooks reuse results they find instead of recomputing
    shutil.rmtree(results, ignore_errors=True)
    results.mkdir(parents=True)
    (results / SCRATCH_MARK).write_text("results of `python -m rev nbref`, cleared by its next run\n")
    run_workbook("smoke", out, results=results, data_dir=out / "data", force=force)
    return out / "notebooks"


def run_cli(args: argparse.Namespace) -> int:
    if args.check is not None:
        problems = check_references(args.check)
        for p in problems:
            print(p, end="\n\n")
        n = len(list(REFERENCE_DIR.glob("*.ipynb")))
        print(f"{len(problems)} {'problem' if len(problems) == 1 else 'problems'} (differences from the reference "
              f"outputs, or output a reader should not see) in {n} notebooks"
              + (f"; if the change is intended, regenerate with `{REGENERATE}`" if problems else ""))
        return 1 if problems else 0
    source = args.source if args.source is not None else _execute(args.out, args.force)
    written = write_references(source)
    for path in written:
        print(f"reference: {path.relative_to(REPO)}")
    return 0
