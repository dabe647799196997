"""`python -m rev report`: tables, plots, findings and REPORT.md from the runs of a profile.

Reads ``results/<profile>/`` as the training notebooks leave it:

    screening/<trunk>_h<h>_<stream>/   short runs of the integrator screening
    screening.json                     the screening's rows, the chosen trunk and why
    run1_baseline/ run1b_baseline_maxbatch/ run2_reversible_same_batch/ run3_reversible_max_batch/
    run4_reversible_deep/              the main runs (each: config.json, log.csv, summary.json, ckpt.pt)
    maxbatch.json                      the max-batch searches under one memory budget

and writes ``REPORT.md`` with ``plots/*.png`` beside it. Any run may be missing: every table, plot and sentence
uses what is there and says what is not. Every number in the report is read from those files, except the
published reference figures of `published_reference`, which are labelled as such wherever they appear.

Results made elsewhere (a Colab T4, say) come back as a zip made by ``python -m rev bundle --results PROFILE``;
`merge` unpacks it next to the local results. Each row carries the run's `device`, so CPU and GPU rows can sit
in one table (`load_all`).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import tempfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import pandas as pd

MIB = 2**20
GIB = 2**30

# The main runs, in the order the workbook makes them: folder -> (role, short label used in plots).
MAIN_RUNS: dict[str, tuple[str, str]] = {
    "run1_baseline": ("baseline", "baseline"),
    "run1b_baseline_maxbatch": ("baseline, max batch", "baseline max batch"),
    "run2_reversible_same_batch": ("reversible, same batch", "reversible"),
    "run3_reversible_max_batch": ("reversible, max batch", "reversible max batch"),
    "run4_reversible_deep": ("reversible, deep", "reversible deep"),
}
BASE, BASE_MAX, REV, REV_MAX, REV_DEEP = MAIN_RUNS
SCREENING_DIR = "screening"
PLOTS_DIR = "plots"
REPORT_NAME = "REPORT.md"
UNIGRAM_MARGIN = 0.1     # a run ending this close to the context-free loss has learnt little context
SPEED_TIE = 0.97         # tokens/s ratios above this are not read as a measurable slowdown
RECON_THRESHOLD = 1e-2   # the training loop warns above this relative reconstruction error

PUBLISHED_SOURCE = "published, RTX 5070 Ti, bf16"

COLUMNS = ["run", "role", "label", "screening", "chosen", "status", "device", "origin", "trunk", "h", "stream",
           "n_layer", "batch_size", "steps", "planned_steps", "tokens", "lr", "lr_scaling", "n_params",
           "final_train_loss", "final_val_loss", "unigram_val_loss", "tokens_per_s", "peak_memory_bytes",
           "peak_memory_mib", "reconstruction_error", "wall_s", "torch", "world_size", "stopped_early", "path"]

# Plot colours: blues for the residual baseline, oranges/reds for the reversible runs, grey for screening.
_COLOURS = {BASE: "#1f77b4", BASE_MAX: "#6baed6", REV: "#d62728", REV_MAX: "#ff7f0e", REV_DEEP: "#8c564b"}
_SCREEN_COLOUR = "#7f7f7f"


# -------------------------------------------------------------------------------------------------------------
# Reading results
# -------------------------------------------------------------------------------------------------------------

def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise ValueError(f"{path} is not readable JSON ({e}); delete it or run that step again") from None


def read_log(run_dir: str | Path) -> pd.DataFrame:
    """A run's log.csv as numbers (val_loss is NaN except on evaluation steps); empty if there is none."""
    path = Path(run_dir) / "log.csv"
    cols = ["step", "tokens", "loss", "lr", "grad_norm", "tokens_per_s", "val_loss"]
    if not path.exists():
        return pd.DataFrame(columns=cols, dtype=float)
    log = pd.read_csv(path)
    for c in cols:
        log[c] = pd.to_numeric(log[c], errors="coerce") if c in log else np.nan
    return log[cols]


def _read_json_or_note(path: Path, problems: list[str]) -> Any:
    """Like `_read_json`, but an unreadable file is noted in `problems` and read as absent: one damaged file
    should not keep the rest of the report from being written."""
    try:
        return _read_json(path)
    except ValueError:
        problems.append(f"{path.parent.name}/{path.name} (unreadable)")
        return None


def _origin(profile_dir: Path) -> str:
    merged = _read_json_or_note(profile_dir / "MERGED.json", [])
    if isinstance(merged, list) and merged:
        return f"merged from {merged[-1].get('archive', '?')}"
    return "local"


def _row_from_summary(run_dir: Path, summary: dict) -> dict:
    row = {k: summary.get(k) for k in COLUMNS if k in summary}
    row["status"] = "stopped early" if summary.get("stopped_early") else "complete"
    return row


def _row_from_log(run_dir: Path) -> dict | None:
    """A run without summary.json (still running, or killed): what its config and log say so far."""
    cfg = _read_json_or_note(run_dir / "config.json", [])
    log = read_log(run_dir)
    if cfg is None and log.empty:
        return None
    cfg = cfg or {}
    model, train = cfg.get("model", {}), cfg.get("train", {})
    vals = log["val_loss"].dropna()
    tail = log["loss"].tail(max(1, len(log) // 10))
    return {"trunk": model.get("trunk", train.get("trunk")), "h": model.get("h"), "stream": model.get("stream"),
            "n_layer": model.get("n_layer"), "batch_size": cfg.get("batch_size"), "steps": len(log),
            "planned_steps": cfg.get("steps"), "tokens": int(log["tokens"].iloc[-1]) if len(log) else 0,
            "lr": cfg.get("lr"), "lr_scaling": train.get("lr_scaling"),
            "final_train_loss": float(tail.mean()) if len(tail) else None,
            "final_val_loss": float(vals.iloc[-1]) if len(vals) else None,
            "status": "incomplete (no summary.json)"}


def _run_row(run_dir: Path, problems: list[str]) -> dict | None:
    summary = _read_json_or_note(run_dir / "summary.json", problems)
    row = _row_from_summary(run_dir, summary) if isinstance(summary, dict) else _row_from_log(run_dir)
    if row is None:
        return None
    row["run"] = run_dir.name
    row["path"] = str(run_dir)
    return row


def _screening_dirs(profile_dir: Path) -> list[Path]:
    folder = profile_dir / SCREENING_DIR
    return sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


def _is_chosen(row: dict, chosen: dict | None) -> bool:
    if not chosen:
        return False
    same_h = row.get("h") is not None and chosen.get("h") is not None and \
        math.isclose(float(row["h"]), float(chosen["h"]))
    same_stream = row.get("stream", "fp32") == chosen.get("stream", "fp32")
    return row.get("trunk") == chosen.get("trunk") and same_h and same_stream


def load_runs(results_root: str | Path, profile: str) -> pd.DataFrame:
    """One row per run of `profile` found under `results_root` (main runs first, then screening runs, flagged).

    The frame's ``attrs`` carry what is not a run: ``maxbatch`` (maxbatch.json or None), ``screening``
    (screening.json or None), ``missing`` (main runs and files not found), ``profile`` and ``results_dir``.
    """
    profile_dir = Path(results_root) / profile
    rows, missing = [], []
    screening = _read_json_or_note(profile_dir / "screening.json", missing) if profile_dir.is_dir() else None
    chosen = screening.get("chosen") if isinstance(screening, dict) else None
    origin = _origin(profile_dir) if profile_dir.is_dir() else "local"
    for name, (role, label) in MAIN_RUNS.items():
        row = _run_row(profile_dir / name, missing) if (profile_dir / name).is_dir() else None
        if row is None:
            missing.append(name)
            continue
        rows.append({**row, "role": role, "label": label, "screening": False, "chosen": False})
    for d in _screening_dirs(profile_dir):
        row = _run_row(d, missing)
        if row is not None:
            rows.append({**row, "role": "screening", "label": d.name, "screening": True,
                         "chosen": _is_chosen(row, chosen)})
    maxbatch = _read_json_or_note(profile_dir / "maxbatch.json", missing) if profile_dir.is_dir() else None
    missing += [f for f, v in (("screening.json", screening), ("maxbatch.json", maxbatch))
                if v is None and not any(m.endswith(f"{f} (unreadable)") for m in missing)]
    df = pd.DataFrame(rows, columns=COLUMNS)
    df["origin"] = origin
    df["peak_memory_mib"] = pd.to_numeric(df["peak_memory_bytes"], errors="coerce") / MIB
    for c in ("screening", "chosen"):
        df[c] = df[c].astype(bool)
    df.attrs.update(profile=profile, results_dir=str(results_root), maxbatch=maxbatch,
                    screening=screening if isinstance(screening, dict) else None, missing=missing)
    return df


def load_all(results_root: str | Path) -> pd.DataFrame:
    """The main runs of every profile folder under `results_root`, with `profile` and `device` columns:
    CPU runs made here and GPU runs merged from Colab side by side."""
    root = Path(results_root)
    frames = []
    for d in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        df = load_runs(root, d.name)
        df = df[~df["screening"]]
        if len(df):
            frames.append(df.assign(profile=d.name))
    if not frames:
        return pd.DataFrame(columns=["profile", *COLUMNS])
    out = pd.concat([f.reset_index(drop=True) for f in frames], ignore_index=True)
    out.attrs = {}
    return out[["profile", *COLUMNS]]


def main_runs(df: pd.DataFrame) -> pd.DataFrame:
    """Only the main runs (no screening), in workbook order."""
    return df[~df["screening"].astype(bool)]


def _run(df: pd.DataFrame, name: str) -> pd.Series | None:
    hit = df[(df["run"] == name) & ~df["screening"].astype(bool)]
    return hit.iloc[0] if len(hit) else None


def _num(x: Any) -> float | None:
    """A finite float, or None for missing/NaN values."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


# -------------------------------------------------------------------------------------------------------------
# The published reference (the only typed-in numbers in this module)
# -------------------------------------------------------------------------------------------------------------

def published_reference() -> pd.DataFrame:
    """The reference implementation's published GPU figures (RTX 5070 Ti, bf16), for comparison only.

    Nothing here was measured by this workbook; every table that shows these says so in its `source` column.
    """
    rows = [
        ("peak_memory", "peak memory at the same batch", 3.22, 1.16, "GiB"),
        ("max_batch", "max batch under one memory budget", 152, 432, "sequences"),
        ("tokens_per_s", "training throughput", 243_000, 157_000, "tokens/s"),
        ("val_loss", "validation loss at equal tokens", 1.849, 1.890, "nats/token"),
    ]
    df = pd.DataFrame(rows, columns=["key", "quantity", "baseline", "reversible", "unit"])
    df["ratio"] = df["reversible"] / df["baseline"]
    df["source"] = PUBLISHED_SOURCE
    return df[["key", "quantity", "baseline", "reversible", "ratio", "unit", "source"]]


def _published_ratio(key: str) -> float | None:
    ref = published_reference().set_index("key")
    return float(ref.loc[key, "ratio"]) if key in ref.index else None


def compare_with_published(df: pd.DataFrame, maxbatch: dict | None = None) -> pd.DataFrame:
    """Measured and published figures side by side, one row per quantity both report (text, own units)."""
    h = headline(df, maxbatch).set_index("key")
    fh = format_headline(headline(df, maxbatch)).set_index(h.index)
    ref = _published_text().set_index(published_reference()["key"])
    rows = []
    for key in ref.index:
        rows.append({"quantity": h.loc[key, "quantity"], "measured baseline": fh.loc[key, "baseline"],
                     "measured reversible": fh.loc[key, "reversible"],
                     "measured ratio": fh.loc[key, "reversible / baseline"],
                     "published baseline": ref.loc[key, "baseline"], "published reversible": ref.loc[key, "reversible"],
                     "published ratio": ref.loc[key, "reversible / baseline"],
                     "published quantity": ref.loc[key, "quantity"], "source": PUBLISHED_SOURCE})
    return pd.DataFrame(rows)


# -------------------------------------------------------------------------------------------------------------
# Derived comparisons
# -------------------------------------------------------------------------------------------------------------

def val_loss_at(run_dir: str | Path, tokens: float) -> float | None:
    """Validation loss after `tokens` training tokens, interpolated linearly between the run's evaluations.

    Two runs with different batches evaluate at different token counts; interpolating puts them on one
    x value instead of comparing one run's last evaluation with another run's much earlier one.
    None when `tokens` lies outside the evaluated range.
    """
    evals = read_log(run_dir).dropna(subset=["val_loss"]).sort_values("tokens")
    if not len(evals):
        return None
    t, v = evals["tokens"].to_numpy(float), evals["val_loss"].to_numpy(float)
    if tokens < t[0] or tokens > t[-1]:
        return None
    return float(np.interp(tokens, t, v))


def equal_tokens_val(a: pd.Series, b: pd.Series) -> tuple[int, float, float] | None:
    """(tokens, val loss of a, val loss of b) at the token count both runs reached (the smaller final count)."""
    tokens = min(_num(a["tokens"]) or 0, _num(b["tokens"]) or 0)
    if tokens <= 0:
        return None
    va, vb = val_loss_at(a["path"], tokens), val_loss_at(b["path"], tokens)
    if va is None or vb is None:
        return None
    return int(tokens), va, vb


def reversible_trunk(df: pd.DataFrame, maxbatch: dict | None = None) -> str | None:
    """The reversible trunk the main runs use: the screening's choice, else run2's trunk, else maxbatch's."""
    scr = df.attrs.get("screening") or {}
    if isinstance(scr.get("chosen"), dict) and scr["chosen"].get("trunk"):
        return scr["chosen"]["trunk"]
    for name in (REV, REV_MAX, REV_DEEP):
        r = _run(df, name)
        if r is not None and r["trunk"]:
            return str(r["trunk"])
    others = [k for k, v in (maxbatch or {}).items() if k not in ("residual", "deep") and isinstance(v, dict)]
    return others[0] if others else None


def max_batches(maxbatch: dict | None, rev_trunk: str | None) -> tuple[int, int, int] | None:
    """(baseline max batch, reversible max batch, budget bytes) from maxbatch.json, or None."""
    if not maxbatch or "residual" not in maxbatch:
        return None
    rev = maxbatch.get(rev_trunk) if rev_trunk else None
    if not isinstance(rev, dict):
        return None
    budget = maxbatch.get("budget_bytes") or maxbatch["residual"].get("budget_bytes")
    return int(maxbatch["residual"]["batch"]), int(rev["batch"]), int(budget or 0)


def _maxbatch(df: pd.DataFrame, maxbatch: dict | None) -> dict | None:
    return maxbatch if maxbatch is not None else df.attrs.get("maxbatch")


def _deep_search(mb: dict | None) -> dict | None:
    """The depth search ('deep' in maxbatch.json), if one ran."""
    deep = (mb or {}).get("deep")
    return deep if isinstance(deep, dict) else None


def _unigram_loss(df: pd.DataFrame) -> float | None:
    """The context-free loss recorded by the main runs (they all read the same corpus)."""
    vals = pd.to_numeric(main_runs(df).get("unigram_val_loss", pd.Series(dtype=float)), errors="coerce").dropna()
    return float(vals.iloc[0]) if len(vals) else None


def headline(df: pd.DataFrame, maxbatch: dict | None = None) -> pd.DataFrame:
    """The quotable table: one row per comparison, baseline vs reversible, their ratio, and the published ratio.

    Rows are always the same (values are NaN where a run is missing); `format_headline` renders it.
    """
    mb = _maxbatch(df, maxbatch)
    base, rev = _run(df, BASE), _run(df, REV)
    base_max, rev_max, deep = _run(df, BASE_MAX), _run(df, REV_MAX), _run(df, REV_DEEP)
    rows: list[tuple] = []

    def add(key: str, quantity: str, b: Any, r: Any, runs: str) -> None:
        b, r = _num(b), _num(r)
        ratio = r / b if b not in (None, 0) and r is not None else None
        rows.append((key, quantity, b, r, ratio, _published_ratio(key), runs))

    same = f"{BASE} vs {REV}"
    eq = equal_tokens_val(base, rev) if base is not None and rev is not None else None
    add("val_loss", f"validation loss at {eq[0]:,} tokens" if eq else "validation loss at equal tokens",
        eq[1] if eq else None, eq[2] if eq else None, same)
    batch = _num(base["batch_size"]) if base is not None else None
    at = f"at batch {int(batch)}" if batch else "at the same batch"
    add("peak_memory", f"peak memory {at} (MiB)", _get(base, "peak_memory_mib"), _get(rev, "peak_memory_mib"), same)
    mbs = max_batches(mb, reversible_trunk(df, mb))
    budget = f"under {mbs[2] / MIB:,.0f} MiB" if mbs and mbs[2] else "under one budget"
    add("max_batch", f"max batch {budget}", mbs[0] if mbs else None, mbs[1] if mbs else None, "maxbatch.json")
    add("tokens_per_s", f"tokens/s {at}", _get(base, "tokens_per_s"), _get(rev, "tokens_per_s"), same)
    add("reconstruction_error", "reconstruction error of the trained trunk (relative)", None,
        _get(rev, "reconstruction_error"), REV)
    eqm = equal_tokens_val(base_max, rev_max) if base_max is not None and rev_max is not None else None
    add("val_loss_max_batch", f"validation loss at max batch, {eqm[0]:,} tokens" if eqm else
        "validation loss at max batch", eqm[1] if eqm else None, eqm[2] if eqm else None, f"{BASE_MAX} vs {REV_MAX}")
    add("tokens_per_s_max_batch", "tokens/s at max batch", _get(base_max, "tokens_per_s"),
        _get(rev_max, "tokens_per_s"), f"{BASE_MAX} vs {REV_MAX}")
    search = _deep_search(mb)
    deep_layers = _get(deep, "n_layer")
    if deep_layers is None and search:
        deep_layers = search.get("n_layer")
    cap = f" (search capped at {search['max_layers']})" if deep_capped(search) else ""
    add("deep_layers", f"layers within the baseline's memory, {at}{cap}", _get(base, "n_layer"), deep_layers,
        f"{BASE} vs {REV_DEEP}")
    return pd.DataFrame(rows, columns=["key", "quantity", "baseline", "reversible", "ratio", "published_ratio",
                                       "runs"])


def deep_capped(search: dict | None) -> bool:
    """True when the depth search stopped at its layer cap (`deep_max_layers`) rather than at the budget:
    the deepest model that fits is then deeper than the one trained."""
    return bool(search) and search.get("max_layers") is not None and search.get("n_layer") == search["max_layers"]


def _get(row: pd.Series | None, col: str) -> Any:
    return None if row is None else row.get(col)


_HEADLINE_FMT = {"val_loss": "{:.3f}", "val_loss_max_batch": "{:.3f}", "peak_memory": "{:,.1f}",
                 "max_batch": "{:,.0f}", "tokens_per_s": "{:,.0f}", "tokens_per_s_max_batch": "{:,.0f}",
                 "reconstruction_error": "{:.2e}", "deep_layers": "{:.0f}"}


def _fmt(value: Any, spec: str = "{:.3g}") -> str:
    v = _num(value)
    return "—" if v is None else spec.format(v)


def format_headline(h: pd.DataFrame) -> pd.DataFrame:
    """The headline table as text, each row in its own units, ready to print or paste."""
    out = pd.DataFrame({
        "quantity": h["quantity"],
        "baseline": [_fmt(v, _HEADLINE_FMT.get(k, "{:.3g}")) for k, v in zip(h["key"], h["baseline"])],
        "reversible": [_fmt(v, _HEADLINE_FMT.get(k, "{:.3g}")) for k, v in zip(h["key"], h["reversible"])],
        # losses differ in the third decimal: their ratio needs one more digit than the others
        "reversible / baseline": [_fmt(v, "{:.3f}x" if k.startswith("val_loss") else "{:.2f}x")
                                  for k, v in zip(h["key"], h["ratio"])],
        f"ratio, {PUBLISHED_SOURCE}": [_fmt(v, "{:.3f}x" if k.startswith("val_loss") else "{:.2f}x")
                                       for k, v in zip(h["key"], h["published_ratio"])],
    })
    return out


def runs_table(df: pd.DataFrame) -> pd.DataFrame:
    """The per-run table shown in the report (formatted text)."""
    cols = {"run": "run", "trunk": "trunk", "h": "h", "stream": "stream", "n_layer": "layers", "batch_size": "batch",
            "tokens": "tokens", "final_train_loss": "train loss", "final_val_loss": "val loss",
            "tokens_per_s": "tokens/s", "peak_memory_mib": "peak MiB", "reconstruction_error": "recon. error",
            "wall_s": "wall s", "status": "status", "device": "device"}
    fmts = {"h": "{:g}", "n_layer": "{:.0f}", "batch_size": "{:.0f}", "tokens": "{:,.0f}",
            "final_train_loss": "{:.3f}", "final_val_loss": "{:.3f}", "tokens_per_s": "{:,.0f}",
            "peak_memory_mib": "{:,.1f}", "reconstruction_error": "{:.2e}", "wall_s": "{:.1f}"}
    out = pd.DataFrame(index=range(len(df)))
    for c, name in cols.items():
        vals = df[c].tolist() if c in df else [None] * len(df)
        out[name] = [_fmt(v, fmts[c]) if c in fmts else ("—" if v is None or v != v else str(v)) for v in vals]
    if "chosen" in df and df["chosen"].any():
        out["run"] = [f"{r} (chosen)" if ch else r for r, ch in zip(out["run"], df["chosen"])]
    return out


def maxbatch_table(maxbatch: dict | None) -> pd.DataFrame:
    """One row per max-batch search: trunk, batch found, budget, probes."""
    rows = []
    for key, v in (maxbatch or {}).items():
        if not isinstance(v, dict):
            continue
        probes = v.get("probes") or []
        budget = v.get("budget_bytes") or (maxbatch or {}).get("budget_bytes")
        fitting = [p["peak_bytes"] for p in probes if p.get("fits") and p.get("peak_bytes")]
        rows.append({"search": key, "trunk": v.get("trunk", key), "layers": v.get("n_layer", ""),
                     "max batch": _fmt(v.get("batch"), "{:.0f}"),
                     "budget MiB": _fmt(budget / MIB if budget else None, "{:,.0f}"), "probes": len(probes),
                     "largest fitting peak MiB": _fmt(max(fitting) / MIB if fitting else None, "{:,.1f}")})
    return pd.DataFrame(rows, columns=["search", "trunk", "layers", "max batch", "budget MiB", "probes",
                                       "largest fitting peak MiB"])


# -------------------------------------------------------------------------------------------------------------
# Findings: sentences built from the measured numbers
# -------------------------------------------------------------------------------------------------------------

def _mib(b: Any) -> str:
    v = _num(b)
    return "?" if v is None else f"{v / MIB:,.1f} MiB"


def _pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f}%"


def _finding_memory(base: pd.Series, rev: pd.Series) -> str | None:
    b, r = _num(base["peak_memory_bytes"]), _num(rev["peak_memory_bytes"])
    if not b or r is None:
        return None
    return (f"At batch {int(base['batch_size'])} the reversible trunk ({rev['trunk']}) used {r / b:.2f}x the "
            f"baseline's peak memory ({_mib(r)} vs {_mib(b)}).")


def _finding_maxbatch(mbs: tuple[int, int, int], rev_trunk: str) -> str:
    b, r, budget = mbs
    return (f"Under one budget of {_mib(budget)} the baseline fits batch {b} and the reversible trunk ({rev_trunk}) "
            f"batch {r}: {r / b:.2f}x.")


def _finding_speed(base: pd.Series, rev: pd.Series) -> str | None:
    b, r = _num(base["tokens_per_s"]), _num(rev["tokens_per_s"])
    if not b or r is None:
        return None
    why = ("the price of recomputing each block in backward" if r < SPEED_TIE * b else
           "the recomputation in backward did not show in this measurement of single runs (`python -m rev bench` "
           "times the trunks side by side)")
    return (f"At batch {int(base['batch_size'])} the reversible trunk trained at {r:,.0f} tokens/s against the "
            f"baseline's {b:,.0f} ({_pct(r / b)}): {why}.")


def _finding_val(base: pd.Series, rev: pd.Series, what: str) -> str | None:
    eq = equal_tokens_val(base, rev)
    if eq is None:
        return None
    tokens, b, r = eq
    out = (f"{what}, after {tokens:,} tokens the validation loss was {r:.3f} (reversible) vs {b:.3f} (baseline): "
           f"a difference of {r - b:+.3f} ({_pct(r / b)}).")
    sb, sr = _num(base.get("steps")), _num(rev.get("steps"))
    if sb and sr and sb != sr:
        out += (f" The same tokens took {int(sr):,} optimizer steps (reversible) against {int(sb):,} (baseline): "
                f"at a fixed token budget a larger batch means fewer, less noisy steps, so the comparison mixes "
                f"the trunk with the step count.")
    return out


def _finding_recon(df: pd.DataFrame) -> str | None:
    rev = df[~df["screening"] & df["reconstruction_error"].notna()]
    if not len(rev):
        return None
    worst = rev.loc[pd.to_numeric(rev["reconstruction_error"]).idxmax()]
    err = float(worst["reconstruction_error"])
    verdict = ("well below" if err < RECON_THRESHOLD / 100 else "below" if err < RECON_THRESHOLD else "ABOVE")
    return (f"The trained reversible trunks rebuild their inputs with relative error at most {err:.2e} "
            f"({worst['run']}, {worst['stream']} stream), {verdict} the {RECON_THRESHOLD:g} the training loop "
            f"warns at.")


def _finding_deep(base: pd.Series, deep: pd.Series, search: dict | None) -> str | None:
    lb, ld = _num(base["n_layer"]), _num(deep["n_layer"])
    pb, pd_ = _num(base["peak_memory_bytes"]), _num(deep["peak_memory_bytes"])
    if lb is None or ld is None:
        return None
    within = f" within {_mib(search['budget_bytes'])}" if search and search.get("budget_bytes") else ""
    mem = f", peaking at {_mib(pd_)} vs the baseline's {_mib(pb)}" if pb and pd_ else ""
    val = ""
    if _num(base["final_val_loss"]) is not None and _num(deep["final_val_loss"]) is not None:
        val = f"; its validation loss was {float(deep['final_val_loss']):.3f} vs {float(base['final_val_loss']):.3f}"
    if deep_capped(search):
        used = f": at {int(ld)} layers it peaked at {_mib(pd_)} of the {_mib(pb)} allowed" if pb and pd_ else ""
        return (f"The depth search stopped at its cap of {int(ld)} layers (the profile's `deep_max_layers`, which "
                f"bounds the deep run's training time), not at the memory limit{used}, at batch "
                f"{int(deep['batch_size'])}. Against the baseline's {int(lb)} layers that is {ld / lb:.2f}x, a lower "
                f"bound{val}.")
    return (f"The deepest reversible model{within} at batch {int(deep['batch_size'])} has {int(ld)} layers against "
            f"the baseline's {int(lb)} ({ld / lb:.2f}x){mem}{val}.")


def _finding_unigram(df: pd.DataFrame) -> str | None:
    u = _unigram_loss(df)
    if u is None:
        return None
    ended = [(r, float(r["final_val_loss"])) for _, r in main_runs(df).iterrows()
             if _num(r.get("final_val_loss")) is not None]
    out = (f"A context-free model, predicting every token by its training frequency, scores {u:.3f} nats on "
           "the validation split; the runs end at " + ", ".join(f"{r['label']} {v:.3f}" for r, v in ended)
           + ". Only what lies below that line comes from reading context.")
    for r, v in ended:
        if v > u - UNIGRAM_MARGIN:
            steps = f"in its {int(r['steps']):,} optimizer steps" if _num(r.get("steps")) else "so far"
            out += (f" {r['label'].capitalize()} ({r['run']}) ended within {UNIGRAM_MARGIN} nats of that line: "
                    f"{steps} it learnt token frequencies and little else.")
    return out


def _finding_screening(df: pd.DataFrame) -> str | None:
    scr = df.attrs.get("screening") or {}
    chosen = scr.get("chosen")
    n = int(df["screening"].sum())
    if not chosen:
        return f"{n} screening runs present, no choice recorded." if n else None
    why = f" ({scr['reason']})" if scr.get("reason") else ""
    return (f"The screening compared {n} short runs and chose {chosen.get('trunk')} with h={chosen.get('h')}, "
            f"stream {chosen.get('stream', 'fp32')}{why}.")


def _finding_published(df: pd.DataFrame, mb: dict | None) -> str | None:
    h = headline(df, mb).set_index("key")
    parts = []
    for key, what in (("peak_memory", "peak memory"), ("max_batch", "max batch"), ("tokens_per_s", "tokens/s"),
                      ("val_loss", "validation loss")):
        r = _num(h.loc[key, "ratio"])
        if r is not None:
            parts.append(f"{what} {r:.2f}x (published {h.loc[key, 'published_ratio']:.2f}x)")
    if not parts:
        return None
    return f"Reversible / baseline here vs the published figures ({PUBLISHED_SOURCE}): " + "; ".join(parts) + "."


def findings(df: pd.DataFrame, maxbatch: dict | None = None) -> list[str]:
    """Sentences stating what the runs measured; runs that are missing are named instead of guessed."""
    mb = _maxbatch(df, maxbatch)
    if not len(df):
        return [f"No runs found for profile {df.attrs.get('profile', '?')!r} under "
                f"{df.attrs.get('results_dir', '?')}: run the training notebooks (or `python -m rev workbook`) first."]
    base, rev = _run(df, BASE), _run(df, REV)
    base_max, rev_max, deep = _run(df, BASE_MAX), _run(df, REV_MAX), _run(df, REV_DEEP)
    out: list[str | None] = [_finding_screening(df)]
    if base is not None and rev is not None:
        out += [_finding_memory(base, rev), _finding_speed(base, rev), _finding_val(base, rev, "At the same batch")]
    mbs = max_batches(mb, reversible_trunk(df, mb))
    if mbs:
        out.append(_finding_maxbatch(mbs, reversible_trunk(df, mb) or "reversible"))
    if base_max is not None and rev_max is not None:
        out.append(_finding_val(base_max, rev_max,
                                f"Each at its own max batch ({int(base_max['batch_size'])} vs "
                                f"{int(rev_max['batch_size'])})"))
        s = _finding_speed(base_max, rev_max)
        if s:
            out.append(s.replace(f"At batch {int(base_max['batch_size'])}", "At their max batches"))
    if base is not None and deep is not None:
        out.append(_finding_deep(base, deep, _deep_search(mb)))
    out.append(_finding_recon(df))
    out.append(_finding_unigram(df))
    out.append(_finding_published(df, mb))
    devices = sorted(set(main_runs(df)["device"].dropna().astype(str)))
    if len(devices) > 1:
        out.append(f"Caution: the main runs come from {len(devices)} devices ({'; '.join(devices)}); memory and "
                   f"speed compare only within one device.")
    missing = df.attrs.get("missing") or []
    if missing:
        out.append("Not present (so not compared): " + ", ".join(missing) + ".")
    return [s for s in out if s]


def takeaways(df: pd.DataFrame, maxbatch: dict | None = None) -> list[str]:
    """Short lines for the end of a notebook -- memory, what it buys, what it costs, quality, exactness --
    each computed from the headline; comparisons whose runs are missing are left out."""
    h = headline(df, maxbatch).set_index("key")
    r = {k: _num(h.loc[k, "ratio"]) for k in h.index}
    out = []
    if r["peak_memory"] is not None:
        out.append(f"Memory: the reversible trunk needed {r['peak_memory']:.2f}x the baseline's peak at the same "
                   f"batch.")
    if r["max_batch"] is not None:
        out.append(f"What it buys: {r['max_batch']:.2f}x the batch under the same budget.")
    if r["deep_layers"] is not None:
        out.append(f"... or {r['deep_layers']:.2f}x the depth at the baseline's batch and memory.")
    if r["tokens_per_s"] is not None:
        out.append(f"What it costs: {_pct(r['tokens_per_s'])} tokens/s at the same batch.")
    if r["val_loss"] is not None:
        out.append(f"Quality: validation loss {r['val_loss']:.3f}x the baseline's at equal tokens.")
    recon = _num(h.loc["reconstruction_error", "reversible"])
    if recon is not None:
        out.append(f"Exactness: inputs rebuilt to a relative error of {recon:.1e}.")
    return out or ["No comparison possible yet: the baseline and reversible runs are not both present."]


# -------------------------------------------------------------------------------------------------------------
# Plots (each returns a matplotlib Figure)
# -------------------------------------------------------------------------------------------------------------

def _plt():
    import matplotlib.pyplot as plt  # imported late: `python -m rev report --help` stays fast
    return plt


def _empty(ax, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="grey")
    ax.set_xticks([])
    ax.set_yticks([])


def _colour(run: str) -> str:
    return _COLOURS.get(run, _SCREEN_COLOUR)


def _bar_labels(df: pd.DataFrame) -> list[str]:
    return [f"{lab}\n{trunk}, b={_fmt(b, '{:.0f}')}"
            for lab, trunk, b in zip(df["label"], df["trunk"], df["batch_size"])]


def token_axis(ax) -> None:
    """Tick labels like 200k and 1.5M on a tokens x-axis (raw counts overlap)."""
    from matplotlib.ticker import FuncFormatter

    def fmt(x: float, _pos: int) -> str:
        return f"{x / 1e6:g}M" if abs(x) >= 1e6 else f"{x / 1e3:g}k" if abs(x) >= 1e3 else f"{x:g}"
    ax.xaxis.set_major_formatter(FuncFormatter(fmt))


def plot_loss_vs_tokens(df: pd.DataFrame, smooth: int = 10):
    """Training loss (smoothed) and validation loss against tokens seen, for every main run."""
    plt = _plt()
    fig, (ax_t, ax_v) = plt.subplots(1, 2, figsize=(11, 4), sharex=True)
    runs = main_runs(df)
    for _, r in runs.iterrows():
        log = read_log(r["path"])
        if log.empty:
            continue
        c, lab = _colour(r["run"]), f"{r['label']} ({r['trunk']}, b={int(r['batch_size'])})"
        ax_t.plot(log["tokens"], log["loss"], color=c, alpha=0.2, lw=0.8)
        ax_t.plot(log["tokens"], log["loss"].rolling(smooth, min_periods=1).mean(), color=c, label=lab)
        ev = log.dropna(subset=["val_loss"])
        ax_v.plot(ev["tokens"], ev["val_loss"], "o-", color=c, label=lab, ms=4)
    if not len(runs):
        _empty(ax_t, "no main runs present")
        _empty(ax_v, "no main runs present")
    unigram = _unigram_loss(df)
    if unigram is not None:
        for ax in (ax_t, ax_v):
            ax.axhline(unigram, color="k", ls=":", lw=1, label="context-free (unigram) model")
    ax_t.set(title="training loss (faint: raw, solid: running mean)", xlabel="tokens", ylabel="loss (nats/token)")
    ax_v.set(title="validation loss", xlabel="tokens", ylabel="loss (nats/token)")
    for ax in (ax_t, ax_v):
        token_axis(ax)
    handles, labels = ax_v.get_legend_handles_labels()
    if labels:  # below both panels, where it hides no curve
        fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06 * ((len(labels) + 2) // 3), 1, 1))
    return fig


def _bars(df: pd.DataFrame, col: str, title: str, ylabel: str, fmt: str, empty: str, log: bool = False):
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(df) + 2), 4))
    vals = pd.to_numeric(df[col], errors="coerce") if len(df) else pd.Series(dtype=float)
    present = df[vals.notna()] if len(df) else df
    if not len(present):
        _empty(ax, empty)
    else:
        v = vals[vals.notna()]
        x = np.arange(len(present))
        bars = ax.bar(x, v, color=[_colour(r) for r in present["run"]])
        ax.set_xticks(x, _bar_labels(present), fontsize=8)
        ax.bar_label(bars, labels=[fmt.format(y) for y in v], fontsize=8)
        if log:
            ax.set_yscale("log")
        elif col == "final_val_loss":  # losses differ in the second decimal: do not start the axis at zero
            lo, hi = float(v.min()), float(v.max())
            pad = max(0.05, (hi - lo) * 0.5)
            ax.set_ylim(lo - pad, hi + pad)
        else:
            ax.set_ylim(0, float(v.max()) * 1.15)
    ax.set(title=title, ylabel=ylabel)
    fig.tight_layout()
    return fig


def plot_val_loss(df: pd.DataFrame):
    """Final validation loss of each main run."""
    runs = main_runs(df)
    tok = ", ".join(f"{t:,}" for t in sorted({int(t) for t in runs["tokens"].dropna()})) if len(runs) else ""
    return _bars(runs, "final_val_loss", f"final validation loss (tokens: {tok})" if tok else "final validation loss",
                 "loss (nats/token)", "{:.3f}", "no validation loss yet")


def plot_tokens_per_s(df: pd.DataFrame):
    """Training throughput of each main run."""
    return _bars(main_runs(df), "tokens_per_s", "training throughput", "tokens/s", "{:,.0f}", "no throughput yet")


def plot_peak_memory(df: pd.DataFrame, maxbatch: dict | None = None):
    """Peak memory of a training step of each main run, with the max-batch budget when known."""
    mb = _maxbatch(df, maxbatch)
    fig = _bars(main_runs(df), "peak_memory_mib", "peak memory of one training step", "MiB", "{:,.1f}",
                "no memory measurement yet")
    budget = _num((mb or {}).get("budget_bytes"))
    if budget and len(main_runs(df)):
        ax = fig.axes[0]
        ax.axhline(budget / MIB, color="k", ls="--", lw=1, label=f"max-batch budget {_mib_short(budget)}")
        ax.set_ylim(0, max(ax.get_ylim()[1], budget / MIB * 1.1))
        ax.legend(fontsize=8)
    return fig


def _probe_points(ax, probes: list[dict], colour: Any, name: str) -> None:
    """Probes as measured: circles fit the budget, crosses do not (a probe that ran out of memory has no peak)."""
    probes = sorted(probes or [], key=lambda p: p["batch"])
    fit = [(p["batch"], p["peak_bytes"] / MIB) for p in probes if p.get("fits") and p.get("peak_bytes")]
    miss = [(p["batch"], p["peak_bytes"] / MIB) for p in probes if not p.get("fits") and p.get("peak_bytes")]
    if fit:
        ax.plot(*zip(*fit), "o-", color=colour, label=f"{name}: fits")
    if miss:
        ax.plot(*zip(*miss), "x", color=colour, ms=8, label=f"{name}: over budget")


def _mib_short(b: float) -> str:
    v = b / MIB
    return f"{v:,.0f} MiB" if v >= 100 else f"{v:.1f} MiB"


def _budget_line(ax, budget: float | None) -> None:
    if budget:
        ax.axhline(budget / MIB, color="k", ls="--", lw=1, label=f"budget {_mib_short(budget)}")


def plot_max_batch(maxbatch: dict | None):
    """The max-batch searches: every probe's measured peak against its batch, and the batches found; when
    maxbatch.json also holds the depth search ('deep'), its probes against the layer count."""
    plt = _plt()
    mb = maxbatch or {}
    # "deep" is a search over the layer count at the baseline's batch, not over the batch: its own panel
    searches = {k: v for k, v in mb.items() if isinstance(v, dict) and "batch" in v and k != "deep"}
    deep = mb.get("deep") if isinstance(mb.get("deep"), dict) else None
    fig, axes = plt.subplots(1, 3 if deep else 2, figsize=(15 if deep else 11, 4))
    ax_p, ax_b = axes[0], axes[1]
    if not searches:
        _empty(ax_p, "no max-batch search (maxbatch.json)")
        _empty(ax_b, "no max-batch search (maxbatch.json)")
    else:
        colours = {k: _COLOURS[BASE] if k == "residual" else (_COLOURS[REV], _COLOURS[REV_MAX], _SCREEN_COLOUR)[i % 3]
                   for i, k in enumerate(k for k in searches if k != "residual")} | {"residual": _COLOURS[BASE]}
        for key, v in searches.items():
            _probe_points(ax_p, v.get("probes"), colours[key], key)
        budget = _num(mb.get("budget_bytes")) or _num(next(iter(searches.values())).get("budget_bytes"))
        _budget_line(ax_p, budget)
        ax_p.set(title="max-batch probes (real optimizer steps)", xlabel="batch", ylabel="peak MiB")
        ax_p.legend(fontsize=8)
        names = list(searches)
        vals = [int(searches[k]["batch"]) for k in names]
        bars = ax_b.bar(names, vals, color=[colours[k] for k in names])
        base = searches.get("residual", {}).get("batch")
        ax_b.bar_label(bars, labels=[f"{v}" + (f" ({v / base:.2f}x)" if base and k != "residual" else "")
                                     for k, v in zip(names, vals)], fontsize=8)
        ax_b.set_ylim(0, max(vals) * 1.15)
        ax_b.set(title="largest batch that fits" + (f" {_mib_short(budget)}" if budget else ""), ylabel="batch")
    if deep:
        ax_d = axes[2]
        _probe_points(ax_d, deep.get("probes"), _COLOURS[REV_DEEP], deep.get("trunk", "deep"))
        _budget_line(ax_d, _num(deep.get("budget_bytes")))
        found = f"{deep.get('n_layer', '?')} layers" + (" (the search's cap)" if deep_capped(deep) else "")
        ax_d.set(title=f"depth probes at batch {deep.get('batch', '?')}: deepest fitting {found}",
                 xlabel="layers", ylabel="peak MiB")
        ax_d.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_reconstruction_error(df: pd.DataFrame):
    """Relative reconstruction error of every trained reversible trunk (screening runs in grey), log scale."""
    plt = _plt()
    rev = df[pd.to_numeric(df["reconstruction_error"], errors="coerce").notna()] if len(df) else df
    fig, ax = plt.subplots(figsize=(max(5, 1.4 * len(rev) + 2), 4))
    if not len(rev):
        _empty(ax, "no reversible runs present")
    else:
        err = pd.to_numeric(rev["reconstruction_error"]).clip(lower=1e-18)  # exact (0) still gets a visible bar
        x = np.arange(len(rev))
        colours = [_SCREEN_COLOUR if scr else _colour(r) for r, scr in zip(rev["run"], rev["screening"])]
        bars = ax.bar(x, err, color=colours)
        ax.set_xticks(x, [f"{lab}\n{t} h={h:g} {s}" for lab, t, h, s in zip(rev["label"], rev["trunk"], rev["h"],
                                                                            rev["stream"])], fontsize=7, rotation=20)
        ax.bar_label(bars, labels=[f"{e:.1e}" for e in rev["reconstruction_error"]], fontsize=8)
        ax.axhline(RECON_THRESHOLD, color="k", ls="--", lw=1, label=f"warning threshold {RECON_THRESHOLD:g}")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    ax.set(title="reconstruction error of the trained trunk (relative)", ylabel="|x - inverse(forward(x))| / |x|")
    fig.tight_layout()
    return fig


def plots(df: pd.DataFrame, maxbatch: dict | None = None) -> dict[str, Any]:
    """Every report figure, by file stem."""
    mb = _maxbatch(df, maxbatch)
    return {"loss_vs_tokens": plot_loss_vs_tokens(df), "val_loss": plot_val_loss(df),
            "tokens_per_s": plot_tokens_per_s(df), "peak_memory": plot_peak_memory(df, mb),
            "max_batch": plot_max_batch(mb), "reconstruction_error": plot_reconstruction_error(df)}


# -------------------------------------------------------------------------------------------------------------
# REPORT.md
# -------------------------------------------------------------------------------------------------------------

def markdown_table(df: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table of `df` (cells as text; '|' escaped)."""
    def cell(v: Any) -> str:
        return ("—" if v is None or (isinstance(v, float) and v != v) else str(v)).replace("|", "\\|")
    head = "| " + " | ".join(cell(c) for c in df.columns) + " |"
    sep = "|" + "|".join("---" for _ in df.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, sep, *body])


def _published_text() -> pd.DataFrame:
    ref = published_reference()
    fmt = {"peak_memory": "{:.2f}", "max_batch": "{:.0f}", "tokens_per_s": "{:,.0f}", "val_loss": "{:.3f}"}
    return pd.DataFrame({"quantity": ref["quantity"] + " (" + ref["unit"] + ")",
                         "baseline": [fmt[k].format(v) for k, v in zip(ref["key"], ref["baseline"])],
                         "reversible": [fmt[k].format(v) for k, v in zip(ref["key"], ref["reversible"])],
                         "reversible / baseline": [f"{v:.2f}x" for v in ref["ratio"]],
                         "source": ref["source"]})


_FIGURES = [("loss_vs_tokens", "Loss against tokens"), ("val_loss", "Validation loss"),
            ("peak_memory", "Peak memory"), ("max_batch", "Max batch under one budget"),
            ("tokens_per_s", "Throughput"), ("reconstruction_error", "Reconstruction error")]


def report_markdown(df: pd.DataFrame, maxbatch: dict | None = None, all_runs: pd.DataFrame | None = None) -> str:
    """The text of REPORT.md (figures referenced as plots/<name>.png)."""
    mb = _maxbatch(df, maxbatch)
    profile = df.attrs.get("profile", "?")
    devices = sorted(set(df["device"].dropna().astype(str))) if len(df) else []
    lines = [f"# Report: profile `{profile}`", "",
             f"Every number below was measured by the runs in `{profile}/` "
             f"({', '.join(devices) if devices else 'no runs yet'}), except the table labelled "
             f"*{PUBLISHED_SOURCE}*.", "",
             "## Headline", "", markdown_table(format_headline(headline(df, mb))), "",
             "## Findings", "", *[f"- {s}" for s in findings(df, mb)], "",
             f"## Published reference ({PUBLISHED_SOURCE})", "",
             "Figures published for the reference implementation, not measured here: compare the ratios, "
             "not the absolute numbers.", "", markdown_table(_published_text()), "",
             "## Runs", "", markdown_table(runs_table(main_runs(df))) if len(main_runs(df)) else "No main runs.", ""]
    scr = df[df["screening"]]
    if len(scr):
        lines += ["## Screening", "", markdown_table(runs_table(scr)), ""]
    if mb:
        lines += ["## Max batch", "", markdown_table(maxbatch_table(mb)), ""]
    lines += ["## Figures", ""]
    for stem, title in _FIGURES:
        lines += [f"### {title}", "", f"![{title}]({PLOTS_DIR}/{stem}.png)", ""]
    if all_runs is not None and all_runs["profile"].nunique() > 1:
        t = runs_table(all_runs)
        t.insert(0, "profile", all_runs["profile"].tolist())
        lines += ["## All results in this folder (by device)", "", markdown_table(t), ""]
    return "\n".join(lines)


def _swap_in(new: Path, dest: Path) -> None:
    """Put `new` where `dest` is; an existing `dest` is moved aside first and removed only afterwards."""
    old = dest.with_name(f".{dest.name}.old")
    if old.exists():
        shutil.rmtree(old) if old.is_dir() else old.unlink()
    if dest.exists():
        os.replace(dest, old)
    os.replace(new, dest)
    if old.exists():
        shutil.rmtree(old) if old.is_dir() else old.unlink()


def write_report(results_root: str | Path, profile: str) -> Path:
    """Write results/<profile>/REPORT.md and plots/*.png; returns the REPORT.md path.

    Everything is made in a temporary folder first and moved into place at the end, so a failure leaves the
    previous report as it was.
    """
    plt = _plt()
    profile_dir = Path(results_root) / profile
    if not profile_dir.is_dir():
        raise ValueError(f"no results for profile {profile!r} under {results_root}: run the workbook "
                         f"(`python -m rev workbook --profile {profile}`) or merge an archive first")
    df = load_runs(results_root, profile)
    tmp = Path(tempfile.mkdtemp(prefix=".report-", dir=profile_dir))
    try:
        (tmp / PLOTS_DIR).mkdir()
        for stem, fig in plots(df).items():
            fig.savefig(tmp / PLOTS_DIR / f"{stem}.png", dpi=110)
            plt.close(fig)
        (tmp / REPORT_NAME).write_text(report_markdown(df, all_runs=load_all(results_root)) + "\n")
        _swap_in(tmp / PLOTS_DIR, profile_dir / PLOTS_DIR)
        os.replace(tmp / REPORT_NAME, profile_dir / REPORT_NAME)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return profile_dir / REPORT_NAME


# -------------------------------------------------------------------------------------------------------------
# Merging results brought back from another machine
# -------------------------------------------------------------------------------------------------------------

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@+-]*$")


def _bad_archive(archive: Path, why: str) -> ValueError:
    return ValueError(f"{archive} is not a revbook results archive: {why}. Make one where the runs are with "
                      f"`python -m rev bundle --results PROFILE` and merge that zip.")


def _archive_layout(archive: Path, zf: zipfile.ZipFile) -> dict[str, list[str]]:
    """Profile -> member names, after checking that every member lies inside results/<profile>/."""
    from .bundle import RESULTS_KIND, RESULTS_MARKER

    files = [i for i in zf.infolist() if not i.is_dir()]
    if not files:
        raise _bad_archive(archive, "it is empty")
    layout: dict[str, list[str]] = {}
    for info in files:
        parts = PurePosixPath(info.filename).parts
        if "\\" in info.filename or info.filename.startswith("/") or ".." in parts:
            raise _bad_archive(archive, f"member {info.filename!r} points outside its folder")
        if len(parts) < 3 or parts[0] != "results" or not _NAME.match(parts[1]):
            raise _bad_archive(archive, f"member {info.filename!r} is not under results/<profile>/")
        layout.setdefault(parts[1], []).append(info.filename)
    for profile, names in layout.items():
        marker = f"results/{profile}/{RESULTS_MARKER}"
        if marker in names:
            try:
                kind = json.loads(zf.read(marker)).get("kind")
            except (ValueError, AttributeError):
                kind = None
            if kind != RESULTS_KIND:
                raise _bad_archive(archive, f"{marker} does not describe a results archive")
        runs = [n for n in names if n.endswith(("/summary.json", "/log.csv", "/maxbatch.json", "/screening.json"))]
        if not runs:
            raise _bad_archive(archive, f"results/{profile}/ holds no run results (no summary.json or log.csv)")
        for n in names:
            if n.endswith(".json"):
                try:
                    json.loads(zf.read(n))
                except ValueError:
                    raise _bad_archive(archive, f"{n} is not valid JSON") from None
    return layout


def _devices(profile_dir: Path) -> set[str]:
    found = set()
    for s in list(profile_dir.glob("*/summary.json")) + list(profile_dir.glob(f"{SCREENING_DIR}/*/summary.json")):
        d = (_read_json_or_note(s, []) or {}).get("device")
        if d:
            found.add(str(d))
    return found


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.split("(")[0].lower()).strip("-") or "device"


def _destination(results_root: Path, profile: str, incoming: Path) -> Path:
    """Where an incoming profile folder goes: its own name, unless local runs of that name come from another
    device -- then `<profile>-<device>`, so that neither set of runs overwrites the other."""
    dest = results_root / profile
    new, old = _devices(incoming), _devices(dest) if dest.is_dir() else set()
    if not old or old <= new:
        return dest
    return results_root / f"{profile}-{_slug(sorted(new)[0]) if new else 'imported'}"


def _move_contents(src: Path, dest: Path) -> None:
    """Move every entry of `src` into `dest`, replacing entries of the same name."""
    dest.mkdir(parents=True, exist_ok=True)
    for entry in sorted(src.iterdir()):
        target = dest / entry.name
        if entry.name == "MERGED.json":
            continue
        if target.exists():
            _swap_in(entry, target)
        else:
            os.replace(entry, target)


def merge(archive: str | Path, results_root: str | Path) -> list[Path]:
    """Unpack a results archive (from `python -m rev bundle --results PROFILE`) into `results_root`.

    Each profile in the archive lands in ``results_root/<profile>/``, or in ``<profile>-<device>/`` when local
    runs of that profile were made on another device. Rows keep their `device`, so `load_all` shows both. An
    archive that is not a results archive raises ValueError before anything under `results_root` is touched.
    Returns the profile folders written.
    """
    archive, root = Path(archive), Path(results_root)
    if not archive.is_file():
        raise ValueError(f"no archive at {archive}: give the path of the zip downloaded from Colab")
    if not zipfile.is_zipfile(archive):
        raise _bad_archive(archive, "it is not a zip file")
    with zipfile.ZipFile(archive) as zf:
        layout = _archive_layout(archive, zf)
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".merge-", dir=root))
        try:
            for names in layout.values():
                for n in names:
                    zf.extract(n, tmp)
            written = []
            for profile in sorted(layout):
                incoming = tmp / "results" / profile
                dest = _destination(root, profile, incoming)
                devices = sorted(_devices(incoming))
                _move_contents(incoming, dest)
                log = _read_json_or_note(dest / "MERGED.json", []) or []
                log.append({"archive": archive.name, "profile": profile, "devices": devices})
                (dest / "MERGED.json").write_text(json.dumps(log, indent=2))
                written.append(dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return written


# -------------------------------------------------------------------------------------------------------------
# Command line
# -------------------------------------------------------------------------------------------------------------

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default="auto",
                   help="profile folder under --results ('auto': the GPU profile with CUDA, else cpu; with "
                        "--merge, the archive's profile)")
    p.add_argument("--results", type=Path, default=Path("results"), help="results root (default: results)")
    p.add_argument("--merge", type=Path, metavar="ARCHIVE", help="first unpack a results zip made on another machine")


def _print_summary(df: pd.DataFrame, path: Path) -> None:
    print(format_headline(headline(df)).to_string(index=False))
    print()
    for s in findings(df):
        print(f"- {s}")
    print(f"\nwrote {path}")


def run_cli(args: argparse.Namespace) -> int:
    from ..engine.profiles import resolve_profile_name

    profiles: list[str] = []
    try:
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
            path = write_report(args.results, profile)
            _print_summary(load_runs(args.results, profile), path)
    except ValueError as e:
        raise SystemExit(f"error: {e}")
    return 0
