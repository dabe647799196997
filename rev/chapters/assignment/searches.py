"""Notebook 06 (runs 1b, 3, 3b, 4): the max-batch and depth searches under one memory budget, the loss-head
ablation, and the trunk dicts those runs train with. Merges into `results/<profile>/maxbatch.json`.
"""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

from ...core.loss import LOSS_HEADS
from ...base.device import pick_device
from ...base.files import read_json, write_json
from ...measure.ledger import sequence_ledger
from ...measure.maxbatch import MaxDepth, find_max_batch, find_max_depth, measure_memory_line
from ...measure.probe import cuda_budget
from ...base.profiles import ProfileLike, get_profile
from ..shared.runs import profile_dir
from ...base.units import MIB


# --- max batch and depth under one memory budget ---------------------------------------------------------

def _merge_maxbatch(profile: ProfileLike, results: str | Path, entries: dict) -> dict:
    path = profile_dir(results, profile) / "maxbatch.json"
    out = (read_json(path) if path.exists() else {}) | entries
    write_json(path, out)
    return out


def memory_budget(profile: ProfileLike, device: str = "auto") -> int:
    """The byte budget the max-batch searches use: the profile's CPU budget on a CPU; on CUDA the profile's GPU
    budget, or 90% of what the GPU can give (`cuda_budget`) when that is less or the profile sets none."""
    dev, prof = pick_device(device), get_profile(profile)
    return prof.gpu_budget(cuda_budget(dev)) if dev.type == "cuda" else prof.cpu_mem_budget


def line_batches(profile: ProfileLike) -> tuple[int, int]:
    """The two batches a memory line is measured at: the profile's batch (at least two batch slices, so a
    reversible trunk's slice-sized working set is already the fixed cost it stays) and twice that. Below a slice
    the whole batch's working set would still grow with it and the slope would overstate what a sequence costs."""
    prof = get_profile(profile)
    b1 = max(prof.batch_size, 2 * prof.model_config("reveuler_rev").sequences_per_slice)
    return b1, 2 * b1


_LINES: dict[str, object] = {}


def _memory_line(cfg, b1: int, b2: int, device: str):
    """`measure_memory_line`, measured once per model, batches and device in this kernel: the prediction (06.2)
    and the ledger read the same two steps."""
    key = json.dumps([cfg.to_dict(), b1, b2, device], sort_keys=True)
    if key not in _LINES:
        _LINES[key] = measure_memory_line(cfg, b1, b2, device)
    return _LINES[key]


def predict_max_batches(profile: ProfileLike, trunks: list[dict], budget_bytes: int, device: str = "auto"):
    """Before any search: each trunk's step peak measured at two batches (`line_batches`), the straight line
    through them, and the max batch that line predicts."""
    import pandas as pd

    prof = get_profile(profile)
    b1, b2 = line_batches(prof)
    rows = {}
    for t in trunks:
        cfg = prof.model_config(t["trunk"], None, t.get("h"), t.get("stream", "fp32"))
        line = _memory_line(cfg, b1, b2, device)
        rows[t["trunk"]] = {"static_MiB": line.static_bytes / MIB, "MiB_per_sequence": line.bytes_per_sequence / MIB,
                            "predicted_max_batch": line.max_batch(budget_bytes)}
    return pd.DataFrame(rows).T


def memory_ledgers(profile: ProfileLike, trunks: list[dict], device: str = "auto"):
    """Where each trunk's memory per sequence goes (`rev.measure.ledger`): its step measured at two batches large
    enough that every recomputing trunk runs more than one batch slice, beside the ledger's model of the parts.
    One row per trunk, MiB per sequence."""
    import pandas as pd

    prof = get_profile(profile)
    rows = {}
    for t in trunks:
        cfg = prof.model_config(t["trunk"], None, t.get("h"), t.get("stream", "fp32"))
        b1, b2 = line_batches(prof)
        line = _memory_line(cfg, b1, b2, device)
        led = sequence_ledger(cfg, line.bytes_per_sequence)
        rows[t.get("key", t["trunk"])] = led.as_row() | {"trunk": t["trunk"], "stream": cfg.stream, "peak moment": led.moment,
                                                   "batches": f"{b1}, {b2}"}
    return pd.DataFrame(rows).T


def max_batch_table(predicted, mb: dict):
    """The searches beside the lines' predictions: max batch predicted and found, the memory per sequence from the
    two largest fitting probes of each search (where activations dominate most), and how a step at the batch found
    slices it (`rev.measure.slicing`)."""
    import pandas as pd

    per_seq = lambda r: math.nan if r.get("bytes_per_sequence") is None else r["bytes_per_sequence"] / MIB  # noqa: E731
    sliced = lambda r: (r.get("slicing") or {}).get("described", "")  # noqa: E731  (a search saved before slicing plans)
    return pd.DataFrame({t: {"predicted_max_batch": predicted.loc[t, "predicted_max_batch"], "found": mb[t]["batch"],
                             "MiB_per_sequence (line)": predicted.loc[t, "MiB_per_sequence"],
                             "MiB_per_sequence (search)": per_seq(mb[t]),
                             "each step at that batch": sliced(mb[t])} for t in predicted.index}).T


def search_max_batches(profile: ProfileLike, trunks: list[dict], results: str | Path = "results", device: str = "auto",
                       budget_bytes: int | None = None, progress: bool = True) -> dict:
    """Search the max batch of each trunk under the same budget (default `memory_budget`). Merges into
    maxbatch.json, keyed by trunk (or by `search_key` for a trunk on its other stream), and returns its
    contents."""
    prof = get_profile(profile)
    budget_bytes = memory_budget(profile, device) if budget_bytes is None else budget_bytes
    found = {}
    for t in trunks:
        cfg = prof.model_config(t["trunk"], None, t.get("h"), t.get("stream", "fp32"))
        res = find_max_batch(cfg, budget_bytes, device, start=prof.batch_size, progress=progress,
                             max_probes=prof.search_probes)
        found[t.get("key", t["trunk"])] = res.to_dict() | {"stream": cfg.stream}
        found["budget_bytes"] = res.budget_bytes
    return _merge_maxbatch(profile, results, found)



def other_stream(chosen: dict) -> dict:
    """The chosen trunk on the stream run 3b compares it with: fp64 when it runs on fp32, else fp32; `key`
    names its max-batch search (the chosen trunk's own search is keyed by the trunk alone)."""
    stream = "fp64" if chosen.get("stream", "fp32") == "fp32" else "fp32"
    return {"trunk": chosen["trunk"], "h": chosen["h"], "stream": stream, "key": search_key(chosen["trunk"], stream)}


def search_key(trunk: str, stream: str) -> str:
    return f"{trunk}_{stream}"


def train_kwargs(trunk: dict) -> dict:
    """A trunk dict (`chosen`, `other_stream(...)`) as `train_run` keyword arguments."""
    return {k: trunk[k] for k in ("trunk", "h", "stream") if k in trunk}


# --- the loss-head ablation -----------------------------------------------------------------------------------

LOSS_HEADS_FILE = "loss_heads.json"


def loss_head_ablation(profile: ProfileLike, trunks: list[dict], results: str | Path = "results", device: str = "auto",
                       budget_bytes: int | None = None, progress: bool = True) -> dict:
    """Max batch of each trunk with each loss head (`rev.core.loss.LOSS_HEADS`) under one budget. The default
    (fused) head's searches are reused from maxbatch.json when they ran under the same budget. Writes
    loss_heads.json: {"budget_bytes", "rows": [{"trunk", "loss_head", "batch"}]}."""
    prof = get_profile(profile)
    budget_bytes = memory_budget(profile, device) if budget_bytes is None else budget_bytes
    path = profile_dir(results, profile) / "maxbatch.json"
    done = read_json(path) if path.exists() else {}
    rows = []
    for t in trunks:
        cfg = prof.model_config(t["trunk"], None, t.get("h"), t.get("stream", "fp32"))
        for head in LOSS_HEADS:
            old = done.get(t["trunk"]) if head == cfg.loss_head else None
            if old and old.get("budget_bytes") == budget_bytes and old.get("stream", "fp32") == cfg.stream:
                batch = old["batch"]
            else:
                batch = find_max_batch(dataclasses.replace(cfg, loss_head=head), budget_bytes, device,
                                       start=prof.batch_size, progress=progress, max_probes=prof.search_probes).batch
            rows.append({"trunk": t["trunk"], "loss_head": head, "batch": batch})
    out = {"budget_bytes": budget_bytes, "rows": rows}
    write_json(profile_dir(results, profile) / LOSS_HEADS_FILE, out)
    return out


def search_max_depth(profile: ProfileLike, trunk: dict, batch: int, budget_bytes: int, max_layers: int,
                     device: str = "auto", results: str | Path = "results", progress: bool = True) -> MaxDepth:
    """Deepest `trunk` (up to `max_layers`) whose training step at `batch` fits `budget_bytes`, each probe a
    measured real step. Merged into maxbatch.json as 'deep'."""
    prof = get_profile(profile)
    cfg = prof.model_config(trunk["trunk"], None, trunk.get("h"), trunk.get("stream", "fp32"))
    res = find_max_depth(cfg, batch, budget_bytes, max_layers, device, progress=progress,
                         max_probes=prof.search_probes)
    _merge_maxbatch(profile, results, {"deep": res.to_dict()})
    return res


