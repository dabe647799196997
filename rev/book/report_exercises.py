"""Notebook 07's exercises: the reference answers and the checks their check cells call.

07.2 derives, from the max-batch probes, the memory a stored trunk needs per layer per sequence; 07.3 changes one
measured number and watches which finding of the report changes with it. The conventions are those of
`rev.book.exercises`.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

import pandas as pd

from ..core.reversible import RECON_LIMIT
from .report import findings
from .results import (BASE, COLUMNS, REV, main_reversible_trunk, main_run, maxbatch_of, read_json_or_note,
                      stored_bytes_per_layer)


def check_stored_bytes_per_layer(fn: Callable[[list[dict], list[dict], int], float]) -> str:
    """Exercise 07.2: `fn(base_probes, rev_probes, n_layer)` on probes made from a known memory model."""
    fixed, per_seq, per_layer, n_layer = 40e6, 3e5, 7e5, 4       # weights+optimizer, embeddings+logits, one layer

    def probes(slope: float, batches: tuple[int, ...]) -> list[dict]:
        return [{"batch": b, "peak_bytes": int(fixed + slope * b), "fits": b < 40} for b in batches]
    base = probes(per_seq + n_layer * per_layer, (8, 16, 12, 14, 15, 64))
    rev = probes(per_seq, (8, 16, 32, 64, 48, 40))
    got = fn(base, rev, n_layer)
    assert got is not None and math.isfinite(float(got)), f"expected a number of bytes, got {got!r}"
    got = float(got)
    assert not math.isclose(got, n_layer * per_layer, rel_tol=1e-3), \
        f"{got:,.0f} bytes is what all {n_layer} layers store together: spread it over the layers"
    assert not math.isclose(got, (per_seq + n_layer * per_layer) / n_layer, rel_tol=1e-3), \
        ("the residual slope alone also counts what both trunks store (embeddings, logits): subtract the "
         "reversible trunk's slope first")
    assert not math.isclose(got, -per_layer, rel_tol=1e-3), "the sign is flipped: residual slope minus reversible"
    assert math.isclose(got, per_layer, rel_tol=1e-3), \
        (f"expected {per_layer:,.0f} bytes per layer per sequence from these probes, got {got:,.0f}: take the "
         f"slope of peak_bytes against batch (every probe with a peak), for each trunk")
    return f"{got:,.0f} bytes per layer per sequence, as the memory model behind the probes says."


def stored_trunk_markdown(df: pd.DataFrame, maxbatch: dict | None = None) -> str:
    """Markdown: exercise 07.2 on this profile's max-batch probes, with `results.stored_bytes_per_layer`, and what
    that is per token and per model dimension."""
    mb = maxbatch_of(df, maxbatch) or {}
    base, trunk = main_run(df, BASE), main_reversible_trunk(df, mb)
    searches = mb.get("residual"), mb.get(trunk) if trunk else None
    if base is None or not all(isinstance(s, dict) for s in searches):
        return "Needs run 1 and the max-batch searches of notebook 06 (maxbatch.json)."
    n_layer = int(base["n_layer"])
    per_layer = stored_bytes_per_layer(searches[0].get("probes"), searches[1].get("probes"), n_layer)
    if per_layer is None:
        return "The max-batch searches measured too few batches to take a slope."
    model = (read_json_or_note(Path(base["path"]) / "config.json", []) or {}).get("model", {})
    text = (f"From the probes of `residual` and `{trunk}` with {n_layer} layers: about **{per_layer:,.0f} bytes per "
            f"layer per sequence** that the residual trunk keeps for its backward and the reversible one does not.")
    if model.get("seq_len") and model.get("d_model"):
        per_token = per_layer / model["seq_len"]
        text += (f" Per token (sequence length {model['seq_len']}) that is {per_token:,.0f} bytes, or "
                 f"{per_token / model['d_model']:.1f} bytes per model dimension ({model['d_model']}): at 4 bytes a "
                 f"float32 value, about {per_token / model['d_model'] / 4:.0f} stored values per token per layer "
                 f"for every dimension of the model.")
    return text


def with_reconstruction_error(df: pd.DataFrame, err: float) -> pd.DataFrame:
    """A copy of the runs in which every trained reversible trunk rebuilt its input with relative error `err`."""
    out = df.copy()
    rev = pd.to_numeric(out["reconstruction_error"], errors="coerce").notna()
    out.loc[rev, "reconstruction_error"] = err
    return out


def changed_findings(df: pd.DataFrame, edit: Callable[[pd.DataFrame], pd.DataFrame]) -> tuple[list[str], list[str]]:
    """(findings that `edit` removed, findings it added): which sentences of the report depend on the edit."""
    before, after = findings(df), findings(edit(df))
    return [s for s in before if s not in after], [s for s in after if s not in before]


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
    """Exercise 07.3: `fn(df, err)` must return an edited copy that turns the reconstruction finding around."""
    df = _two_runs()
    broken = fn(df, 50 * RECON_LIMIT)
    assert isinstance(broken, pd.DataFrame), f"return the edited frame, not {type(broken).__name__}"
    assert broken is not df and df.loc[1, "reconstruction_error"] == 4e-6, \
        "the frame passed in was changed: edit a copy (`df.copy()`), the report reads the original again"
    assert pd.isna(broken.loc[0, "reconstruction_error"]), \
        "the residual baseline has no inverse, so no reconstruction error: set it only where one was measured"
    text = "\n".join(findings(broken))
    assert f"ABOVE the {RECON_LIMIT:g}" in text, \
        f"the findings still do not see an error of {50 * RECON_LIMIT:g}; set the `reconstruction_error` column"
    assert "well below" in "\n".join(findings(fn(df, RECON_LIMIT / 1e4))), "a tiny error should read 'well below'"
    return "The reconstruction finding turns from 'well below' to 'ABOVE' the limit, the input frame untouched."
