"""Notebook 07b (where reversible training stands): reversible trunks measured side by side with what
practitioners use instead, their memory models checked against the measurements, and the verdict in numbers.

Measured here, one training step at a time (`rev.measure.probe.make_training_step`, peaks from
`rev.measure.memory.training_step_memory`), every variant at the same point before the next point:
  stored          the residual trunk, activations kept by autograd
  ckpt_attention  selective checkpointing: each block's attention sub-layer under torch.utils.checkpoint
  ckpt_block      per-block checkpointing (the `residual_ckpt` trunk)
  midpoint_rev, reveuler_rev   the two memory-free reversible trunks
  offload         stored, with saved tensors moved to host memory (`torch.autograd.graph.save_on_cpu`): CUDA only,
                  since on a CPU the activations already live in host memory and moving them saves nothing
Activation bytes per token come from the peaks at two batch sizes (their difference over the difference in
tokens), large enough that activations, not the optimizer step, set the peak; bytes per layer from two depths.
Everything runs in fp32, the precision the memory models of `models` count in by default.
"""
from __future__ import annotations

import contextlib
import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint
from ...base.progress import tqdm
from ..shared.palette import BACKWARDS, variant_colour

from ...core.model import GPTConfig
from ...measure.probe import make_training_step
from ...base.device import single_thread
from ...measure.memory import training_step_memory
from ...base.profiles import ProfileLike, get_profile
from . import models as M
from ..shared.runs import round_ratio
from ..shared.verdicts import Spread
from ...base.units import MIB


@dataclass(frozen=True)
class Sizes:
    """The measured geometry: narrow and with a small vocabulary, so that the trunk's activations, not the
    weights or the logits, set the peak even at modest batches."""

    d_model: int
    n_head: int
    seq_len: int
    vocab_size: int
    depths: tuple[int, ...]          # the depth sweep, at both `batches`
    batches: tuple[int, int]         # two batches whose peaks give activation bytes per token
    sweep_batches: tuple[int, ...]   # the batch sweep, at depth `sweep_depth`
    sweep_depth: int
    rounds: int                      # timed steps per variant at each timed point (interleaved)

    def geometry(self, depth: int, batch: int) -> M.Geometry:
        return M.Geometry(f"measured, {depth} layers", depth, self.d_model, self.n_head, self.seq_len, batch,
                          self.vocab_size)


SIZES: dict[str, Sizes] = {
    "smoke": Sizes(16, 2, 32, 64, depths=(3, 5), batches=(8, 16), sweep_batches=(8, 16), sweep_depth=5, rounds=1),
    "cpu": Sizes(32, 2, 64, 64, depths=(1, 2, 4, 8, 12), batches=(32, 64), sweep_batches=(16, 32, 64, 128),
                 sweep_depth=4, rounds=3),
    "t4": Sizes(128, 4, 256, 256, depths=(2, 4, 8, 16, 32), batches=(16, 32), sweep_batches=(8, 16, 32, 64),
                sweep_depth=8, rounds=5),
}
SIZES["full"] = SIZES["t4"]


def chapter_sizes(profile: ProfileLike) -> Sizes:
    """Notebook 07b's sizes for a profile (a name, `auto`, or a `Profile`)."""
    return SIZES[get_profile(profile).name]


@dataclass(frozen=True)
class Variant:
    name: str
    trunk: str
    technique: str     # the memory model in `models` that describes it
    label: str


VARIANTS = (Variant("stored", "residual", "stored", "stored (residual)"),
            Variant("ckpt_attention", "residual", "ckpt_attention", "selective: attention checkpointed"),
            Variant("ckpt_block", "residual_ckpt", "ckpt_block", "per-block checkpointing"),
            Variant("midpoint_rev", "midpoint_rev", "reversible", "reversible midpoint"),
            Variant("reveuler_rev", "reveuler_rev", "reversible", "reversible Euler"),
            Variant("offload", "residual", "offload", "offload (save_on_cpu)"))
BY_NAME = {v.name: v for v in VARIANTS}


def variants_for(device: torch.device) -> list[Variant]:
    """Offload only where there is a device memory to offload from."""
    return [v for v in VARIANTS if v.name != "offload" or device.type == "cuda"]


class CheckpointedAttention(nn.Module):
    """An attention sub-layer whose activations backward recomputes: only its input is kept."""

    def __init__(self, attn: nn.Module):
        super().__init__()
        self.inner = attn

    def forward(self, x: Tensor) -> Tensor:
        if not torch.is_grad_enabled():
            return self.inner(x)
        return checkpoint(self.inner, x, use_reentrant=False)


def checkpoint_attention(model: nn.Module) -> nn.Module:
    """Wrap every block's attention in `CheckpointedAttention` (same parameters, so the optimizer is unchanged)."""
    for block in model.trunk.blocks:
        if not isinstance(block.attn, CheckpointedAttention):
            block.attn = CheckpointedAttention(block.attn)
    return model


def build(variant: Variant, sizes: Sizes, depth: int, batch: int, device: torch.device):
    """(model, optimizer, step) for one variant: one real fp32 training step on a fixed random batch."""
    cfg = GPTConfig(vocab_size=sizes.vocab_size, seq_len=sizes.seq_len, n_layer=depth, n_head=sizes.n_head,
                    d_model=sizes.d_model, trunk=variant.trunk)
    model, opt, step = make_training_step(cfg, batch, device, None)
    if variant.name == "ckpt_attention":
        checkpoint_attention(model)
    if variant.name == "offload":
        inner, pin = step, device.type == "cuda"

        def step() -> None:
            with torch.autograd.graph.save_on_cpu(pin_memory=pin):
                inner()
    return model, opt, step


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_point(variants: list[Variant], sizes: Sizes, depth: int, batch: int, device: torch.device,
                  rounds: int = 0) -> list[dict]:
    """Peak memory of every variant at one (depth, batch), then `rounds` timed steps of each, interleaved so a
    slow moment of a shared machine hits every variant alike; tokens/s from the median step, and the steps' seconds
    (`step_times`, round by round) for the spread of a speed ratio."""
    built, rows = {}, []
    for v in variants:
        model, opt, step = build(v, sizes, depth, batch, device)
        step()  # optimizer state exists from here on, as in training
        mem = training_step_memory(model, opt, step, device)
        built[v.name] = (model, opt, step)
        rows.append(dict(variant=v.name, depth=depth, batch=batch, peak_bytes=mem.peak_bytes,
                         static_bytes=mem.static_bytes, activation_bytes=mem.activation_bytes, tokens_per_s=None,
                         step_times=None))
    times: dict[str, list[float]] = {v.name: [] for v in variants}
    for _ in range(rounds):
        for v in variants:
            _sync(device)
            t0 = time.perf_counter()
            built[v.name][2]()
            _sync(device)
            times[v.name].append(time.perf_counter() - t0)
    if rounds:
        for r in rows:
            r["tokens_per_s"] = batch * sizes.seq_len / statistics.median(times[r["variant"]])
            r["step_times"] = times[r["variant"]]
    return rows


def sweep(sizes: Sizes, device: str | torch.device = "cpu", progress: bool = True) -> list[dict]:
    """The depth sweep (memory at both batches, time at the larger) and the batch sweep (memory and time)."""
    device = torch.device(device)
    variants = variants_for(device)
    points = {(d, b): b == sizes.batches[1] for d in sizes.depths for b in sizes.batches}
    points.update({(sizes.sweep_depth, b): True for b in sizes.sweep_batches})
    rows = []
    with single_thread() if device.type == "cpu" else contextlib.nullcontext():
        for (depth, batch), timed in tqdm(sorted(points.items()), desc="points", disable=not progress):
            rows += measure_point(variants, sizes, depth, batch, device, sizes.rounds if timed else 0)
    return rows


# --- from peaks to bytes per token and per layer ------------------------------------------------------------

def _peak(rows: list[dict], variant: str, depth: int, batch: int) -> int:
    return next(r["peak_bytes"] for r in rows if (r["variant"], r["depth"], r["batch"]) == (variant, depth, batch))


def per_token(rows: list[dict], sizes: Sizes) -> dict[str, dict[int, float]]:
    """Activation bytes per token, {variant: {depth: bytes}}: the peak difference between the two batches over
    the difference in tokens (weights, optimizer state and anything batch-independent cancel)."""
    b1, b2 = sizes.batches
    out: dict[str, dict[int, float]] = {}
    for r in rows:
        if r["batch"] == b2 and r["depth"] in sizes.depths:
            v, d = r["variant"], r["depth"]
            out.setdefault(v, {})[d] = (r["peak_bytes"] - _peak(rows, v, d, b1)) / ((b2 - b1) * sizes.seq_len)
    return out


def per_layer(tokens: dict[str, dict[int, float]]) -> dict[str, tuple[float, float]]:
    """{variant: (bytes per token per layer, bytes per token at depth 0)} from the two deepest depths, past the
    first layers where a reversible trunk's starter step still differs."""
    out = {}
    for v, by_depth in tokens.items():
        d1, d2 = sorted(by_depth)[-2:]
        slope = (by_depth[d2] - by_depth[d1]) / (d2 - d1)
        out[v] = (slope, by_depth[d2] - slope * d2)
    return out


def model_check(fits: dict[str, tuple[float, float]], sizes: Sizes, rel_tol: float = 0.05,
                stored_tol: float = 0.01, working_tol: float = 0.5) -> list[dict]:
    """Each measured variant's bytes per token per layer against its memory model: within `rel_tol` of the model
    plus `stored_tol` of a stored layer (so a model of zero has a tolerance too). The working set (what a
    variant holds once, over what the stored trunk holds once) is a coarser model, "about one stored layer":
    within `working_tol` of one stored layer (reversible Euler rebuilds attention and MLP one at a time and
    needs less, midpoint rebuilds the whole block next to its two-stream state and needs more)."""
    g = sizes.geometry(max(sizes.depths), sizes.batches[1])
    stored = M.layer_bytes(g, "stored")
    rows = []
    for name, (slope, intercept) in fits.items():
        tech = BY_NAME[name].technique
        model = M.layer_bytes(g, tech)
        working = intercept - fits["stored"][1]
        model_working = M.working_set_bytes(g, tech)
        rows.append(dict(variant=name, technique=tech, model_per_layer=model, measured_per_layer=slope,
                         per_layer_ok=abs(slope - model) <= rel_tol * model + stored_tol * stored,
                         model_working_set=model_working, measured_working_set=working,
                         working_set_ok=abs(working - model_working) <= working_tol * stored))
    return rows


def crossover_depth(tokens: dict[str, dict[int, float]], rev: str, other: str = "ckpt_block") -> int | None:
    """The first measured depth from which `rev` holds fewer activation bytes than `other` at every deeper depth
    (None if it never does within the sweep)."""
    depths = sorted(tokens[rev])
    for i, d in enumerate(depths):
        if all(tokens[rev][e] < tokens[other][e] for e in depths[i:]):
            return d
    return None


def predicted_crossover(fits: dict[str, tuple[float, float]], rev: str, other: str = "ckpt_block") -> float:
    """Where the straight lines of the two fits cross: (fixed cost difference) / (per-layer cost difference)."""
    (s_rev, c_rev), (s_oth, c_oth) = fits[rev], fits[other]
    return (c_rev - c_oth) / (s_oth - s_rev) if s_oth != s_rev else float("inf")


# --- figures -------------------------------------------------------------------------------------------------

def measured_figure(rows: list[dict], sizes: Sizes):
    import matplotlib.pyplot as plt

    tokens = per_token(rows, sizes)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    b2 = sizes.batches[1]
    for v in dict.fromkeys(r["variant"] for r in rows):
        label, c = BY_NAME[v].label, variant_colour(v)
        ds = sorted(tokens[v])
        axes[0, 0].plot(ds, [tokens[v][d] / 1024 for d in ds], "o-", color=c, label=label)
        at = sorted((r["depth"], r["tokens_per_s"]) for r in rows
                    if r["variant"] == v and r["batch"] == b2 and r["depth"] in sizes.depths)
        axes[0, 1].plot(*zip(*at), "o-", color=c, label=label)
        sw = sorted((r["batch"], r["peak_bytes"] / MIB, r["tokens_per_s"]) for r in rows
                    if r["variant"] == v and r["depth"] == sizes.sweep_depth and r["batch"] in sizes.sweep_batches)
        axes[1, 0].plot([s[0] for s in sw], [s[1] for s in sw], "o-", color=c, label=label)
        axes[1, 1].plot([s[0] for s in sw], [s[2] for s in sw], "o-", color=c, label=label)
    axes[0, 0].set(title="activation memory per token", xlabel="depth (layers)", ylabel="KiB per token")
    axes[0, 1].set(title=f"speed against depth (batch {b2})", xlabel="depth (layers)", ylabel="tokens/s")
    axes[1, 0].set(title=f"peak memory against batch ({sizes.sweep_depth} layers)", xlabel="batch",
                   ylabel="peak MiB")
    axes[1, 1].set(title=f"speed against batch ({sizes.sweep_depth} layers)", xlabel="batch", ylabel="tokens/s")
    for ax in axes.flat:
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    return fig


ACTIVATIONS, STATIC = BACKWARDS["rebuilt"], BACKWARDS["stored"]   # what a plan keeps per device, what it cannot drop


def models_figure(evals: list[list[dict]], hw: M.Hardware = M.H100_ASSUMED):
    """Per geometry, activation and static GiB per device for every plan; last, for the last geometry,
    activations against recompute overhead. A technique that keeps no activations on the device (offload) is
    marked with a 0, since a log axis has no place for it."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import LogFormatterSciNotation, NullFormatter

    fig, axes = plt.subplots(1, len(evals) + 1, figsize=(6 * len(evals) + 5, 0.45 * max(map(len, evals)) + 2))
    for ax, rows in zip(axes, evals):
        y = range(len(rows))
        act = [r["activation_GiB"] or float("nan") for r in rows]
        # dots, not bars: a log axis has no zero a bar's length could start at
        ax.plot(act, [i - 0.12 for i in y], "o", color=ACTIVATIONS, label="activations")
        ax.plot([r["static_GiB"] for r in rows], [i + 0.12 for i in y], "s", color=STATIC, label="weights + grads + Adam")
        for i, r in enumerate(rows):
            if not r["activation_GiB"]:
                ax.annotate(f"0 on the device ({r['host_GiB']:.3g} GiB on host)", (0.02, i - 0.2),
                            xycoords=("axes fraction", "data"), va="center", fontsize=7)
        ax.set_yticks(list(y), [r["plan"] for r in rows], fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")
        values = [v for r in rows for v in (r["activation_GiB"], r["static_GiB"]) if v]
        # under two decades a log axis shows one labelled tick or none: label the minor ticks then
        narrow = bool(values) and max(values) / min(values) < 100
        ax.xaxis.set_minor_formatter(LogFormatterSciNotation(labelOnlyBase=False, minor_thresholds=(2, 0.5))
                                     if narrow else NullFormatter())
        ax.tick_params(axis="x", which="minor", labelsize=7)
        ax.set(title=rows[0]["geometry"], xlabel="GiB per device")
        ax.grid(alpha=0.3, axis="x")
    axes[len(evals) - 1].axvline(hw.hbm_bytes / M.GIB, color="k", ls=":", label="HBM (assumed H100)")
    for ax in axes[:-1]:   # below the axes: over them it hides the plans' dots
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3, frameon=False)
    last = [r for r in evals[-1] if r["activation_GiB"] > 0]
    placed: list[tuple[float, float]] = []
    for r in sorted(last, key=lambda r: (r["recompute_overhead"], r["activation_GiB"])):
        x, y = 100 * r["recompute_overhead"], r["activation_GiB"]
        axes[-1].scatter(x, y, color=ACTIVATIONS)
        # plans on (nearly) one point get their labels stacked, not drawn over each other
        near = sum(abs(x - px) < 2 and abs(math.log10(y / py)) < 0.15 for px, py in placed)
        axes[-1].annotate(r["plan"], (x, y), textcoords="offset points", xytext=(5, -3 + 9 * near), fontsize=7)
        placed.append((x, y))
    axes[-1].set(yscale="log", title=f"{last[0]['geometry']}:\nactivations against extra compute",
                 xlabel="recompute overhead (% of a stored step's FLOPs)", ylabel="activation GiB per device")
    axes[-1].grid(alpha=0.3)
    fig.tight_layout()
    return fig


# --- the verdict, computed -----------------------------------------------------------------------------------

def _row(rows: list[dict], variant: str, depth: int, batch: int) -> dict:
    return next(r for r in rows if (r["variant"], r["depth"], r["batch"]) == (variant, depth, batch))


def _speed(rows: list[dict], variant: str, depth: int, batch: int) -> float:
    return _row(rows, variant, depth, batch)["tokens_per_s"]


def speed_ratio(rows: list[dict], a: str, b: str, depth: int, batch: int) -> Spread | None:
    """`a`'s speed over `b`'s at one timed point, round by round (both steps of a round ran under the same load):
    the median of the rounds' ratios with its bootstrap interval, or with their quartiles where the rounds are too
    few to test (`runs.round_ratio`; `verdicts.speed_verdict` then reads it as too noisy). None when the steps were
    not kept."""
    ta, tb = _row(rows, a, depth, batch).get("step_times"), _row(rows, b, depth, batch).get("step_times")
    if not ta or not tb:
        return None
    return round_ratio(ta, tb)


def summarise(rows: list[dict], sizes: Sizes) -> dict:
    """The measured facts notebook 07b tables: per-token and per-layer bytes, speeds at the deepest point and over
    the batch sweep, interleaved speed ratios (`speed_ratio`), and the measured crossover depths."""
    tokens = per_token(rows, sizes)
    fits = per_layer(tokens)
    deep, b2 = max(sizes.depths), sizes.batches[1]
    speed = {v: _speed(rows, v, deep, b2) for v in tokens}
    sweep_speed = {v: [_speed(rows, v, sizes.sweep_depth, b) for b in sizes.sweep_batches] for v in tokens}
    ratio = {(a, b): speed_ratio(rows, a, b, deep, b2)
             for a, b in (("reveuler_rev", "stored"), ("reveuler_rev", "ckpt_block"), ("midpoint_rev", "stored"))
             if a in speed and b in speed}
    return dict(deep=deep, batch=b2, tokens=tokens, fits=fits, speed=speed, sweep_speed=sweep_speed, ratio=ratio,
                cross={v: crossover_depth(tokens, v) for v in ("midpoint_rev", "reveuler_rev")})


# --- exercise checks -----------------------------------------------------------------------------------------

_EX = Sizes(32, 2, 32, 64, depths=(1, 2), batches=(8, 16), sweep_batches=(), sweep_depth=1, rounds=0)


def _fits(variant: str, sizes: Sizes, prepare: Callable[[nn.Module], object] | None = None) -> tuple[float, float]:
    rows = []
    with single_thread():
        for d in sizes.depths:
            for b in sizes.batches:
                model, opt, step = build(BY_NAME[variant], sizes, d, b, torch.device("cpu"))
                held = prepare(model) if prepare else None  # e.g. a learner's list: alive while the steps run
                step()
                mem = training_step_memory(model, opt, step)
                rows.append(dict(variant=variant, depth=d, batch=b, peak_bytes=mem.peak_bytes))
                del held
    return per_layer(per_token(rows, sizes))[variant]


def check_stored_block_bytes(fn: Callable[[int, int], float]) -> str:
    """Exercise 07b.1: `fn(d_model, n_head)` -> fp32 bytes per token per layer of a stored block, checked against
    the measured slope at a small width and against `models.layer_bytes` at a wide one (so it must be a formula)."""
    measured, _ = _fits("stored", _EX)
    got = fn(_EX.d_model, _EX.n_head)
    assert got is not None, "return a number"
    got = float(got)
    d = _EX.d_model
    # the hint a wrong count needs: how many values of width d it amounts to (a stored block keeps 16)
    assert abs(got - measured) <= 0.02 * measured, f"{got:,.0f} = {got / (4 * d):.2f}d; measured {measured:,.0f}"
    big = M.Geometry("check", 1, 1024, 16, 64, 1, 64)
    want = M.layer_bytes(big, "stored")
    wide = float(fn(1024, 16))
    assert abs(wide - want) <= 0.02 * want, f"d_model=1024: {wide:,.0f}, want {want:,.0f}"
    return f"{got:,.0f} bytes per token per layer at d_model={d}, measured {measured:,.0f}"


def check_leak(fn: Callable[[nn.Module], object]) -> str:
    """Exercise 07b.3: `fn(model)` registers hooks that keep one tensor per block; the reversible trunk's
    per-layer memory must jump from 0 to at least one vector of width d per token, and the model check flag it."""
    sizes = Sizes(16, 2, 32, 64, depths=(2, 4), batches=(8, 16), sweep_batches=(), sweep_depth=2, rounds=0)
    clean, _ = _fits("reveuler_rev", sizes)
    leaky, c = _fits("reveuler_rev", sizes, fn)
    vector = 4 * sizes.d_model
    # below one vector of width d: the hook kept a shape or a number, not the output tensor itself
    assert leaky >= 0.9 * vector, f"{leaky:,.0f} bytes per layer kept, want >= {vector}"
    flagged = model_check({"stored": (0.0, 0.0), "reveuler_rev": (leaky, c)}, sizes)[1]["per_layer_ok"] is False
    assert flagged, "model_check missed it"
    return f"{clean:,.0f} -> {leaky:,.0f} bytes per token per layer ({leaky / vector:.2f} x 4d), flagged"
