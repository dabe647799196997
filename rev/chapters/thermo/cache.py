"""Notebook 08 (training irreversibility): the paper-size shock as a command, and its cached results.

At the paper's Figure 2 size one transformer run takes minutes on a small CPU, too long for the cpu workbook with
several seeds. `python -m rev thermo-shock --profile P --seeds N` runs the profile's `shock` sizes over N seeds
(in parallel processes) and writes every per-step log to RESULTS/<P>/thermo_shock.json; the notebook reads that
file when it matches the sizes it wants, and otherwise runs the profile's reduced "quick" variant itself.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import time
from pathlib import Path

import pandas as pd

from rev.base.cli import folder_arg, positive_int
from rev.base.files import read_json, write_json
from rev.base.profiles import resolve_profile_name

from .seeds import ShockRuns, claim_status, per_seed_table, seed_table, shock_over_seeds, verdict_table
from .shock import MODELS, resolve_device
from .sizes import FluctuationSizes, chapter_sizes, quick_shock_sizes, setup_table

CACHE_NAME = "thermo_shock.json"


def cache_path(results_dir: str | Path, profile: str) -> Path:
    return Path(results_dir) / profile / CACHE_NAME


def _same_experiment(a: FluctuationSizes, b: FluctuationSizes) -> bool:
    # seeds, threads and device change how long it takes, not what is measured
    def norm(s: FluctuationSizes) -> FluctuationSizes:
        return s.replace(seeds=1, threads=0, device="cpu")
    return norm(a) == norm(b)


def save_runs(path: str | Path, runs: ShockRuns, sizes: FluctuationSizes, profile: str) -> Path:
    """Every per-step log as JSON (7 significant digits: the measures need no more)."""
    logs = {kind: {str(seed): {str(f): {col: [float(f"{x:.7g}") for x in df[col]] for col in df.columns
                                        if col != "step"}
                               for f, df in arms.items()}
                   for seed, arms in by_seed.items()}
            for kind, by_seed in runs.items()}
    return write_json(path, dict(profile=profile, sizes=dataclasses.asdict(sizes), runs=logs))


def load_runs(path: str | Path) -> tuple[ShockRuns, FluctuationSizes]:
    """The runs and sizes `save_runs` wrote."""
    saved = read_json(path)
    sizes = FluctuationSizes(**{k: tuple(v) if isinstance(v, list) else v for k, v in saved["sizes"].items()})
    runs: ShockRuns = {}
    for kind, by_seed in saved["runs"].items():
        runs[kind] = {}
        for seed, arms in by_seed.items():
            runs[kind][int(seed)] = {}
            for f, cols in arms.items():
                df = pd.DataFrame(cols)
                df.insert(0, "step", range(len(df)))
                runs[kind][int(seed)][float(f)] = df
    return runs, sizes


def default_jobs(sizes: FluctuationSizes, n_runs: int) -> int:
    """One process per core on a CPU (each run single-threaded); one on a GPU, which the runs would share."""
    if resolve_device(sizes).type != "cpu":
        return 1
    return max(1, min(n_runs, os.cpu_count() or 1))


def planned_runs(results_dir: str | Path, profile: str) -> tuple[FluctuationSizes, str]:
    """The sizes `notebook_runs` will show, and where its runs will come from, without running anything: the
    cached paper-size runs when they match the profile, else the profile's "quick" sizes where it has them, else
    its full `shock` sizes run here."""
    sizes = chapter_sizes(profile).shock
    path = cache_path(results_dir, profile)
    if path.exists():
        _, saved = load_runs(path)
        if _same_experiment(saved, sizes):
            return saved, "cached paper-size runs"   # written by `python -m rev thermo-shock`
    quick = quick_shock_sizes(profile)
    return (quick, "reduced, run here") if quick is not None else (sizes, "run here")


def notebook_runs(results_dir: str | Path, profile: str, progress=None) -> tuple[ShockRuns, FluctuationSizes, str]:
    """What notebook 08 shows (`planned_runs`): the cached paper-size runs when they match the profile, else a
    run made here. Returns the runs, their sizes and where they came from."""
    run_sizes, source = planned_runs(results_dir, profile)
    if source.startswith("cached"):
        return load_runs(cache_path(results_dir, profile))[0], run_sizes, source
    runs = shock_over_seeds(run_sizes, jobs=default_jobs(run_sizes, run_sizes.seeds * len(MODELS)),
                            progress=progress)
    return runs, run_sizes, source


# ----------------------------------------------------------------------------------------------------------
# command line: python -m rev thermo-shock
# ----------------------------------------------------------------------------------------------------------

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default="auto", help="its shock sizes")
    p.add_argument("--seeds", type=positive_int, default=None, help="default: the profile's")
    p.add_argument("--jobs", type=positive_int, default=None, help="processes (default: cores)")
    p.add_argument("--results", type=folder_arg, default=Path("results"), help="results root")


def run_cli(args: argparse.Namespace) -> int:
    profile = resolve_profile_name(args.profile)
    sizes = chapter_sizes(profile).shock
    if args.seeds is not None:
        sizes = sizes.replace(seeds=args.seeds)
    jobs = args.jobs or default_jobs(sizes, sizes.seeds * len(MODELS))
    t0 = time.time()
    print(f"thermo-shock {profile}: {sizes.seeds} seeds, {jobs} jobs")
    print(setup_table(sizes).to_string(index=False))
    runs = shock_over_seeds(sizes, jobs=jobs)
    path = save_runs(cache_path(args.results, profile), runs, sizes, profile)
    table = seed_table(runs, sizes)
    verdicts = verdict_table(table)
    with pd.option_context("display.width", 200, "display.precision", 3):
        print(per_seed_table(table).to_string(index=False))
        print(verdicts.to_string(index=False))
    for m in verdicts.measure.unique():
        print(f"claim on {m}: {claim_status(verdicts, m)}")   # perceptron ordinary, transformer anomalous
    print(f"wrote {path} in {time.time() - t0:.0f} s")
    return 0
