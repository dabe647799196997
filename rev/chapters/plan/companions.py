"""The companion chapters' runs (07b, 08, 09, 09b, 10), counted from their own sizes (each chapter's `sizes` or
`SIZES`) as their notebooks make them. Where a chapter runs on the CPU whatever the device (09b: Python loops
through a matrix ODE), its cost is CPU seconds per step, measured; where it trains on the GPU, FLOPs as for the
main runs (`cost`).
"""
from __future__ import annotations

import torch

from ...core.model import GPTConfig, stored_twin
from ...base.profiles import Profile
from .cost import Work, gpt_work

# One training step of a 09b arm at the t4 sizes (m = 48, 8 x 8 images: 64 steps through the reverse map, 6
# layers, batch 16), its fidelity checks included: 9.2 s for 5 steps on one core of the 2-core machine CI runs on.
# The chapter runs on the CPU with one thread on every profile; other sizes scale with m^2 x steps of the sequence.
LOWRANK_STEP_S = 1.84
LOWRANK_STEP_AT = (48, 64)   # (m, sequence steps) the figure above was measured at


def companion_work(prof: Profile, machine) -> list[Work]:
    return [*_landscape(prof, machine), *_thermo(prof), *_adaptive(prof), *_lowrank(prof), *_trace(prof)]


def _landscape(prof: Profile, machine) -> list[Work]:
    """07b: one measured step per variant at every (depth, batch) point of its sweeps, and `rounds` timed steps at
    each point of the batch sweep."""
    from ..landscape.measure import chapter_sizes, variants_for

    sz = chapter_sizes(prof)
    device = torch.device("cuda" if machine.kind == "gpu" else "cpu")
    out = []
    for v in variants_for(device):
        points = [(d, b, 1) for d in sz.depths for b in sz.batches] + \
                 [(sz.sweep_depth, b, sz.rounds + 1) for b in sz.sweep_batches]
        for depth, batch, steps in points:
            cfg = GPTConfig(vocab_size=sz.vocab_size, seq_len=sz.seq_len, n_layer=depth, n_head=sz.n_head,
                            d_model=sz.d_model, trunk=v.trunk)
            out.append(gpt_work("07b_where_reversible_stands", f"landscape {v.name} {depth} layers batch {batch}",
                                "measure", cfg, batch, steps))
    return out


def _thermo(prof: Profile) -> list[Work]:
    """08: the learning-rate shock (`thermo.seeds`): per model kind and seed one run to the change, then one
    continuation per factor; the base-rate scan adds one such experiment per multiplier, at the first seed."""
    from ..thermo.seeds import FACTORS
    from ..thermo.shock import MODELS
    from ..thermo.sizes import chapter_sizes

    sz = chapter_sizes(prof).quick or chapter_sizes(prof).shock
    steps = sz.change_step + len(FACTORS) * (sz.total_steps - sz.change_step)
    out = []
    for kind in MODELS:
        n = sum(p.numel() for p in MODELS[kind](sz).parameters())
        layers = sz.n_layer if kind == "transformer" else 1
        scan = sz.transformer_scan if kind == "transformer" else sz.linear_scan
        runs = [f"seed {s}" for s in range(sz.seeds)] + [f"base rate x {m:.3g}" for m in scan]
        out += [Work("08_training_irreversibility", f"lr shock {kind}, {r}", "run", kind, layers, sz.batch_size, 1,
                     steps, 2 * sz.seq_len + 1, 6.0 * n) for r in runs]
    return out


def _adaptive(prof: Profile) -> list[Work]:
    """09: the stored twin of each trunk pretrained, five fine-tuning variants of reversible Euler, and the two
    policies again on two more data orders."""
    from ..adaptive.sizes import chapter_sizes, model_config

    sz = chapter_sizes(prof)
    nb = "09_adaptive_checkpointing"
    out = [gpt_work(nb, f"adaptive pretrain {stored_twin(t)}", "run",
                    model_config(sz, prof.vocab_size, stored_twin(t)), sz.batch, sz.pretrain_steps)
           for t in ("reveuler_rev", "midpoint_rev")]
    rev = model_config(sz, prof.vocab_size, "reveuler_rev")
    variants = ["fp32 fixed", "fp32 adaptive", "fp64 stream", "fixed-point stream", "fp32, no kept states"]
    out += [gpt_work(nb, f"adaptive fine-tune: {v}", "run", rev, sz.batch, sz.finetune_steps) for v in variants]
    out += [gpt_work(nb, f"adaptive fine-tune: {v}, data order {s}", "run", rev, sz.batch, sz.finetune_steps)
            for s in (1, 2) for v in variants[:2]]
    return out


def _lowrank(prof: Profile) -> list[Work]:
    """09b (CPU): per compared spacing, and once more with the rank rules alone, the controller arm on every seed;
    the fixed arm once per spacing and seed (cached across the comparisons); the calibration's two gradients per
    held-out seed and rank."""
    from ..lowrank.sizes import chapter_sizes

    sz = chapter_sizes(prof)
    per_step = LOWRANK_STEP_S * (sz.m / LOWRANK_STEP_AT[0]) ** 2 * sz.side ** 2 / LOWRANK_STEP_AT[1]
    ranks = len(set(range(sz.rank0, sz.rank_cap + 1, sz.rank_step)) | {sz.rank_cap})
    # the controller at each spacing and once more with the rank rules alone (at the first spacing)
    spacings = [f"spacing {c}" for c in sz.spacings]
    arms = {"controller": [*spacings, "rank rules alone"], "fixed": spacings}
    out = [Work("09b_adaptive_rank", f"lowrank {arm} arm, seed {s}, {how}", "run", "matrix ODE", sz.layers, sz.batch,
                1, sz.train_steps, sz.side ** 2, 0.0, cpu_step_s=per_step)
           for arm, hows in arms.items() for how in hows for s in range(sz.seeds)]
    out.append(Work("09b_adaptive_rank", "lowrank calibration", "measure", "matrix ODE", sz.layers, sz.batch, 1,
                    2 * sz.calib_seeds * ranks, sz.side ** 2, 0.0, cpu_step_s=per_step))
    return out


def _trace(prof: Profile) -> list[Work]:
    """10: the fine-tuning traced step by step, its second half trained again from the rollback, and the two
    rerun branches (3 steps at a raised rate, 1 huge step). The model is run 1's, reused (a smaller chapter model,
    pretrained here, where the sizes ask for one)."""
    from ..trace.pretrain import PRETRAIN_RUN
    from ..trace.sizes import chapter_sizes, model_profile

    sz, chapter = chapter_sizes(prof), model_profile(prof)
    cfg = chapter.model_config("residual")
    nb = "10_finetune_trace_rollback"
    out = []
    if chapter is not prof:   # the chapter's own smaller model: pretrained here, once
        tokens = max(prof.batch_size * prof.seq_len, int(prof.train_tokens * sz.pretrain_fraction))
        out.append(gpt_work(nb, PRETRAIN_RUN, "run", cfg, prof.batch_size, tokens // (prof.batch_size * prof.seq_len)))
    out.append(gpt_work(nb, "trace fine-tune", "run", cfg, prof.batch_size, sz.steps))
    out.append(gpt_work(nb, "trace fine-tune resumed at its middle", "run", cfg, prof.batch_size,
                        sz.steps - sz.steps // 2))
    out.append(gpt_work(nb, "trace rerun branches", "run", cfg, prof.batch_size, 4))
    return out
