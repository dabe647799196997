"""Notebook 07 and REPORT.md's evidence tables: the runs, the headline figures, the max-batch searches and the
comparison with the published reference, formatted as text (`markdown_table` renders any of them in REPORT.md)."""
from __future__ import annotations

from typing import Any

import pandas as pd

from ..shared.tables import MISSING, format_number, tidy
from ..shared.results import (MIB, PUBLISHED_SOURCE, headline, number, published_reference)



def _ratio(v: Any) -> str:
    return "—" if number(v) is None else f"{format_number(float(v))}x"


_LOSS_KEYS = ("val_loss", "val_loss_max_batch")   # cross-entropies: compared as a difference, never a ratio


def format_headline(h: pd.DataFrame) -> pd.DataFrame:
    """The headline table as text, each row in its own units (`tables.format_number`), ready to print or paste: a
    ratio where one means something, a difference in nats for a loss (a cross-entropy's ratio means nothing, and
    across corpora even less)."""
    published = published_reference().set_index("key")

    def compared(row: pd.Series) -> str:
        if row["key"] not in _LOSS_KEYS:
            return _ratio(row["ratio"])
        b, r = number(row["baseline"]), number(row["reversible"])
        return MISSING if b is None or r is None else f"{r - b:+.3f} nats"

    def reference(row: pd.Series) -> str:
        if row["key"] not in _LOSS_KEYS:
            return _ratio(row["published_ratio"])
        if row["key"] not in published.index:
            return MISSING
        ref = published.loc[row["key"]]
        return f"{ref['reversible'] - ref['baseline']:+.3f} nats (another corpus)"

    return pd.DataFrame({
        "quantity": h["quantity"],
        "baseline": [format_number(v) for v in h["baseline"]],
        "reversible": [format_number(v) for v in h["reversible"]],
        "reversible vs baseline": [compared(r) for _, r in h.iterrows()],
        PUBLISHED_SOURCE: [reference(r) for _, r in h.iterrows()],
    })


# what a reader scans a runs table for (the training loss and wall seconds are in each run's summary.json; tokens/s
# too: the runs were timed apart, so a column of their speeds would invite a comparison no verdict may draw)
_RUN_COLUMNS = {"run": "run", "trunk": "trunk", "h": "h", "stream": "stream", "n_layer": "layers",
                "batch_size": "batch", "tokens": "tokens", "final_val_loss": "val loss", "peak_memory_mib": "peak MiB", "reconstruction_error": "recon. error", "status": "status",
                "device": "device"}


def runs_table(df: pd.DataFrame) -> pd.DataFrame:
    """The per-run table shown in the report (`tables.tidy`: whole numbers as integers, 4 significant figures);
    the status and device columns only where they differ between the runs (the report's first line names the
    device, and "complete" on every row says nothing), and layers, batch and tokens likewise where several rows
    share one value (the screening's)."""
    out = pd.DataFrame({name: (df[c].tolist() if c in df else [None] * len(df)) for c, name in _RUN_COLUMNS.items()})
    for c in ("status", "device", "layers", "batch", "tokens"):   # a column the same on every row says nothing
        same = len(out) and out[c].astype(str).nunique() <= 1
        if same and (c in ("status", "device") or len(out) > 1):   # a single row keeps its geometry
            out = out.drop(columns=c)
    if "h" in out and "trunk" in out:   # a residual block has no step size to choose: its h is no setting
        out["h"] = [None if t == "residual" else h for t, h in zip(out["trunk"], out["h"])]
    if "run" in out:
        out["run"] = [f"{r} (runner-up)" if r == "run2b_screening_runner_up" else r for r in out["run"]]
    if "chosen" in df and df["chosen"].any():
        out["run"] = [f"{r} (chosen)" if ch else r for r, ch in zip(out["run"], df["chosen"])]
    return tidy(out)


def maxbatch_table(maxbatch: dict | None) -> pd.DataFrame:
    """One row per max-batch search: trunk, batch found, budget, probes."""
    rows = []
    for key, v in (maxbatch or {}).items():
        if not isinstance(v, dict):
            continue
        probes = v.get("probes") or []
        budget = v.get("budget_bytes") or (maxbatch or {}).get("budget_bytes")
        fitting = [p["peak_bytes"] for p in probes if p.get("fits") and p.get("peak_bytes")]
        rows.append({"search": key, "trunk": v.get("trunk", key), "layers": v.get("n_layer"),
                     "max batch": number(v.get("batch")), "budget MiB": budget / MIB if budget else None,
                     "probes": len(probes), "largest fitting peak MiB": max(fitting) / MIB if fitting else None})
    return tidy(pd.DataFrame(rows, columns=["search", "trunk", "layers", "max batch", "budget MiB", "probes",
                                            "largest fitting peak MiB"]))


def compare_with_published(df: pd.DataFrame, maxbatch: dict | None = None) -> pd.DataFrame:
    """Measured and published figures side by side, one row per quantity both report (text, own units)."""
    h = headline(df, maxbatch).set_index("key")
    fh = format_headline(headline(df, maxbatch)).set_index(h.index)
    ref = _published_text().set_index(published_reference()["key"])
    rows = []
    for key in ref.index:
        rows.append({"quantity": h.loc[key, "quantity"], "measured baseline": fh.loc[key, "baseline"],
                     "measured reversible": fh.loc[key, "reversible"],
                     "measured ratio": fh.loc[key, "reversible vs baseline"],
                     "published baseline": ref.loc[key, "baseline"], "published reversible": ref.loc[key, "reversible"],
                     "published ratio": ref.loc[key, "reversible vs baseline"],
                     "published quantity": ref.loc[key, "quantity"], "source": PUBLISHED_SOURCE})
    return pd.DataFrame(rows)


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
    return pd.DataFrame({"quantity": ref["quantity"] + " (" + ref["unit"] + ")",
                         "baseline": [format_number(v) for v in ref["baseline"]],
                         "reversible": [format_number(v) for v in ref["reversible"]],
                         "reversible vs baseline": [f"{r - b:+.3f} nats" if k in _LOSS_KEYS else _ratio(v)
                                                    for k, b, r, v in zip(ref["key"], ref["baseline"],
                                                                          ref["reversible"], ref["ratio"])],
                         "source": ref["source"]})


def worst_reconstruction(df: pd.DataFrame) -> tuple[str, float] | None:
    """(run, relative error) of the trained reversible trunk that rebuilt its input worst, or None when no run
    measured one; the verdict on it is `error <= rev.core.reversible.RECON_LIMIT`, the loop's own warning line."""
    err = pd.to_numeric(df["reconstruction_error"], errors="coerce") if "reconstruction_error" in df else None
    if err is None or err.isna().all():
        return None
    i = err.idxmax()
    return str(df.loc[i, "run"]), float(err[i])
