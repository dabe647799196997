"""`python -m rev workbook --profile P`: execute the notebook sequence headless with papermill, keep the
executed copies in the build folder, then write the report (by running `python -m rev report`) and, with `--site`,
the HTML edition (`rev.book.site`).

Each notebook receives the profile and absolute results/data folders through its `parameters` cell. On a
failure the run stops and names the notebook, the failing cell and the executed copy to open.

Running it again after an interruption (a disconnect, a kill, Ctrl-C) continues where it stopped: each notebook
that ran to its end leaves a marker, results/<profile>/workbook/<name>.json, written atomically after success
with the notebook's source hash and parameters; a notebook with a matching marker is skipped (`--force` runs
it anyway), an edited notebook or other parameters run again. The markers live beside the results, not in the
build folder, so a new Colab session with RESULTS_DIR on Drive picks up too. Inside a notebook the training
runs do the same (`rev.chapters.shared.runs.train_run`: finished runs reused, interrupted ones resumed).
"""
from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import time
from pathlib import Path

from ..base.cli import CommandFailed, UserError, folder_arg, seed_arg
from ..base.files import atomic_path, check_output, read_json, shown_path, write_json
from ..base.progress import text_progress
from ..base.profiles import resolve_profile_name
from ..base.results_folder import REPORT_NAME
from .outputs import clean_streams
from .sequence import NOTEBOOK_DIR, SEQUENCE


class WorkbookError(CommandFailed):
    pass


def marker_path(results: str | Path, profile: str, name: str) -> Path:
    """Where notebook `name` records that it ran to its end under `results` for `profile`."""
    return Path(results) / profile / "workbook" / f"{name}.json"


def _marker(src: Path, params: dict) -> dict:
    return {"source_sha256": hashlib.sha256(src.read_bytes()).hexdigest(), "parameters": params}


def completed(path: Path, src: Path, params: dict) -> bool:
    """True when the marker at `path` says this very notebook source ran to its end with these parameters."""
    try:
        rec = read_json(path)
    except ValueError:  # missing or damaged: run the notebook
        return False
    want = _marker(src, params)
    return all(rec.get(k) == v for k, v in want.items())


def foreign_copies(folder: Path, names: list[str] | tuple[str, ...] = SEQUENCE) -> list[Path]:
    """The notebooks among `names` in `folder` that are not executed copies the workbook wrote (papermill records
    itself in each): a student edition's copies holding a learner's answers, say. Never replaced without --force."""
    import json

    def executed(path: Path) -> bool:
        try:
            return "papermill" in json.loads(path.read_text()).get("metadata", {})
        except (OSError, ValueError, AttributeError):
            return False

    return [p for p in (folder / f"{n}.ipynb" for n in names) if p.is_file() and not executed(p)]


def check_kernel(kernel: str) -> None:
    """A kernel that is not installed is refused here, before any notebook is started or written."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    specs = KernelSpecManager()
    try:
        specs.get_kernel_spec(kernel)
    except NoSuchKernel:
        installed = ", ".join(sorted(specs.find_kernel_specs())) or "none"
        raise UserError(f"no Jupyter kernel named {kernel!r} (installed: {installed}): give one of those with "
                        f"--kernel, or install this environment's as {kernel!r} with "
                        f"`python -m ipykernel install --user --name {kernel}`") from None


def run_workbook(profile: str = "auto", out: str | Path | None = None, results: str | Path = "results",
                 data_dir: str | Path = "data", only: list[str] | None = None, kernel: str = "python3",
                 seed: int = 0, progress: bool = True, force: bool = False) -> list[Path]:
    """Execute the sequence (or `only` those notebooks), skipping those already completed with the same source
    and parameters unless `force`; returns the executed copies' paths (of this call's runs). A notebook in the build
    folder that is not an executed copy (`foreign_copies`) is replaced only with `force`, and neither folder may lie
    in the checkout's own folders (`rev.base.files.check_output`)."""
    import papermill as pm
    from nbclient.exceptions import DeadKernelError

    profile = resolve_profile_name(profile)
    if not NOTEBOOK_DIR.is_dir():
        raise WorkbookError(f"notebooks folder not found at {NOTEBOOK_DIR}: run from a source checkout")
    names = list(only) if only else list(SEQUENCE)
    unknown = [n for n in names if n not in SEQUENCE]
    if unknown:
        raise ValueError(f"unknown notebook(s) {unknown}: choose from {', '.join(SEQUENCE)}")
    check_kernel(kernel)
    build = Path(out) if out else Path("build") / profile
    check_output(build / "notebooks", foreign_copies(build / "notebooks", names), force=force)
    check_output(Path(results) / profile, what="--results")
    (build / "notebooks").mkdir(parents=True, exist_ok=True)
    # folders inside the checkout go in relative to it (the set-up cell makes them absolute under the checkout
    # again), so an executed copy's parameters name no machine's paths
    params = {"PROFILE": profile, "RESULTS_DIR": shown_path(results), "DATA_DIR": shown_path(data_dir),
              "SEED": seed, "INTERACTIVE": False}
    done = []
    for i, name in enumerate(names, 1):
        src, dst = NOTEBOOK_DIR / f"{name}.ipynb", build / "notebooks" / f"{name}.ipynb"
        marker = marker_path(results, profile, name)
        if not force and completed(marker, src, params):
            print(f"[{i}/{len(names)}] {name}: completed before (marker {marker}), skipped; --force runs it",
                  flush=True)
            continue
        print(f"[{i}/{len(names)}] {name} (profile {profile}) ...", flush=True)
        t0 = time.perf_counter()
        failed = None
        for leftover in dst.parent.glob(f".{dst.name}.*.ipynb"):   # a killed run's temporary copy
            leftover.unlink()
        try:
            # executed into a temporary copy that replaces `dst` when papermill is done: a kill, a dead kernel or
            # one that cannot start leaves no half-written notebook under the final name; a failing cell keeps
            # the copy (it shows the traceback)
            with atomic_path(dst, suffix=".ipynb") as tmp:
                try:
                    with text_progress():  # the executed copy keeps each bar's last state, not a frozen widget
                        pm.execute_notebook(str(src), str(tmp), parameters=params, kernel_name=kernel,
                                            cwd=str(NOTEBOOK_DIR), progress_bar=progress)
                except pm.PapermillExecutionError as e:
                    failed = e
                clean_streams(tmp)   # each progress bar's last state, once
        except DeadKernelError as e:
            raise WorkbookError(f"{name}: the kernel died ({e}); run the workbook again to continue "
                                f"from the last checkpoint") from e
        if failed is not None:
            raise WorkbookError(f"{name} failed in cell {failed.exec_count} ({failed.ename}: {failed.evalue}); "
                                f"open the executed copy {dst} to see the traceback") from failed
        seconds = time.perf_counter() - t0
        write_json(marker, {**_marker(src, params), "executed_copy": str(dst.resolve()), "seconds": round(seconds, 1),
                            "finished": time.strftime("%Y-%m-%d %H:%M:%S")})
        print(f"      done in {seconds:.0f} s -> {dst}", flush=True)
        done.append(dst)
    if not only or "07_report" in names:
        print(f"report: {write_report(results, profile)}")
    return done


def write_report(results: str | Path, profile: str) -> Path:
    """REPORT.md written again by `python -m rev report` in a process of its own, after the companion chapters have
    left their results: the editions run the chapters' code as programs (notebooks, commands), never import it."""
    cmd = [sys.executable, "-m", "rev", "report", "--profile", profile, "--results", str(results)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        why = (done.stderr.strip() or done.stdout.strip())[-2000:]
        raise WorkbookError(f"the report failed (`python {' '.join(cmd[1:])}`): {why}")
    return Path(results) / profile / REPORT_NAME


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default="auto", help="smoke | cpu | t4 | full | auto")
    p.add_argument("--out", type=folder_arg, help="build folder for executed notebooks (default build/<profile>)")
    p.add_argument("--results", type=folder_arg, default=Path("results"))
    p.add_argument("--data-dir", type=folder_arg, default=Path("data"))
    p.add_argument("--only", nargs="+", help="run just these notebooks (names without .ipynb)")
    p.add_argument("--kernel", default="python3")
    p.add_argument("--seed", type=seed_arg, default=0, help="a whole number from 0 to 2**32 - 1")
    p.add_argument("--force", action="store_true",
                   help="run every notebook, even those that completed before with the same source and parameters, "
                        "and replace notebooks in the build folder that are not executed copies")
    p.add_argument("--site", action="store_true",
                   help="then build the HTML edition from the executed notebooks into <out>/site (the site extra)")


def run_cli(args: argparse.Namespace) -> int:
    run_workbook(args.profile, args.out, args.results, args.data_dir, args.only, args.kernel, args.seed,
                 force=args.force)
    if args.site:  # the same build folder run_workbook wrote to; notebooks skipped as completed are there from before
        from .site import build_site

        build = args.out or Path("build") / resolve_profile_name(args.profile)
        build_site(build / "notebooks", build / "site", args.results)
    return 0
