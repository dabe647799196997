"""`python -m rev workbook --profile P`: execute the notebook sequence headless with papermill, keep the
executed copies in the build folder, then write the report.

Each notebook receives the profile and absolute results/data folders through its `parameters` cell. On a
failure the run stops and names the notebook, the failing cell and the executed copy to open.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from ..engine.profiles import resolve_profile_name

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
SEQUENCE = (
    "00_setup", "01_integrator_theory", "01b_build_the_backward", "02_tests", "03_screening", "04_run1_baseline",
    "05_run2_reversible_same_batch", "06_run3_reversible_max_batch", "07_report",
    "08_training_irreversibility", "09_adaptive_checkpointing", "10_finetune_trace_rollback",
)


class WorkbookError(RuntimeError):
    pass


def run_workbook(profile: str = "auto", out: str | Path | None = None, results: str | Path = "results",
                 data_dir: str | Path = "data", only: list[str] | None = None, kernel: str = "python3",
                 seed: int = 0, progress: bool = True) -> list[Path]:
    """Execute the sequence (or `only` those notebooks); returns the executed copies' paths."""
    import papermill as pm

    profile = resolve_profile_name(profile)
    if not NOTEBOOK_DIR.is_dir():
        raise WorkbookError(f"notebooks folder not found at {NOTEBOOK_DIR}: run from a source checkout")
    names = list(only) if only else list(SEQUENCE)
    unknown = [n for n in names if n not in SEQUENCE]
    if unknown:
        raise ValueError(f"unknown notebook(s) {unknown}: choose from {', '.join(SEQUENCE)}")
    build = Path(out) if out else Path("build") / profile
    (build / "notebooks").mkdir(parents=True, exist_ok=True)
    params = {"PROFILE": profile, "RESULTS_DIR": str(Path(results).resolve()),
              "DATA_DIR": str(Path(data_dir).resolve()), "SEED": seed, "INTERACTIVE": False}
    done = []
    for i, name in enumerate(names, 1):
        src, dst = NOTEBOOK_DIR / f"{name}.ipynb", build / "notebooks" / f"{name}.ipynb"
        print(f"[{i}/{len(names)}] {name} (profile {profile}) ...", flush=True)
        t0 = time.perf_counter()
        try:
            pm.execute_notebook(str(src), str(dst), parameters=params, kernel_name=kernel,
                                cwd=str(NOTEBOOK_DIR), progress_bar=progress)
        except pm.PapermillExecutionError as e:
            raise WorkbookError(f"{name} failed in cell {e.exec_count} ({e.ename}: {e.evalue}); "
                                f"open the executed copy {dst} to see the traceback") from e
        print(f"      done in {time.perf_counter() - t0:.0f} s -> {dst}", flush=True)
        done.append(dst)
    if not only or "07_report" in names:
        from .report import write_report

        path = write_report(results, profile)
        print(f"report: {path}")
    return done


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default="auto", help="smoke | cpu | t4 | full | auto")
    p.add_argument("--out", type=Path, help="build folder for executed notebooks (default build/<profile>)")
    p.add_argument("--results", type=Path, default=Path("results"))
    p.add_argument("--data-dir", type=Path, default=Path("data"))
    p.add_argument("--only", nargs="+", help="run just these notebooks (names without .ipynb)")
    p.add_argument("--kernel", default="python3")
    p.add_argument("--seed", type=int, default=0)


def run_cli(args: argparse.Namespace) -> int:
    try:
        run_workbook(args.profile, args.out, args.results, args.data_dir, args.only, args.kernel, args.seed)
    except (WorkbookError, ValueError) as e:
        raise SystemExit(f"error: {e}")
    return 0
