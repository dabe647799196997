"""Notebook 07's two readings of the runs table beside its figures: how exact the trained trunks were per stream
(`reconstruction_summary`), and which run was lowest and which fastest at a shared token count
(`loss_and_time_summary`). REPORT.md does not use them: they live apart from `writer`, which writes it."""
from __future__ import annotations

import math

import pandas as pd

from ...core.reversible import RECON_LIMIT
from ..shared.results import format_value
from ..shared.tables import counted
from ..shared.verdicts import TIMED_APART


def _against_limit(err: float) -> str:
    if err == 0:
        return "exact"
    if err < RECON_LIMIT:
        return f"{math.log10(RECON_LIMIT / err):.1f} orders of magnitude below the limit"
    return f"{err / RECON_LIMIT:.1f}x the limit: ABOVE it"


def reconstruction_summary(df: pd.DataFrame) -> str:
    """Markdown: for each stream, the reconstruction errors of the trained reversible trunks (main and screening
    runs) measured against `RECON_LIMIT`, with the depth and tokens of the worst one (errors grow with both)."""
    err = pd.to_numeric(df["reconstruction_error"], errors="coerce") if len(df) else pd.Series(dtype=float)
    rev = df[err.notna()] if len(df) else df
    if not len(rev):
        return "No trained reversible trunk here yet: run the screening and run 2 first."
    lines = [f"The training loop warns above a relative error of {RECON_LIMIT:g}. Measured here, per stream:", ""]
    for stream, group in rev.groupby("stream", sort=True):
        e = err[group.index]
        worst = group.loc[e.idxmax()]
        lines.append(f"- **{stream}**: {counted(len(group), 'trained trunk')}, errors {e.min():.1e} to {e.max():.1e}; the "
                     f"largest ({worst['run']}: {worst['trunk']}, {format_value(worst['n_layer'], '{:.0f}')} layers, "
                     f"{format_value(worst['tokens'], '{:,.0f}')} tokens) is {_against_limit(float(e.max()))}.")
    return "\n".join(lines)


def loss_and_time_summary(table: pd.DataFrame) -> str:
    """Markdown: which run of `results.loss_and_time` was lowest at the shared token count (one seed each), and
    what its seconds column can say: each run's own, timed apart, so no run is named the fastest."""
    loss = table.dropna(subset=["val_loss"])
    if not len(loss):
        return "Not enough finished main runs to compare yet."
    low = loss.iloc[0]
    longer = table[table["trained_tokens"] > 1.02 * table["tokens"]]
    note = (f" ({'; '.join(longer['label'])} trained on more and {'is' if len(longer) == 1 else 'are'} read at this "
            f"count from {'its' if len(longer) == 1 else 'their'} log, mid-way through {'its' if len(longer) == 1 else 'their'} schedule)"
            if len(longer) else "")
    return (f"At {low['tokens']:,.0f} tokens{note}: lowest validation loss **{low['label']}** ({low['val_loss']:.3f}, "
            f"one seed each). The seconds column is each run's own at its median step: the runs were timed one after "
            f"another, so their seconds are {TIMED_APART} and no run is named the fastest.")
