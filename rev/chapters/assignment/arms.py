"""Notebook 05: run 2 against run 1 in three arms, so each difference has one cause.

Run 2 changes two things at once against run 1: the *architecture* (the screened integrator, e.g. leapfrog at
h = 0.5, in place of the residual trunk) and the *backward* (rebuilt from the output instead of stored). The arm
between them is the chosen trunk's stored twin (`rev.core.model.stored_twin`): the same integrator under ordinary
autograd. Then

- architecture effect = stored twin - residual, and
- reversibility effect = reversible - stored twin.

Memory and speed of all three come from one interleaved bench (`rev.measure.bench`, side by side, same batch).
The loss of the stored twin is measured on run 2's trained weights: the twin computes the same function, so its
validation loss there is run 2's to rounding, and its gradients there say how far a step of each would differ
(`paired_twin`). Training the twin for the whole budget would add only the slow drift those per-step
differences could build up; what is said here is what was measured.
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pandas as pd
import torch

from ...core.model import GPT, stored_twin
from ...training.loop import TrainConfig, ensure_data, evaluate, plan_run
from ...training.checkpoint import load_model
from ...base.files import write_json
from ...base.profiles import ProfileLike
from ..shared.results import BENCH_FILE
from ..shared.runs import profile_dir
from ...base.units import MIB

GRAD_AGREE = 1e-3   # gradients closer than this (relative) make the same step, to the rounding of a few steps


def paired_twin(run: dict, data_dir: str | Path) -> dict:
    """On the trained weights of the reversible run `run`: the validation loss of the run's trunk and of its
    stored twin (the batches of the run's evaluations), and on one training batch the twin's gradients against
    the reversible trunk's (relative error of the whole gradient vector, and cosine)."""
    cfg = TrainConfig(**{k: v for k, v in run["config"].items() if k in TrainConfig.__dataclass_fields__}
                      | {"data_dir": data_dir, "progress": False})
    plan = plan_run(cfg)
    data = ensure_data(plan.profile, Path(data_dir), progress=False)
    rev = load_model(run["config"]["out_dir"])
    twin = GPT(dataclasses.replace(rev.cfg, trunk=stored_twin(rev.cfg.trunk)))
    twin.load_state_dict(rev.state_dict())
    device = torch.device("cpu")
    losses = {name: evaluate(m, data, plan, device, None) for name, m in (("reversible", rev), ("stored", twin))}
    x, y = data.get_batch("train", plan.batch_size, plan.model.seq_len, torch.Generator().manual_seed(cfg.seed))
    grads = []
    for m in (rev, twin):
        m.zero_grad(set_to_none=True)
        m(x, y).backward()
        grads.append(torch.cat([p.grad.flatten().double() for p in m.parameters() if p.grad is not None]))
    g_rev, g_twin = grads
    return {"trunk": rev.cfg.trunk, "twin": twin.cfg.trunk, "val_loss_reversible": losses["reversible"],
            "val_loss_stored": losses["stored"],
            "grad_rel_error": float((g_rev - g_twin).norm() / g_twin.norm()),
            "grad_cosine": float(g_rev @ g_twin / (g_rev.norm() * g_twin.norm()))}


def bench_row(bench: dict, trunk: str, whole: bool = False) -> dict | None:
    """`trunk`'s row of a bench: the first (run 2's own slicing: "auto"), or with `whole` the one that ran the
    batch in one piece (`batch_slice` 0), as a stored trunk always does, when the bench timed it; else the first."""
    rows = [r for r in bench.get("runs", []) if r["trunk"] == trunk]
    if whole:
        rows = [r for r in rows if r.get("batch_slice") == 0] or rows
    return rows[0] if rows else None


def _slicing(row: dict, batch: int | None = None) -> str:
    """How a bench row ran its batch: whole (no slice, or a slice at least the batch), or in slices of so many."""
    rows = row.get("batch_slice")
    whole = not rows or (batch is not None and rows >= batch)
    return "whole batch" if whole else f"slices of {rows}"


def three_arms(run1: dict, run2: dict, bench: dict, twin: dict) -> pd.DataFrame:
    """One row per arm (residual = run 1, the stored twin, the reversible trunk = run 2 in its own slicing, and,
    where the bench timed it, the reversible trunk on the whole batch as the twin runs it): what it changes, its
    validation loss (run 1 and run 2 as trained; the twin on run 2's weights), and from the interleaved bench its
    step's peak and activation memory and its tokens/s (median step)."""
    arms = [("residual (run 1)", bench_row(bench, run1["trunk"]), "stored", run1["final_val_loss"], "trained"),
            (f"stored twin ({twin['twin']})", bench_row(bench, twin["twin"]), "stored", twin["val_loss_stored"],
             "on run 2's weights")]
    sliced, whole = bench_row(bench, twin["trunk"]), bench_row(bench, twin["trunk"], whole=True)
    batch = bench.get("batch")
    arms.append((f"reversible (run 2, {twin['trunk']}), {_slicing(sliced or {}, batch)}", sliced, "rebuilt",
                 run2["final_val_loss"], "trained"))
    if whole is not None and whole is not sliced and _slicing(sliced or {}, batch) != _slicing(whole, batch):
        arms.append((f"reversible, {_slicing(whole, batch)}", whole, "rebuilt", run2["final_val_loss"], "as run 2"))
    rows = []
    for arm, b, backward, val, how in arms:
        b = b or {}
        rows.append({"arm": arm, "backward": backward, "val loss": val, "loss measured": how,
                     "peak MiB": b.get("peak_bytes", math.nan) / MIB, "activations MiB":
                     b.get("activation_bytes", math.nan) / MIB, "tokens/s": b.get("tokens_per_s", math.nan)})
    return pd.DataFrame(rows).set_index("arm")


def save_bench(profile: ProfileLike, results: str | Path, bench: dict) -> Path:
    """Keep what REPORT.md's throughput line reads of the interleaved bench (``results/<profile>/`` `BENCH_FILE`):
    the batch and sequence length, and per trunk its slicing, its step seconds round by round, its peak and its
    activation bytes."""
    rows = [{k: r.get(k) for k in ("trunk", "head", "batch_slice", "step_times", "peak_bytes", "activation_bytes")}
            for r in bench.get("runs", [])]
    path = profile_dir(results, profile) / BENCH_FILE
    write_json(path, {"batch": bench.get("batch"), "seq_len": (bench.get("geometry") or {}).get("seq_len"),
                      "rounds": bench.get("steps"), "runs": rows})
    return path
