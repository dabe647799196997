"""`python -m rev report`: REPORT.md, the report in the reference's form.

`rev.chapters.shared.results` reads ``results/<profile>/`` and derives the numbers, `rev.chapters.shared.figures` draws
them, `headline` says them in one line each; this module lays them out as Markdown with `evidence`'s tables
(`report_markdown`) and writes ``REPORT.md`` with ``plots/*.png`` beside it (`write_report`). Every number in the
report is read from the results folder, except the published reference figures, which are labelled as such.
Notebook 07 shows the same tables and figures with the authors' reading.

Results made elsewhere (a Colab T4, say) come back as a zip made by ``python -m rev bundle --results PROFILE``;
``python -m rev report --merge ARCHIVE`` unpacks it next to the local results (`rev.base.results_folder.merge`) first.
Each row carries the run's `device`, so CPU and GPU rows can sit in one table.
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import pandas as pd

from ...base.cli import folder_arg
from ...base.files import check_output, swap_in, write_text
from ...base.results_folder import PLOTS_DIR, REPORT_NAME, merge
from ..shared.figures import save_plots
from ..shared.tables import header, tidy
from .headline import conclusion_line, headline_lines
from .evidence import format_headline, markdown_table, runs_table
from ..shared.results import (PUBLISHED_SOURCE, format_value, headline, load_all, load_runs, main_runs,
                              max_batch_views, maxbatch_of)


def broken_lines(df: pd.DataFrame) -> list[str]:
    """What the report could not read: the main runs and files not found or unreadable (`load_runs`' ``missing``),
    then one line per run whose files could not be read (``broken``), left out of every table and comparison."""
    missing = df.attrs.get("missing") or []
    return ([f"Not present: {', '.join(missing)}."] if missing else []) + \
        [f"Broken, so left out: {why}" for why in (df.attrs.get("broken") or {}).values()]


# -------------------------------------------------------------------------------------------------------------
# REPORT.md
# -------------------------------------------------------------------------------------------------------------

_FIGURES = [("loss_vs_tokens", "Loss against tokens"), ("val_loss", "Validation loss"),
            ("peak_memory", "Peak memory"), ("max_batch", "Max batch under one budget"),
            ("tokens_per_s", "Throughput (interleaved bench)"), ("reconstruction_error", "Reconstruction error")]


_LOSS_HEAD_FIGURE = [("loss_heads", "Max batch by loss head")]
REPORT_FIGURES = {f"{stem}.png" for stem, _ in _FIGURES + _LOSS_HEAD_FIGURE}   # what plots/ holds of the report's


def text_table(t: pd.DataFrame, fmts: dict[str, str] | None = None) -> pd.DataFrame:
    """`t` as text for a table: `tables.tidy` (whole numbers as integers, 4 significant figures, a dash where a
    value is missing); `fmts` (column -> format) only where a column needs its own, such as a signed difference."""
    out = tidy(t, headers=False)
    for c, f in (fmts or {}).items():
        if c in out:
            out[c] = [format_value(v, f) for v in t[c]]
    return out.rename(columns=header)


_SIGNED = {"below_context_free": "{:+.3f}"}


def corpus_used(df: pd.DataFrame) -> str:
    """The corpora the runs read, as their summaries record them (source and data folder), e.g. "`synthetic`
    (data folder `synthetic-instead-of-tinystories`)"; runs from before that was recorded are not named."""
    used = df[["data_source", "data"]].dropna().drop_duplicates() if len(df) else pd.DataFrame()
    return ", ".join(f"`{r.data_source}` (data folder `{r.data}`)" for r in used.itertuples()) or "not recorded"


def _bullets(lines: list[str]) -> list[str]:
    return [*(f"- {line}" for line in lines), ""]


def report_markdown(df: pd.DataFrame, maxbatch: dict | None = None, all_runs: pd.DataFrame | None = None) -> str:
    """The text of REPORT.md (figures referenced as plots/<name>.png): the one-line conclusion, the headline in
    computed lines (memory; loss with its seeds; batch and whether it paid; throughput from the interleaved bench;
    what was not won; what was not measured), then the evidence: the runs, the max-batch runs two ways, the
    figures. Each thing is said once; notebooks 03-07 show the other tables with their reading."""
    mb = maxbatch_of(df, maxbatch)
    profile = df.attrs.get("profile", "?")
    devices = sorted(set(df["device"].dropna().astype(str))) if len(df) else []
    conclusion = conclusion_line(df, mb)
    lines = [f"# Report: profile `{profile}`", "", *([conclusion, ""] if conclusion else []),
             f"Measured by the runs in `{profile}/` ({', '.join(devices) if devices else 'no runs yet'}), except "
             f"figures marked *published* ({PUBLISHED_SOURCE}). Corpus: {corpus_used(df)}.", "",
             "## Headline", "", *_bullets(headline_lines(df, mb) + broken_lines(df)),
             "## Evidence", "",
             "### Runs", "", markdown_table(runs_table(main_runs(df))) if len(main_runs(df)) else "No main runs.", ""]
    views = max_batch_views(df)
    if len(views) > 1:
        views = views.drop(columns=[c for c in ("tokens", "final_val_loss") if c in views])   # the runs table's
        lines += ["### Max-batch runs: equal tokens and equal steps", "", markdown_table(text_table(views, _SIGNED)),
                  ""]
    lines += ["### Figures", ""]
    for stem, title in _FIGURES + (_LOSS_HEAD_FIGURE if df.attrs.get("loss_heads") else []):
        lines += [f"![{title}]({PLOTS_DIR}/{stem}.png)", ""]
    if all_runs is not None and all_runs["profile"].nunique() > 1:
        t = runs_table(all_runs)
        t.insert(0, "profile", all_runs["profile"].tolist())
        lines += ["### All results in this folder (by device)", "", markdown_table(t), ""]
    return "\n".join(lines).rstrip("\n")


def write_report(results_root: str | Path, profile: str, force: bool = False) -> Path:
    """Write results/<profile>/REPORT.md and plots/*.png; returns the REPORT.md path.

    The text is composed and the figures drawn into a temporary folder before anything is moved into place, so
    a failure leaves the previous report as it was. A folder without runs is an error; a run whose files cannot be
    read is named as broken and the rest is reported. plots/ is replaced whole: a file in it that is not one of
    the report's figures (`REPORT_FIGURES`) is replaced only with `force` (`rev.base.files.check_output`).
    """
    profile_dir = Path(results_root) / profile
    if not profile_dir.is_dir():
        raise ValueError(f"no results for profile {profile!r} under {results_root}: run the workbook "
                         f"(`python -m rev workbook --profile {profile}`) or merge an archive first")
    df = load_runs(results_root, profile)
    if not len(df) and not df.attrs["broken"]:
        raise ValueError(f"no runs in {profile_dir}: nothing to report; run the workbook (`python -m rev workbook "
                         f"--profile {profile}`) or merge an archive first")
    plots = profile_dir / PLOTS_DIR
    theirs = [p for p in plots.rglob("*") if p.is_file() and p.name not in REPORT_FIGURES] if plots.is_dir() else []
    check_output(profile_dir, theirs, force=force, what="--results")
    text = report_markdown(df, all_runs=load_all(results_root)) + "\n"
    tmp = Path(tempfile.mkdtemp(prefix=".report-", dir=profile_dir))
    try:
        save_plots(df, tmp / PLOTS_DIR)
        swap_in(tmp / PLOTS_DIR, profile_dir / PLOTS_DIR)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return write_text(profile_dir / REPORT_NAME, text)


# -------------------------------------------------------------------------------------------------------------
# Command line
# -------------------------------------------------------------------------------------------------------------

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default="auto",
                   help="profile folder under --results ('auto': the GPU profile with CUDA, else cpu; with "
                        "--merge, the archive's profile)")
    p.add_argument("--results", type=folder_arg, default=Path("results"), help="results root (default: results)")
    p.add_argument("--merge", type=Path, metavar="ARCHIVE", help="first unpack a results zip made on another machine")
    p.add_argument("--force", action="store_true", help="replace plots/ although it holds files that are not the "
                                                        "report's figures")


def _print_summary(df: pd.DataFrame, path: Path) -> None:
    print(format_headline(headline(df)).to_string(index=False))
    print()
    for line in headline_lines(df) + broken_lines(df):
        print(f"- {line}")
    print(f"\nwrote {path}")


def run_cli(args: argparse.Namespace) -> int:
    from ...base.profiles import resolve_profile_name

    profiles: list[str] = []
    if args.merge is not None:
        written = merge(args.merge, args.results)
        for d in written:
            print(f"merged {args.merge} into {d}")
        profiles = [d.name for d in written] if args.profile == "auto" else []
    if not profiles:
        name = args.profile
        if name == "auto" or not (args.results / name).is_dir():
            name = resolve_profile_name(name)
        profiles = [name]
    for profile in profiles:
        path = write_report(args.results, profile, args.force)
        _print_summary(load_runs(args.results, profile), path)

    return 0
