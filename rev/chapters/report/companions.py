"""REPORT.md's section on the companion chapters (07b-10): what their results files in ``results/<profile>/`` hold.

The chapters live in `rev.chapters` (and 07b in `rev.chapters.landscape.measure`); this module imports none of their
code but 07b's memory formulas (`landscape.models`, arithmetic on a published geometry, labelled as a model). It reads
the files they leave behind -- ``landscape/measured.json`` (07b), ``thermo_summary.json`` (08), ``adaptive/
training.csv`` (09), ``lowrank/verdict.json`` (09b), ``10_finetune_trace/trace.revtrace`` (10) -- and says "not run" for a chapter with neither a
results file nor a workbook record (``workbook/<notebook>.json``, written when `python -m rev workbook` ran it).
"""
from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Callable

import pandas as pd

from ...base.files import read_json
from ..landscape import models as M
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
    timed = df["step_times"].dropna() if "step_times" in df else pd.Series(dtype=object)
    n = sorted({len(t) for t in timed if isinstance(t, list)})
    if not n and "tokens_per_s" in df and df["tokens_per_s"].notna().any():
        n = [1]   # a speed without its step times: one timing
    each = f"{n[0]}" if len(n) == 1 else f"{n[0]} to {n[-1]}" if n else "0"
    speed = (f" Speeds not ranked: they rest on {each} timed step{'s' if n and n[-1] > 1 else ''} per variant."
             if n else "")
    act = {k: M.activation_bytes(M.FRONTIER, k, M.FRONTIER_PLAN) / M.GIB for k in ("ckpt_block", "reversible")}
    frontier = (f" Modelled for {M.FRONTIER.name} on {M.FRONTIER_PLAN.describe()}: reversible saves "
                f"{act['ckpt_block'] - act['reversible']:.2f} GiB per GPU over per-block checkpointing, which "
                f"recomputes as much.")
    return (f"Measured at {int(at['depth'].iloc[0])} layers, batch {int(at['batch'].iloc[0])}, activations against "
            f"the stored trunk's: " + ", ".join(f"{v} {r:.2f}x" for v, r in others.items())
            + f" (least: {least})." + frontier + speed)


# the shock's measures in words: which is the paper's, which this chapter's
_MEASURES = {"update": "magnitude", "direction": "direction", "grad_norm": "gradient norm",
             "variance": "variance"}
_MEASURES_NAMED = " (magnitude: the paper's measure; variance: this chapter's, detrended |dθ|/η²)"


def _verdict_list(verdicts: list[dict]) -> str:
    """The shock's verdicts over seeds, one clause per model: which measures read ordinary, anomalous, undecided."""
    clauses = []
    for kind in dict.fromkeys(v.get("kind") for v in verdicts):
        by = {}
        for v in (v for v in verdicts if v.get("kind") == kind):
            by.setdefault(v.get("verdict") or UNDECIDED, []).append(_MEASURES.get(v.get("measure"), v.get("measure")))
        clauses.append(f"{kind} " + ", ".join(f"{verdict} on {' and '.join(ms)}"
                                                      for verdict, ms in by.items()))
    return "; ".join(clauses) + _MEASURES_NAMED


def _thermo(folder: Path) -> str | None:
    """08: how the backward-error potentials' errors fall with the learning rate, and the LR-shock verdicts."""
    s = read_json(folder / "thermo_summary.json")
    every = list((s.get("slopes") or {}).values())
    slopes = [v for v in every if number(v) is not None]
    parts = []
    if slopes:   # the chapter records an exact case (nothing to fit) as null
        parts.append(f"the four derivations of the implicit potential agree, their errors falling as the learning "
                     f"rate to the power {min(slopes):.2f}-{max(slopes):.2f} ({len(slopes)} fits, "
                     f"{len(every) - len(slopes)} exact to rounding)")
    shock = {k.split("/")[0]: v for k, v in (s.get("verdicts") or {}).items() if k.endswith("over_eta2")}
    seeds = (s.get("over_seeds") or {}).get("verdicts") or []
    if shock and not seeds:   # the one-seed reading, only where no verdict over seeds replaces it
        parts.append("the learning-rate shock's normalised response reads " +
                     ", ".join(f"{k} {v}" for k, v in shock.items()))
    if seeds:
        agreed = [v for v in seeds if v.get("verdict") not in (None, UNDECIDED)]
        n = max((len(str(v.get("seeds", "")).split()) for v in seeds), default=0)
        parts.append(f"after a x5 learning-rate shock ({n} seeds, {(s.get('over_seeds') or {}).get('source', '?')}"
                     f"; {len(agreed)} of {len(seeds)} verdicts unanimous): {_verdict_list(seeds)}")
    text = "; ".join(parts) + "."
    return text[0].upper() + text[1:] if parts else None


def _adaptive(folder: Path) -> str | None:
    """09: in training, the adaptive policy against fixed spacing: worst gradient error (1 - cosine) and the states
    each kept; the other variants (no kept states, the wider streams) are in the notebook's table."""
    path = folder / "adaptive" / "training.csv"
    t = pd.read_csv(path)
    if not len(t) or not {"variant", "grad_cos_min", "kept_mean"} <= set(t.columns):
        return None
    pol = t.get("policy", pd.Series(dtype=str)).astype(str)
    ada, fix = t[pol.str.startswith("adaptive")], t[pol.str.startswith("fixed")]
    if not len(ada) or not len(fix):
        each = "; ".join(f"{r.variant} {1 - float(r.grad_cos_min):.1e}" for r in t.itertuples())
        return f"In training ({int(t['steps'].max())} steps), worst gradient error (1 - cosine): {each}."
    a, f = ada.iloc[0], fix.iloc[0]
    ea, ef = 1 - float(a["grad_cos_min"]), 1 - float(f["grad_cos_min"])
    fewer = "fewer" if a["kept_mean"] < f["kept_mean"] else "no fewer"
    err = "a smaller" if ea < ef else "an equal" if math.isclose(ea, ef) else "a larger"
    return (f"In training ({int(t['steps'].max())} steps) the adaptive policy kept {fewer} states than fixed spacing "
            f"({format_number(float(a['kept_mean']))} against {format_number(float(f['kept_mean']))}), for {err} "
            f"worst gradient error (1 - cosine {ea:.1e} against {ef:.1e}).")


def _lowrank(folder: Path) -> str | None:
    """09b: the controller against fixed rank and spacing, paired over seeds (`lowrank.save_verdict`'s file)."""
    v = read_json(folder / "lowrank" / "verdict.json")
    ties = v["seeds"] - v["wins"] - v["losses"]
    return (f"Over {v['seeds']} paired seeds the rank controller's gradient is closer to the dense one on {v['wins']}, "
            f"farther on {v['losses']}, tied on {ties} (exact sign-flip p = {v['p']:.3f}); mean rank {v['rank_c']:.1f} "
            f"against {v['rank_f']:.1f} fixed, accuracy {v['acc_c']:.3f} against {v['acc_f']:.3f} "
            f"(p = {v['acc_p']:.3f})."
            + (" The fixed arm sat at the controller's own rank cap, so the controller could tie or lose but not win."
               if v.get("fixed_at_cap") else "") + _success(v))


def _success(v: dict) -> str:
    """The idea's own success criterion, when 09b recorded it: met, or which of its three parts failed."""
    s = v.get("success")
    if not s:
        return ""
    failed = [what for key, what in (("lower_rank", "a lower mean rank"), ("non_inferior", "non-inferior accuracy"),
                                     ("cosine_ok", "gradient cosines above 0.98")) if not s[key]]
    return (" Its success criterion (lower mean rank at similar accuracy): "
            + ("met." if s["met"] else f"not met, for want of {' and '.join(failed)}."))


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
    ("09b", "09b_adaptive_rank", "adaptive rank", ("lowrank/verdict.json",), _lowrank),
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
