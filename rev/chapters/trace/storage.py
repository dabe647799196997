"""Notebook 10 (fine-tune trace and rollback): what a trace costs. Bytes per step and per parameter, raw and
compressed, against a checkpoint per step (`storage_report`), what sets that size, array by array
(`size_breakdown`), and one step kept five ways (`compression_ablation`).
"""
from __future__ import annotations

import copy
import math
import struct
import zlib

import torch
from torch import nn

from .codec import bits_of, dtype_from, state_keys, pack_bits, zigzag_code, encode_exact
from .records import EXACT, Trace
from .walk import undo_step, rollback


def storage_report(trace: Trace) -> dict:
    """Bytes kept per step, raw and compressed, against a full checkpoint (weights + optimizer state) per step."""
    n_params = trace.header["fingerprint"]["n_params"]
    weight_bytes = sum(math.prod(s) * dtype_from(d).itemsize
                       for s, d in zip(trace.header["fingerprint"]["shapes"], trace.header["fingerprint"]["dtypes"]))
    # a checkpoint holds the optimizer state as it is at the end (Adam: two moments per parameter)
    state_bytes = max((r.meta.get("state_nbytes", 0) for r in trace.records), default=0)
    steps = max(1, len(trace.records))
    raw_w = sum(b.raw_nbytes for r in trace.records for b in r.params.values())
    cmp_w = sum(b.nbytes for r in trace.records for b in r.params.values())
    raw_s = sum(b.raw_nbytes for r in trace.records for b in r.state.values())
    cmp_s = sum(b.nbytes for r in trace.records for b in r.state.values())
    ckpt = weight_bytes + state_bytes
    return {
        "steps": len(trace.records), "n_params": n_params,
        "checkpoint_bytes_per_step": ckpt, "checkpoint_weights_bytes": weight_bytes,
        "weights_raw_per_step": raw_w / steps, "weights_compressed_per_step": cmp_w / steps,
        "state_raw_per_step": raw_s / steps, "state_compressed_per_step": cmp_s / steps,
        "total_raw_per_step": (raw_w + raw_s) / steps, "total_compressed_per_step": (cmp_w + cmp_s) / steps,
        "weights_bytes_per_param_raw": raw_w / steps / n_params,
        "weights_bytes_per_param_compressed": cmp_w / steps / n_params,
        "total_bytes_per_param_compressed": (cmp_w + cmp_s) / steps / n_params,
        "weights_compression_ratio": raw_w / cmp_w if cmp_w else float("nan"),
        "state_compression_ratio": raw_s / cmp_s if cmp_s else float("nan"),
        "fraction_of_checkpoint": (cmp_w + cmp_s) / steps / ckpt if ckpt else float("nan"),
    }


def _array_kind(key: str) -> str:
    # optimizer state keys are "<param name>::<state key>" (exp_avg, exp_avg_sq, step for AdamW)
    return f"optimizer state: {key.split('::', 1)[1]}" if "::" in key else key


def _n_sparse(blob: bytes | None) -> int:
    """How many entries a sparse correction holds (its header: position size, count, length of the positions)."""
    return struct.unpack_from("<BQQ", blob)[1] if blob else 0


def size_breakdown(trace: Trace) -> list[dict]:
    """What one step of `trace` keeps, array by array, averaged over the recorded steps: the weights' float
    differences, their sparse corrections, and each kind of optimizer state (AdamW: exp_avg, exp_avg_sq, step).
    Per kind: elements kept per step (for the corrections: the corrected elements), bytes per element as stored
    (raw) and as kept (compressed), and bytes per step. An exact step keeps every element of every array that
    changed, so a trace's size is its steps times these bytes per step."""
    steps = max(1, len(trace.records))
    rows: dict[str, dict] = {}

    def add(kind: str, numel: int, raw: int, kept: int) -> None:
        row = rows.setdefault(kind, {"array": kind, "elements": 0, "raw_bytes": 0, "kept_bytes": 0})
        row["elements"] += numel
        row["raw_bytes"] += raw
        row["kept_bytes"] += kept

    for rec in trace.records:
        for b in rec.params.values():
            corr = len(b.res_back or b"") + len(b.res_fwd or b"")
            itemsize = dtype_from(b.dtype).itemsize
            add("weights: float difference", b.numel, b.numel * itemsize, len(b.data))
            if b.res_back is not None or b.res_fwd is not None:
                add("weights: ulp corrections (sparse)", _n_sparse(b.res_back) + _n_sparse(b.res_fwd),
                    b.raw_nbytes - b.numel * itemsize, corr)
        for key, b in rec.state.items():
            add(_array_kind(key), b.numel, b.raw_nbytes, b.nbytes)
    out = []
    for row in rows.values():
        n = row["elements"] / steps
        out.append({"array": row["array"], "elements per step": n,
                    "raw bytes / element": row["raw_bytes"] / row["elements"] if row["elements"] else math.nan,
                    "kept bytes / element": row["kept_bytes"] / row["elements"] if row["elements"] else math.nan,
                    "raw bytes / step": row["raw_bytes"] / steps, "kept bytes / step": row["kept_bytes"] / steps})
    return out


def compression_ablation(model: nn.Module, trace: Trace, step: int | None = None, level: int = 6) -> list[dict]:
    """Bytes of one step's weight update kept five ways, raw, through zlib alone, and as byte planes through
    zlib (at `level`): the kept representation (float difference + corrections), the ulp difference and the
    XOR of bit patterns (both exact too), and the float difference alone or in bf16 (lossy).

    `model` must hold the weights at the trace's last step; it is not modified.
    """
    step = trace.final_step if step is None else step
    rec = trace.record(step)
    if rec is None or rec.kind != EXACT:
        raise ValueError(f"step {step} has no exact record to measure")
    work = copy.deepcopy(model)
    rollback(work, trace, step)
    params = dict(work.named_parameters())
    after = {n: params[n].detach().clone() for n in rec.params}
    with torch.no_grad():
        undo_step(params, rec, None)
    names = ["float difference + corrections", "ulp difference", "XOR of bit patterns",
             "float difference alone", "bf16 difference"]
    rows = {k: {"representation": k, "exact": k not in names[3:], "raw": 0, "zlib": 0, "byte planes + zlib": 0}
            for k in names}
    for n, a in after.items():
        b = params[n].detach()
        if not a.dtype.is_floating_point:
            continue
        kept = encode_exact(b, a, level)
        corrections = len(kept.res_back or b"") + len(kept.res_fwd or b"")
        codes = {"float difference + corrections": bits_of(a - b), "ulp difference": zigzag_code(state_keys(a) - state_keys(b)),
                 "XOR of bit patterns": bits_of(a) ^ bits_of(b), "float difference alone": bits_of(a - b),
                 "bf16 difference": bits_of((a.float() - b.float()).to(torch.bfloat16))}
        for name, values in codes.items():
            extra = corrections if name == names[0] else 0
            rows[name]["raw"] += kept.raw_nbytes if name == names[0] else values.nbytes
            rows[name]["zlib"] += len(zlib.compress(values.tobytes(), level)) + extra
            rows[name]["byte planes + zlib"] += len(pack_bits(values, level)) + extra
    return list(rows.values())
