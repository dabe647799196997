"""REPORT.md's section on the companion chapters (07b-10): what their results files in ``results/<profile>/`` hold.

The chapters live in `rev.chapters` (and 07b in `rev.chapters.landscape.measure`); this module does not import them. It reads
the files they leave behind -- ``landscape/measured.json`` (07b), ``thermo_summary.json`` (08), ``adaptive/
training.csv`` (09), ``10_finetune_trace/trace.revtrace`` (10) -- and says "not run" for a chapter with neither a
results file nor a workbook record (``workbook/<notebook>.json``, written when `python -m rev workbook` ran it).
"""
from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Callable

import pandas as pd

from ...engine.files import read_json
from ..shared.results import MIB, number
from ..shared.tables import format_number

TRACE_MAGIC = b"REVTRACE"      # rev.chapters.trace.tracefile's layout: magic, u64 length + JSON, payload, sha256
TRACE_DOC_LIMIT = 64 * MIB     # a trace's JSON part larger than this is not read; its size is still reported
UNDECIDED = "not decided"      # rev.chapters.thermo.seeds: the seeds of a verdict disagree


def _landscape(folder: Path) -> str | None:
    """07b: activation memory of each variant against the stored trunk, at the deepest, largest measured point."""
    rows = read_json(folder / "landscape" / "measured.json")
    df = pd.DataFrame(rows)
    if not len(df) or not {"variant", "depth", "batch", "activation_bytes"} <= set(df.columns):
        return None
    at = df[df["depth"] == df["depth"].max()]
    at = at[at["batch"] == at["batch"].max()].set_index("variant")
    if "stored" not in at.index or not number(at.loc["stored", "activation_bytes"]):
        return None
    stored = float(at.loc["stored", "activation_bytes"])
    others = at.drop(index="stored")["activation_bytes"].astype(float) / stored
    least = others.idxmin()
    timed = int(df["tokens_per_s"].notna().sum()) if "tokens_per_s" in df else 0
    speed = (f" Its {timed} tokens/s measurements are single timings with no spread recorded, so this report does not "
             f"rank the variants by speed." if timed else "")
    return (f"At {int(at['depth'].iloc[0])} layers and batch {int(at['batch'].iloc[0])}, activation memory against "
            f"the stored trunk: " + ", ".join(f"{v} {r:.2f}x" for v, r in others.items())
            + f"; the least: {least}." + speed)


def _verdict_list(verdicts: list[dict]) -> str:
    return ", ".join(f"{v.get('kind')} {v.get('measure')} {v.get('verdict')}" for v in verdicts)


def _thermo(folder: Path) -> str | None:
    """08: how the backward-error potentials' errors fall with the learning rate, and the LR-shock verdicts."""
    s = read_json(folder / "thermo_summary.json")
    every = list((s.get("slopes") or {}).values())
    slopes = [v for v in every if number(v) is not None]
    parts = []
    if slopes:   # the chapter records an exact case (nothing to fit) as null
        parts.append(f"the errors of the four derivations of the implicit potential fall with log-log slopes "
                     f"{min(slopes):.2f} to {max(slopes):.2f} in the learning rate ({len(slopes)} cases fitted, "
                     f"{len(every) - len(slopes)} exact to rounding)")
    shock = {k.split("/")[0]: v for k, v in (s.get("verdicts") or {}).items() if k.endswith("over_eta2")}
    if shock:
        parts.append("the learning-rate shock's normalised response reads " +
                     ", ".join(f"{k} {v}" for k, v in shock.items()))
    seeds = (s.get("over_seeds") or {}).get("verdicts") or []
    if seeds:
        agreed = [v for v in seeds if v.get("verdict") not in (None, UNDECIDED)]
        parts.append(f"over seeds ({(s.get('over_seeds') or {}).get('source', '?')}) {len(agreed)} of {len(seeds)} "
                     f"verdicts agree across every seed: {_verdict_list(seeds)}")
    text = "; ".join(parts) + "."
    return text[0].upper() + text[1:] if parts else None


def _adaptive(folder: Path) -> str | None:
    """09: in training, each variant's worst gradient error (1 - cosine) against the states it kept."""
    path = folder / "adaptive" / "training.csv"
    t = pd.read_csv(path)
    if not len(t) or not {"variant", "grad_cos_min", "kept_mean"} <= set(t.columns):
        return None
    each = "; ".join(f"{r.variant} {1 - float(r.grad_cos_min):.1e} with {format_number(float(r.kept_mean))} kept states"
                     for r in t.itertuples())
    out = f"In training ({int(t['steps'].max())} steps), worst gradient error (1 - cosine): {each}."
    pol = t.get("policy", pd.Series(dtype=str)).astype(str)
    ada, fix = t[pol.str.startswith("adaptive")], t[pol.str.startswith("fixed")]
    if len(ada) and len(fix):
        a, f = ada.iloc[0], fix.iloc[0]
        ea, ef = 1 - float(a["grad_cos_min"]), 1 - float(f["grad_cos_min"])
        fewer = "fewer" if a["kept_mean"] < f["kept_mean"] else "no fewer"
        err = "a smaller" if ea < ef else "an equal" if math.isclose(ea, ef) else "a larger"
        out += f" The adaptive policy kept {fewer} states than fixed spacing, for {err} worst gradient error."
    if "val_loss" in t and t["val_loss"].notna().sum() > 1:
        v = t["val_loss"].dropna()
        out += f" Validation losses span {v.min():.3f} to {v.max():.3f}."
    return out


def _trace_steps(path: Path) -> int | None:
    """The number of records in a trace file's JSON part (None when the file does not read as a trace)."""
    with open(path, "rb") as f:
        if f.read(len(TRACE_MAGIC)) != TRACE_MAGIC:
            return None
        (n,) = struct.unpack("<Q", f.read(8))
        if n > TRACE_DOC_LIMIT:
            return None
        doc = json.loads(f.read(n))
    return len(doc.get("records") or [])


def _trace(folder: Path) -> str | None:
    """10: the size of the fine-tuning trace, and per recorded step."""
    path = folder / "10_finetune_trace" / "trace.revtrace"
    size = path.stat().st_size
    try:
        steps = _trace_steps(path)
    except (OSError, ValueError, struct.error):
        steps = None
    per = f", {size / steps / MIB:,.2f} MiB per record over {steps} records" if steps else ""
    return f"The exact fine-tuning trace takes {size / MIB:,.1f} MiB on disk{per}."


# (chapter, notebook stem, title, files that mean it left results, reader)
CHAPTERS: list[tuple[str, str, str, tuple[str, ...], Callable[[Path], str | None] | None]] = [
    ("07b", "07b_where_reversible_stands", "where reversible training stands", ("landscape/measured.json",),
     _landscape),
    ("08", "08_training_irreversibility", "training irreversibility", ("thermo_summary.json",), _thermo),
    ("09", "09_adaptive_checkpointing", "adaptive checkpointing", ("adaptive/training.csv",), _adaptive),
    ("09b", "09b_adaptive_rank", "adaptive rank", (), None),
    ("10", "10_finetune_trace_rollback", "an exact fine-tuning trace, walked back",
     ("10_finetune_trace/trace.revtrace",), _trace),
]


def chapter_finding(folder: Path, chapter: str, stem: str, files: tuple[str, ...],
                    reader: Callable[[Path], str | None] | None) -> str:
    """One chapter's line: what its results files hold, or why there is nothing to read."""
    present = [f for f in files if (folder / f).is_file()]
    ran = (folder / "workbook" / f"{stem}.json").is_file()
    if not present:
        if not ran:
            return "not run."
        return ("ran (workbook record), but " + ("left none of " + ", ".join(f"`{f}`" for f in files)
                                                 if files else "keeps no results file")
                + " here: its findings are in its executed notebook.")
    try:
        text = reader(folder) if reader else None
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"`{present[0]}` is there but could not be read ({type(e).__name__}: {e})."
    return text or f"`{present[0]}` is there but holds nothing this report knows how to read."


def companion_findings(profile_dir: str | Path) -> list[str]:
    """One Markdown line per companion chapter (07b-10), from ``results/<profile>/``."""
    folder = Path(profile_dir)
    return [f"**{ch} · {title}**: {chapter_finding(folder, ch, stem, files, reader)}"
            for ch, stem, title, files, reader in CHAPTERS]
