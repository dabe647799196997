"""Notebook 07's exercises: the reference answers and the checks their check cells call.

07.1 (predict) is checked in the notebook, by a verdict table on this run's numbers. 07.2 derives, from the
max-batch probes, the memory a stored trunk needs per layer per sequence; 07.3 changes one measured number (the
reconstruction error) and watches which verdict changes with it. The conventions are those of
`rev.chapters.shared.exercises`.
"""
from __future__ import annotations

import math
from typing import Callable

import pandas as pd

from ...core.reversible import RECON_LIMIT
from .evidence import worst_reconstruction
from ..shared.results import BASE, COLUMNS, REV


def check_stored_bytes_per_layer(fn: Callable[[list[dict], list[dict], int], float]) -> str:
    """Exercise 07.2: `fn(base_probes, rev_probes, n_layer)` on probes made from a known memory model."""
    fixed, per_seq, per_layer, n_layer = 40e6, 3e5, 7e5, 4       # weights+optimizer, embeddings+logits, one layer

    def probes(slope: float, batches: tuple[int, ...]) -> list[dict]:
        return [{"batch": b, "peak_bytes": int(fixed + slope * b), "fits": b < 40} for b in batches]
    base = probes(per_seq + n_layer * per_layer, (8, 16, 12, 14, 15, 64))
    rev = probes(per_seq, (8, 16, 32, 64, 48, 40))
    got = fn(base, rev, n_layer)
    assert got is not None and math.isfinite(float(got)), f"return a number, not {got!r}"
    got = float(got)
    # each wrong answer a learner is likely to give, named: all layers together, the residual slope alone
    # (it also counts the embeddings and logits both trunks store), the two slopes subtracted the wrong way
    assert not math.isclose(got, n_layer * per_layer, rel_tol=1e-3), "divide by n_layer"
    assert not math.isclose(got, (per_seq + n_layer * per_layer) / n_layer, rel_tol=1e-3), \
        "subtract the reversible slope"
    assert not math.isclose(got, -per_layer, rel_tol=1e-3), "sign flipped: residual minus reversible"
    assert math.isclose(got, per_layer, rel_tol=1e-3), f"got {got:,.0f}, want {per_layer:,.0f}"
    return f"{got:,.0f} bytes per layer per sequence, as the probes' memory model says"


def with_reconstruction_error(df: pd.DataFrame, err: float) -> pd.DataFrame:
    """A copy of the runs in which every trained reversible trunk rebuilt its input with relative error `err`."""
    out = df.copy()
    rev = pd.to_numeric(out["reconstruction_error"], errors="coerce").notna()
    out.loc[rev, "reconstruction_error"] = err
    return out


def _two_runs() -> pd.DataFrame:
    """A baseline and a reversible run at the same batch, with numbers of the smoke profile's size."""
    rows = [{"run": BASE, "label": "baseline", "trunk": "residual", "stream": "fp32", "batch_size": 8, "n_layer": 2,
             "peak_memory_bytes": 9e6, "tokens_per_s": 4e4},
            {"run": REV, "label": "reversible", "trunk": "reveuler_rev", "stream": "fp32", "batch_size": 8,
             "n_layer": 2, "peak_memory_bytes": 5e6, "tokens_per_s": 3.6e4, "reconstruction_error": 4e-6}]
    df = pd.DataFrame(rows, columns=COLUMNS).assign(screening=False, chosen=False, path="")
    df.attrs.update(profile="example", results_dir="", maxbatch=None, screening=None, missing=[])
    return df


def check_with_reconstruction_error(fn: Callable[[pd.DataFrame, float], pd.DataFrame]) -> str:
    """Exercise 07.3: `fn(df, err)` must return an edited copy whose worst trained reconstruction
    (`evidence.worst_reconstruction`) is `err`, the baseline left without one and the frame passed in untouched."""
    df = _two_runs()
    broken = fn(df, 50 * RECON_LIMIT)
    assert isinstance(broken, pd.DataFrame), f"return a DataFrame, not {type(broken).__name__}"
    assert broken is not df and df.loc[1, "reconstruction_error"] == 4e-6, "edit a copy: df.copy()"
    # the residual baseline has no inverse, so no reconstruction error: only measured rows change
    assert pd.isna(broken.loc[0, "reconstruction_error"]), "the baseline has no inverse"
    worst = worst_reconstruction(broken)
    assert worst is not None and worst[1] == 50 * RECON_LIMIT, f"worst error {worst}, want {50 * RECON_LIMIT:g}"
    tiny = worst_reconstruction(fn(df, RECON_LIMIT / 1e4))
    assert tiny is not None and tiny[1] <= RECON_LIMIT, f"worst error {tiny}, want {RECON_LIMIT / 1e4:g}"
    return f"worst trained error {worst[1]:g}, above the {RECON_LIMIT:g} limit; the input frame untouched"
