"""Sentences that qualify a finding of REPORT.md and notebook 07: how far the trained trunks were from exact (the
worst run, not the best), and what else moved when two runs were meant to differ in one thing only."""
from __future__ import annotations

import pandas as pd

from ...core.reversible import RECON_LIMIT
from ..shared.results import main_run, main_runs, number


def recon_sentence(df: pd.DataFrame) -> str | None:
    """The worst reconstruction error of any trained reversible main run, against the trust limit, beside the
    best: the best case alone (a short run at a small batch) would say less than the runs can show. The worst
    run's batch and peak rate stand beside it: larger, longer steps move the weights to where blocks expand."""
    runs = main_runs(df)
    def where(r: pd.Series) -> str:
        lr = number(r.get("lr"))
        return (f"{r['label']}, {r['stream']} stream, batch {int(r['batch_size'])}"
                + ("" if lr is None else f" at peak lr {lr:.2g}"))

    errs = [(where(r), r["label"], v) for _, r in runs.iterrows()
            if (v := number(r.get("reconstruction_error"))) is not None]
    if not errs:
        return None
    worst, best = max(errs, key=lambda e: e[2]), min(errs, key=lambda e: e[2])
    if worst[2] == 0:
        return f"every trained reversible trunk rebuilt its inputs exactly (worst: {worst[0]})."
    err = worst[2]
    verdict = "well below" if err < RECON_LIMIT / 100 else "below" if err < RECON_LIMIT else "ABOVE"
    line = (f"the trained reversible trunks rebuilt their inputs to a relative error of at worst {err:.1e} "
            f"({worst[0]}), {verdict} the {RECON_LIMIT:g} the training loop trusts ({err / RECON_LIMIT:.2g}x it)")
    if len(errs) > 1 and best[2] < err:
        line += (f"; at best exactly 0 ({best[1]})" if best[2] == 0 else
                 f"; at best {best[2]:.1e} ({best[1]}): {err / best[2]:.0f}x apart")
    return line + "."


def stream_confounds(df: pd.DataFrame, a: pd.Series, b: pd.Series) -> str:
    """What else differs between the two stream runs: each at its own max batch, so batch, steps and rate move with
    the stream, and their loss gap is not the stream's alone."""
    ra, rb = main_run(df, a["run"]), main_run(df, b["run"])
    differ = []
    for col, what, fmt in (("batch_size", "batch", "{:,.0f}"), ("steps", "steps", "{:,.0f}"), ("lr", "peak lr", "{:.2g}")):
        va, vb = (number(r.get(col)) if r is not None else None for r in (ra, rb))
        if va is not None and vb is not None and va != vb:
            differ.append(f"{what} {fmt.format(va)} vs {fmt.format(vb)}")
    if not differ:
        return ""
    return (" Not the stream alone: each at its own max batch, " + ", ".join(differ)
            + " move with it, so the gap mixes the stream with the batch it bought.")
