"""`python -m rev gpucheck [--json F]`: the CUDA path of `rev`, checked on a real GPU, in one table.

The CPU suite reaches these promises only through doubles (fp16 autocast with the CPU's GradScaler, a patched
`torch.cuda` allocator, simulated out-of-memory errors); here they meet CUDA's kernels and allocator. Each row is
one check (pass / FAIL / skip) or one figure (info):

* gradients of the memory-free trunks against their stored twins in fp32, bf16 (capability >= 8) and fp16 with
  a GradScaler step; again with position chunks, attention head by head, kept states and batch slices at T=256,
  where the chunking is on;
* the fused loss head against the plain one under fp16 with a scaled loss (relative gradient error vs fp32);
* a GradScaler step that overflows is skipped, the scale halves, training resumes; the fixed-point stream
  rebuilds the trunk's input bit for bit on the device;
* memory: activations flat in depth, a step's peak independent of other models held, the max-batch search
  catching a real OOM (allocator capped) and an OOM raised inside the reversible backward, probe freed;
* a run cut at a checkpoint and resumed against the same run uninterrupted (bit-exact, or how far apart);
* `bench` and the max batch of residual / reveuler_rev / midpoint_rev at the assignment geometry (info), and a
  200-step run of the `t4` profile for residual and the reversible trunk, which must end below the corpus's
  unigram loss (the best a model that ignores context can do) by UNIGRAM_MARGIN.

Everything reuses the rooms below (bench, maxbatch, memory, the training loop); this module only chooses sizes and verdicts, and
each row function takes the device, so the suite runs them on a CPU too (tests/training/test_gpucheck.py). Sized
to finish in under 10 minutes on a T4 (estimated: not yet timed on one; every row prints its seconds). Without
CUDA it checks nothing and says so; `--device cpu` runs the rows that have a CPU double and skips the others.

The training rows use the prepared TinyStories corpus when --data-dir holds it; otherwise a small synthetic
corpus (preparing 55M TinyStories tokens does not fit the time), and the table says which was used.
"""
from __future__ import annotations

import argparse
import functools
import math
import tempfile
import time
import weakref
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import torch

from ..measure.bench import bench_depths, bench_trunks, make_training_step
from ..base.cli import CommandFailed, UserError, file_arg, folder_arg, positive_int
from ..data.corpus import profile_folder
from ..base.device import amp_dtype, autocast, describe, pick_device
from ..base.files import write_json
from ..measure.maxbatch import MaxBatch, available_bytes, find_max_batch, measure_probe
from ..measure.memory import training_step_memory
from ..base.profiles import PROFILES, get_profile
from .loop import TrainConfig, load_model, train
from ..core.loss import cross_entropy
from ..core.model import GPT, GPTConfig, reversible_twin
from ..core.reversible import RECON_LIMIT, reconstruction_error

ASSIGNMENT = "t4"                   # the profile with the assignment geometry (d=384, L=10, T=512, 8K vocab)
MAXBATCH_TRUNKS = ("residual", "reveuler_rev", "midpoint_rev")
SLICED_TRUNK = "midpoint_rev"       # the slicing rows' trunk: the screening's usual pick
# Largest relative gradient gap to the stored twin, by autocast dtype. Fixed stream: the rebuilt states are
# bit-identical, so only the order of rounding may differ; the CPU suite's bf16 bound for both half types
# (forgetting the autocast replay gives ~8e-3 in bf16 but only ~8e-4 in fp16, so fp16 needs it this tight).
GRAD_TOL = {None: 1e-5, torch.bfloat16: 1e-4, torch.float16: 1e-4}
# Autocast keeps a half-precision copy of every layer's weights for the step, which does grow with depth; at
# this batch the activations of the stored trunk outgrow it by ~20x, so a flat trunk stays well under 10%.
FLAT_RATIO = 0.1
SYNTHETIC_TOKENS = 2_000_000        # fallback corpus: enough for 200 steps at about two epochs
# The memory options on at once: position chunks of 64 of 256 positions, the head split, a kept state and the
# batch of 4 in slices of 3 (a short last slice): the twin must still match the stored trunk.
LAYOUT = dict(seq_len=256, pos_chunk=64, split_heads=True, keep=(2,), batch_slice=3)
# With LAYOUT the rebuilt blocks run their matmuls in other shapes (per chunk, per head) than the stored trunk, so
# under autocast they round differently: measured on a CPU 9.9e-7 in fp32, 6.0e-4 in fp16, 4.9e-3 in bf16, while
# backpropagating one chunk too few gives 0.64.
LAYOUT_TOL = {None: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}
HEAD_RATIO = 2.0                    # the fused head's fp16 gradient error may be at most this times the plain one's
# A trained model must beat the best context-free predictor (each token at its training frequency) by this many
# nats per token: ln V is beaten by counting tokens alone, the unigram loss only by reading the context.
UNIGRAM_MARGIN = 0.25
RESUME_TOL = 1e-3                   # rel. weight gap of a resumed run to an uninterrupted one, if not bit-exact


@dataclass
class Row:
    check: str
    verdict: str      # pass | FAIL | skip | info
    figure: str
    seconds: float


# --- the checks ---------------------------------------------------------------------------------------------

def twin_gap(base: str, device: torch.device, dtype: torch.dtype | None, scaler: bool = False, **layout) -> dict:
    """Largest per-parameter relative gradient gap between `base`_rev (memory-free backward) and its stored
    twin `base` on the same weights and batch, fixed-point stream, under autocast `dtype`. With `scaler` the
    loss is scaled, gradients unscaled and one GradScaler step taken on each (plain SGD, so the update is the
    unscaled gradient itself and its gap is comparable); then the updates are compared too. `layout` changes
    the model (e.g. `LAYOUT`: position chunks, attention head by head, kept states; a stored twin ignores them)."""
    cfg = dict(vocab_size=256, seq_len=64, n_layer=4, n_head=2, d_model=64, h=0.5, stream="fixed") | layout
    torch.manual_seed(0)
    stored = GPT(GPTConfig(trunk=base, **cfg)).to(device)
    rev = GPT(GPTConfig(trunk=reversible_twin(base), **cfg)).to(device)
    rev.load_state_dict(stored.state_dict())
    gen = torch.Generator().manual_seed(1)
    idx = torch.randint(0, 256, (4, cfg["seq_len"] + 1), generator=gen).to(device)
    start = {n: p.detach().clone() for n, p in stored.named_parameters()}
    out = {}
    for name, model in (("stored", stored), ("rev", rev)):
        opt = torch.optim.SGD(model.parameters(), lr=1e-2)
        gs = torch.amp.GradScaler(device.type, init_scale=2.0 ** 10, enabled=scaler)
        with autocast(device, dtype):
            loss = model(idx[:, :-1], idx[:, 1:])
        gs.scale(loss).backward()  # outside autocast, as in training
        gs.unscale_(opt)
        grads = {n: p.grad.detach().float().clone() for n, p in model.named_parameters()}
        gs.step(opt)
        gs.update()
        out[name] = grads, {n: p.detach().clone() for n, p in model.named_parameters()}, gs.get_scale()
    (g_s, p_s, scale_s), (g_r, p_r, scale_r) = out["stored"], out["rev"]
    gap = {"grad": max(((g_r[n] - g_s[n]).norm() / g_s[n].norm()).item() for n in g_s)}
    if scaler:
        # the two updates' difference, relative to the update itself
        gap["step"] = max(((p_r[n] - p_s[n]).norm() / (p_s[n] - start[n]).norm().clamp_min(1e-30)).item()
                          for n in p_s)
        gap["step_taken"] = scale_s == scale_r == 2.0 ** 10  # an inf/NaN gradient would have halved the scale
    return gap


def grad_rows(device: torch.device) -> list[Row]:
    major, minor = torch.cuda.get_device_capability(device) if device.type == "cuda" else (None, None)
    cases = [("fp32", None, False), ("bf16 autocast", torch.bfloat16, False),
             ("fp16 autocast + GradScaler", torch.float16, True)]
    rows = []
    for label, dtype, scaler in cases:
        if dtype is torch.bfloat16 and major is not None and major < 8:
            rows.append(Row(f"gradients {label}", "skip", f"capability {major}.{minor} < 8: no bf16", 0.0))
            continue
        t0 = time.perf_counter()
        tol = GRAD_TOL[dtype]
        gaps = {b: twin_gap(b, device, dtype, scaler) for b in ("midpoint", "reveuler")}
        worst = max(g["grad"] for g in gaps.values())
        ok = worst <= tol
        figure = f"max rel. gap {worst:.1e} (tol {tol:g})"
        if scaler:
            step = max(g["step"] for g in gaps.values())
            taken = all(g["step_taken"] for g in gaps.values())
            ok = ok and taken and step <= tol
            figure += f"; after the scaler step {step:.1e}{'' if taken else ', step SKIPPED (inf grads)'}"
        rows.append(Row(f"gradients {label}", "pass" if ok else "FAIL", figure, time.perf_counter() - t0))
    return rows


def layout_row(device: torch.device, dtype: torch.dtype | None) -> Row:
    """`twin_gap` with `LAYOUT` (position chunks, head split, kept states at T=256) in fp32 and under autocast
    `dtype` (with a GradScaler step where it is fp16), each within LAYOUT_TOL."""
    gaps = {}
    for dt in dict.fromkeys((None, dtype)):
        scaler = dt == torch.float16
        got = [twin_gap(b, device, dt, scaler, **LAYOUT) for b in ("midpoint", "reveuler")]
        worst = max(g["grad"] for g in got)   # (an update's gap is not compared here: where gradients differ by
        # rounding, parameters whose update is below their own fp32 rounding differ by a whole ulp of the update)
        gaps[dt] = (worst, all(g.get("step_taken", True) for g in got))
    ok = all(w <= LAYOUT_TOL[dt] and taken for dt, (w, taken) in gaps.items())
    chunk = LAYOUT["pos_chunk"]
    return Row(f"gradients, chunks {chunk}/{LAYOUT['seq_len']} + head split + kept {list(LAYOUT['keep'])} + batch "
               f"slices of {LAYOUT['batch_slice']}",
               "pass" if ok else "FAIL", "max rel. gap " + ", ".join(
                   f"{_dtype_name(dt)} {w:.1e} (tol {LAYOUT_TOL[dt]:g}{'' if taken else ', step SKIPPED'})"
                   for dt, (w, taken) in gaps.items()), 0.0)


def head_row(device: torch.device, rows: int = 8192, vocab: int = 8192, d: int = 256) -> Row:
    """The loss heads under fp16 autocast with the loss scaled by 2^16 before backward (a GradScaler's start):
    relative error of the gradients of the hidden states and of the tied weight against fp32. The fused head
    forms its gradients inside forward, so it must keep them from underflowing before the scale reaches them."""
    gen = torch.Generator().manual_seed(0)
    h = torch.randn(rows, d, generator=gen).to(device)
    w = (0.02 * torch.randn(vocab, d, generator=gen)).to(device)
    t = torch.randint(0, vocab, (rows,), generator=gen).to(device)
    err = {}
    for head in ("fused", "plain"):
        grads = {}
        for dtype in (None, torch.float16):
            hh, ww = h.clone().requires_grad_(), w.clone().requires_grad_()
            with autocast(device, dtype):
                loss = cross_entropy(hh, ww, t, head)
            grads[dtype] = [g.double() / 2 ** 16 for g in torch.autograd.grad(2.0 ** 16 * loss.float(), (hh, ww))]
        err[head] = max(((a - b).norm() / b.norm()).item() for a, b in zip(grads[torch.float16], grads[None]))
    ok = math.isfinite(err["fused"]) and err["fused"] <= HEAD_RATIO * err["plain"]
    return Row("fused head vs plain, fp16 + loss scale", "pass" if ok else "FAIL",
               f"rel. gradient error vs fp32: fused {err['fused']:.1e}, plain {err['plain']:.1e} "
               f"(fused may be {HEAD_RATIO:g}x; {rows} rows, V={vocab}, d={d})", 0.0)


def scaler_skip_row(device: torch.device, init_scale: float = 2.0 ** 50) -> Row:
    """fp16 autocast with a GradScaler whose scale overflows the fp16 gradients: the step must be skipped
    (weights bit-identical), the scale halved on each skip, and training must resume by itself once it fits."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=256, seq_len=64, n_layer=2, n_head=2, d_model=64, trunk="reveuler_rev"))
    model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    gs = torch.amp.GradScaler(device.type, init_scale=init_scale)
    idx = torch.randint(0, 256, (4, 65), generator=torch.Generator().manual_seed(1)).to(device)
    scales, skipped = [], 0
    for _ in range(64):
        before = [p.detach().clone() for p in model.parameters()]
        with autocast(device, torch.float16):
            loss = model(idx[:, :-1], idx[:, 1:])
        gs.scale(loss).backward()
        gs.step(opt)
        gs.update()
        opt.zero_grad(set_to_none=True)
        scales.append(gs.get_scale())
        if not all(torch.equal(a, b.detach()) for a, b in zip(before, model.parameters())):
            break
        skipped += 1
    halved = all(b == a / 2 for a, b in zip([init_scale] + scales, scales[:skipped]))
    ok = skipped >= 1 and halved and skipped < len(scales)
    return Row("GradScaler skips an overflowing step", "pass" if ok else "FAIL",
               f"{skipped} step(s) skipped with weights unchanged, scale 2^{math.log2(init_scale):.0f} -> "
               f"2^{math.log2(scales[-1]):.0f}" + ("" if skipped < len(scales) else ", no step ever taken"), 0.0)


def fixed_recon_row(device: torch.device, dtype: torch.dtype | None) -> Row:
    """The fixed-point stream inverts bit for bit on this device: reconstruction error exactly 0 for both
    reversible trunks (with `LAYOUT`'s chunks and head split) under autocast `dtype`."""
    errs = {}
    for trunk in ("midpoint_rev", "reveuler_rev"):
        torch.manual_seed(0)
        model = GPT(GPTConfig(vocab_size=256, n_layer=8, n_head=4, d_model=128, trunk=trunk, stream="fixed",
                              **LAYOUT)).to(device)
        idx = torch.randint(0, 256, (4, LAYOUT["seq_len"]), generator=torch.Generator().manual_seed(1))
        with autocast(device, dtype):
            errs[trunk] = reconstruction_error(model, idx.to(device))
    ok = all(e == 0.0 for e in errs.values())
    return Row("fixed stream rebuilds bit for bit", "pass" if ok else "FAIL",
               f"{_dtype_name(dtype)}, 8 layers: " + ", ".join(f"{t} {e:.1e}" for t, e in errs.items()), 0.0)


def resume_row(device: torch.device, data_dir: Path, profile: str = "smoke", steps: int = 24) -> Row:
    """A run cut at a checkpoint and resumed against the same run uninterrupted (weights, optimizer, scaler, RNG
    and sampler restored), in the device's default precision. Bit-exact passes; so does a gap under RESUME_TOL
    (kernels that add in a varying order); more means the state was not restored."""
    prof = get_profile(profile)
    with tempfile.TemporaryDirectory() as tmp:
        kw = dict(profile=profile, trunk="reveuler_rev", data_dir=data_dir, device=str(device), progress=False,
                  train_tokens=steps * prof.batch_size * prof.seq_len, ckpt_every=steps // 3, eval_every=steps)
        train(TrainConfig(out_dir=Path(tmp) / "whole", **kw))
        train(TrainConfig(out_dir=Path(tmp) / "cut", stop_after=steps // 3, **kw))
        s = train(TrainConfig(out_dir=Path(tmp) / "cut", resume=True, **kw))
        a, b = (load_model(Path(tmp) / r) for r in ("whole", "cut"))
    pairs = [(p.double(), q.double()) for p, q in zip(a.state_dict().values(), b.state_dict().values())]
    exact = all(torch.equal(p, q) for p, q in pairs)
    gap = max(((p - q).norm() / p.norm().clamp_min(1e-30)).item() for p, q in pairs)
    ok = exact or gap <= RESUME_TOL
    how = "bit-exact" if exact else f"not bit-exact: max rel. weight gap {gap:.1e} (tol {RESUME_TOL:g})"
    return Row(f"resume at step {steps // 3} vs uninterrupted", "pass" if ok else "FAIL",
               f"{s['steps']} steps of {profile}, {s['device']}: {how}", 0.0)


def oom_backward_row(device: torch.device, run_out: Callable[[], None] | None = None) -> Row:
    """An out-of-memory raised inside the memory-free backward (while it rebuilds and backpropagates a block)
    is a miss for the max-batch search and the probe's model, activations and gradients are freed. On CUDA the
    block allocates more than the GPU has; elsewhere `run_out()` stands in for it (raises as CUDA would)."""
    simulated = run_out is not None
    if run_out is None:
        total = torch.cuda.get_device_properties(device).total_memory

        def run_out() -> None:
            torch.empty(total, dtype=torch.uint8, device=device)

    seen: dict = {"stage": None, "model": None}

    def probe() -> int:
        torch.manual_seed(0)
        model = GPT(get_profile("smoke").model_config("reveuler_rev")).to(device)
        seen["model"] = weakref.ref(model)
        idx = torch.randint(0, model.cfg.vocab_size, (8, model.cfg.seq_len + 1)).to(device)

        def in_backward(module, args) -> None:
            if torch.is_grad_enabled() and seen["stage"] == "backward":  # forward runs under no_grad
                seen["stage"] = "ran out in backward"
                run_out()

        model.trunk.blocks[0].mlp.register_forward_pre_hook(in_backward)
        loss = model(idx[:, :-1], idx[:, 1:])
        seen["stage"] = "backward"
        loss.backward()
        return 0

    before = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
    result = measure_probe(probe, 1 << 60, device)
    left = (torch.cuda.memory_allocated(device) - before) if device.type == "cuda" else 0
    freed = seen["model"] is not None and seen["model"]() is None and left <= 16 * 2**20
    ok = result == (None, False) and seen["stage"] == "ran out in backward" and freed
    return Row("OOM inside the reversible backward is a miss", "pass" if ok else "FAIL",
               f"{'' if simulated else 'real OOM, '}probe {'missed' if result == (None, False) else result}, "
               f"{seen['stage']}{' (simulated)' if simulated else ''}; model "
               f"{'freed' if freed else 'still alive'}" + (f", {left / 2**20:.1f} MiB left" if device.type == "cuda"
                                                         else ""), 0.0)


def relative_memory_row(device: torch.device, other_bytes: int = 256 * 2**20) -> Row:
    """A step's measured peak does not depend on what else the process holds: measured alone, then with
    `other_bytes` of another model's tensors alive on the device (bench and notebook 07b keep earlier models)."""
    cfg = GPTConfig(vocab_size=1024, seq_len=128, n_layer=4, n_head=4, d_model=128, trunk="reveuler_rev")

    def peak() -> int:
        model, opt, step = make_training_step(cfg, 8, device, None)
        step()
        return training_step_memory(model, opt, step, device).peak_bytes

    alone = peak()
    other = torch.empty(other_bytes, dtype=torch.uint8, device=device)
    crowded = peak()
    del other
    gap = abs(crowded - alone) / alone
    return Row("peak memory is relative to the step", "pass" if gap <= 0.01 else "FAIL",
               f"alone {alone / 2**20:.1f} MiB, with {other_bytes / 2**20:.0f} MiB of another model held "
               f"{crowded / 2**20:.1f} MiB ({100 * gap:.2f}% apart)", 0.0)


def _dtype_name(dtype: torch.dtype | None) -> str:
    return "fp32" if dtype is None else str(dtype).replace("torch.", "")


def flat_memory_row(device: torch.device, geometry: dict | None = None, batch: int = 16) -> Row:
    """Activation memory of a training step at 4 and 16 layers (CUDA allocator counters), in the device's
    autocast dtype: the reversible trunks must grow by under FLAT_RATIO of what the stored residual grows."""
    geometry = geometry or dict(vocab_size=2048, seq_len=256, n_layer=4, n_head=4, d_model=256)
    act = bench_depths(geometry, batch, depths=(4, 16), trunks=("residual",) + MAXBATCH_TRUNKS[1:],
                       device=str(device), progress=False)
    growth = {t: row[16] - row[4] for t, row in act.items()}
    ratios = {t: growth[t] / growth["residual"] for t in MAXBATCH_TRUNKS[1:]}
    ok = growth["residual"] > 0 and all(r < FLAT_RATIO for r in ratios.values())
    return Row("memory flat in depth (L=4 -> 16)", "pass" if ok else "FAIL",
               f"residual +{growth['residual'] / 2**20:.0f} MiB; "
               + ", ".join(f"{t} {r:.3f}x of that" for t, r in ratios.items()), 0.0)


def oom_row(device: torch.device, cap_bytes: int = 3 * 2**29) -> Row:
    """The max-batch search with the allocator capped at `cap_bytes` and no byte budget of its own: only a real
    CUDA out-of-memory can stop it. Passes when a probe hit the OOM, the search still returned a batch, and
    the failed probe's tensors were freed."""
    # the allocator's cap takes a device *index* (torch.device("cuda") has none), and it must be lifted whatever
    # happens, or every later check runs inside it and fails for want of memory
    index = device.index if device.index is not None else torch.cuda.current_device()
    total = torch.cuda.get_device_properties(index).total_memory
    cfg = get_profile(ASSIGNMENT).model_config("residual")
    torch.cuda.empty_cache()  # memory cached by earlier checks would count against the cap
    before = torch.cuda.memory_allocated(index)
    torch.cuda.set_per_process_memory_fraction(min(1.0, cap_bytes / total), index)
    try:
        # a budget of all the device has free (the driver's figure ignores the cap): the cap binds first
        res = find_max_batch(cfg, available_bytes(torch.device("cuda", index)), f"cuda:{index}", start=4,
                             limit=4096, progress=False)
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, index)
        torch.cuda.empty_cache()
    leaked = torch.cuda.memory_allocated(index) - before
    ooms = sum(p.peak_bytes is None for p in res.probes)
    ok = ooms >= 1 and res.batch >= 1 and leaked <= 16 * 2**20
    return Row("max-batch search catches a real OOM", "pass" if ok else "FAIL",
               f"cap {cap_bytes / 2**30:.1f} GiB: batch {res.batch}, {ooms} OOM probe(s) of {len(res.probes)}, "
               f"{leaked / 2**20:.1f} MiB left allocated after", 0.0)


def bench_rows(device: torch.device) -> list[Row]:
    prof = get_profile(ASSIGNMENT)
    geometry = {k: getattr(prof, k) for k in ("vocab_size", "seq_len", "n_layer", "n_head", "d_model")}
    res = bench_trunks(geometry, 8, trunks=("residual", "residual_ckpt", "midpoint_rev", "reveuler_rev"), steps=5,
                       device=str(device), progress=False)
    return [Row(f"bench {r['trunk']} (batch 8)", "info",
                f"peak {r['peak_bytes'] / 2**20:.0f} MiB ({r.get('peak_ratio', math.nan):.2f}x res), "
                f"{r['tokens_per_s']:,.0f} tok/s ({r.get('speed_ratio', math.nan):.2f}x res)", 0.0)
            for r in res["runs"]]


@functools.lru_cache(maxsize=2)
def _assignment_max_batches(device: str) -> dict[str, MaxBatch]:
    """Each of `MAXBATCH_TRUNKS`' max batch at the assignment geometry, searched once per device."""
    prof = get_profile(ASSIGNMENT)
    return {t: find_max_batch(prof.model_config(t), None, device, start=prof.batch_size, limit=4096, progress=False)
            for t in MAXBATCH_TRUNKS}


def max_batch_rows(device: torch.device) -> list[Row]:
    found = _assignment_max_batches(str(device))
    base = found["residual"].batch
    return [Row(f"max batch {t}", "info", f"{r.batch} ({r.batch / base:.2f}x residual) under "
                f"{r.budget_bytes / 2**30:.1f} GiB, {len(r.probes)} probes; each step {r.slicing.describe()}", 0.0)
            for t, r in found.items()]


def slicing_rows(device: torch.device, trunk: str = SLICED_TRUNK, small_batch: int = 16) -> list[Row]:
    """What the slice policy buys at the max batch, timed in interleaved rounds (`bench_trunks`): the planned
    slicing against slices of 2 sequences (the fixed 1,024 rows the policy replaced, at T = 512), the reversible
    trunk at its max batch against the residual at its own, time per token at the max batch against `small_batch`,
    and the planned step's measured peak against the budget."""
    prof = get_profile(ASSIGNMENT)
    geometry = {k: getattr(prof, k) for k in ("vocab_size", "seq_len", "n_layer", "n_head", "d_model")}
    found = _assignment_max_batches(str(device))
    r, b = found[trunk], found[trunk].batch
    bench = lambda batch, trunks, slices=("auto",): bench_trunks(  # noqa: E731
        geometry, batch, trunks=trunks, steps=3, device=str(device), progress=False, batch_slices=slices)["runs"]
    runs = bench(b, (trunk,), (r.slicing.batch_slice, 2))
    planned, forced = runs[0], runs[-1]
    base = bench(found["residual"].batch, ("residual",))[0]
    small = bench(small_batch, (trunk,))[0]
    tps = lambda row: f"{row['tokens_per_s']:,.0f} tok/s"  # noqa: E731
    fits = planned["peak_bytes"] <= r.budget_bytes
    return [
        Row(f"{trunk} at max batch {b}: planned vs 2-sequence slices", "info",
            f"{tps(planned)} ({r.slicing.describe()}) vs {tps(forced)}: "
            f"{planned['tokens_per_s'] / forced['tokens_per_s']:.2f}x", 0.0),
        Row(f"{trunk} at max batch vs residual at its own", "info",
            f"{tps(planned)} at batch {b} vs {tps(base)} at batch {found['residual'].batch}: "
            f"{planned['tokens_per_s'] / base['tokens_per_s']:.2f}x", 0.0),
        Row(f"{trunk} time per token, batch {b} vs {small_batch}", "info",
            f"{1e6 / planned['tokens_per_s']:.2f} vs {1e6 / small['tokens_per_s']:.2f} us per token: "
            f"{small['tokens_per_s'] / planned['tokens_per_s']:.2f}x", 0.0),
        Row(f"{trunk} planned step within the budget", "pass" if fits else "FAIL",
            f"peak {planned['peak_bytes'] / 2**20:,.0f} MiB of {r.budget_bytes / 2**20:,.0f} MiB at batch {b}", 0.0),
    ]


def check_profile(data_dir: Path) -> tuple[str, str]:
    """(profile name, corpus used) for the training rows: `t4` on its prepared corpus (TinyStories, or the
    stand-in notebook 00 made when it was unreachable), else `t4` on a small synthetic corpus, registered as
    profile `t4-synthetic` for this process only."""
    prof = get_profile(ASSIGNMENT)
    folder = profile_folder(prof, data_dir)
    if (folder / "meta.json").exists():
        return prof.name, folder.name
    name = f"{prof.name}-synthetic"
    PROFILES[name] = prof.replace(name=name, data_source="synthetic", data_name="synthetic-t4check",
                                  data_tokens=SYNTHETIC_TOKENS)
    return name, f"synthetic (no prepared {prof.data_name} in {data_dir})"


def train_rows(device: torch.device, data_dir: Path, reversible: str, steps: int,
               profile: str | None = None) -> list[Row]:
    """`steps` of the `t4` profile (or `profile`) for residual and `reversible`: each must end below the
    corpus's unigram loss by UNIGRAM_MARGIN, and a reversible trunk must still rebuild its input."""
    profile, corpus = check_profile(data_dir) if profile is None else (profile, get_profile(profile).data_name)
    prof = get_profile(profile)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for trunk in ("residual", reversible):
            t0 = time.perf_counter()
            s = train(TrainConfig(profile=profile, trunk=trunk, out_dir=Path(tmp) / trunk, data_dir=data_dir,
                                  train_tokens=steps * prof.batch_size * prof.seq_len, eval_every=steps // 2,
                                  ckpt_every=10 * steps, device=str(device), progress=False))
            recon, unigram = s["reconstruction_error"], s["unigram_val_loss"]
            ok = s["final_val_loss"] < unigram - UNIGRAM_MARGIN and (recon is None or recon <= RECON_LIMIT)
            rows.append(Row(f"train {trunk} {s['steps']} steps", "pass" if ok else "FAIL",
                            f"val {s['final_val_loss']:.3f} (unigram {unigram:.2f}, must be "
                            f"{UNIGRAM_MARGIN:g} below; ln V {math.log(prof.vocab_size):.2f}), "
                            f"{s['tokens_per_s']:,.0f} tok/s, peak {s['peak_memory_bytes'] / 2**20:.0f} MiB"
                            + ("" if recon is None else f", recon. error {recon:.1e} (limit {RECON_LIMIT:g})")
                            + f"; {corpus}", time.perf_counter() - t0))
    return rows


# --- the command ----------------------------------------------------------------------------------------------

def _timed(fn: Callable[[], Row | list[Row]], name: str) -> list[Row]:
    """Run one check; its time goes into the row, and an exception becomes a FAIL row so the table still prints."""
    t0 = time.perf_counter()
    try:
        out = fn()
    except Exception as e:  # noqa: BLE001 -- the table must say what broke and go on
        return [Row(name, "FAIL", f"{type(e).__name__}: {str(e).splitlines()[0][:150] if str(e) else ''}",
                    time.perf_counter() - t0)]
    rows = out if isinstance(out, list) else [out]
    if all(r.seconds == 0.0 for r in rows):
        rows[0].seconds = time.perf_counter() - t0
    return rows


SMALL = dict(vocab_size=256, seq_len=64, n_layer=4, n_head=2, d_model=64)   # sizes for a CPU's doubles


def _simulated_oom() -> None:
    raise torch.OutOfMemoryError("CUDA out of memory (simulated on the CPU)")


def gpucheck(device: torch.device, data_dir: Path, reversible: str = "reveuler_rev", steps: int = 200) -> list[Row]:
    """Every row on a CUDA `device`. On a CPU, the rows that have a CPU double run (fp16 autocast with the CPU's
    GradScaler stands in for the T4's precision, a raised OutOfMemoryError for a real one) and the others skip."""
    cuda = device.type == "cuda"
    dtype = amp_dtype(device) if cuda else torch.float16   # the precision training uses here (a T4's on a CPU)
    checks = [
        (lambda: grad_rows(device), "gradients", True),
        (lambda: layout_row(device, dtype), "gradients with chunks, head split, kept states", True),
        (lambda: head_row(device, *(() if cuda else (1024, 2048, 64))), "fused head vs plain, fp16", True),
        (lambda: scaler_skip_row(device), "GradScaler skips an overflowing step", True),
        (lambda: fixed_recon_row(device, dtype), "fixed stream rebuilds bit for bit", True),
        (lambda: flat_memory_row(device, *(() if cuda else (SMALL, 4))), "memory flat in depth", True),
        (lambda: relative_memory_row(device), "peak memory is relative to the step", True),
        (lambda: oom_row(device), "max-batch search catches a real OOM", False),
        (lambda: oom_backward_row(device, None if cuda else _simulated_oom),
         "OOM inside the reversible backward is a miss", True),
        (lambda: resume_row(device, data_dir), "resume vs uninterrupted", True),
        (lambda: bench_rows(device), "bench", False),
        (lambda: max_batch_rows(device), "max batch", False),
        (lambda: slicing_rows(device), "batch slicing at the max batch",
         "needs a CUDA GPU: the slice policy measures there; a CPU keeps its 1,024-row slices"),
        (lambda: train_rows(device, data_dir, reversible, steps), "train", False),
    ]
    return [row for fn, name, on_cpu in checks
            for row in (_timed(fn, name) if cuda or on_cpu is True else
                        [Row(name, "skip", on_cpu or "needs a CUDA GPU", 0.0)])]


def format_table(rows: list[Row], header: str) -> str:
    width = max(len(r.check) for r in rows)
    lines = [header, f"{'check':<{width}}  {'verdict':<7}  {'s':>5}  figure"]
    lines += [f"{r.check:<{width}}  {r.verdict:<7}  {r.seconds:>5.0f}  {r.figure}" for r in rows]
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cuda",
                   help="the CUDA device to check (default cuda); cpu runs the rows that have a CPU double")
    p.add_argument("--data-dir", type=folder_arg, default=Path("data"),
                   help="where a prepared TinyStories corpus may be (else a small synthetic one is made here)")
    p.add_argument("--reversible", default="reveuler_rev", choices=["reveuler_rev", "midpoint_rev"],
                   help="the reversible trunk to train next to residual (the screening's default choice)")
    p.add_argument("--steps", type=positive_int, default=200, help="training steps of each run")
    p.add_argument("--json", type=file_arg, help="write the table here as JSON")


def run_cli(args: argparse.Namespace) -> int:
    if args.device != "cpu" and not torch.cuda.is_available():
        raise CommandFailed("gpucheck needs a CUDA GPU and none is visible (torch.cuda.is_available() is "
                         f"False; torch {torch.__version__}): nothing was checked. On Colab: Runtime > Change "
                         f"runtime type > T4 GPU. `--device cpu` runs the rows that have a CPU double.")
    device = pick_device(args.device)
    if device.type not in ("cuda", "cpu"):
        raise UserError(f"gpucheck checks a CUDA device (or the CPU doubles with --device cpu), not {device}")
    t0 = time.perf_counter()
    rows = gpucheck(device, args.data_dir, args.reversible, args.steps)
    where = describe(device, amp_dtype(device)) if device.type == "cuda" else \
        "the CPU (its doubles of the CUDA path; rows that need a GPU skip)"
    header = f"gpucheck on {where}, torch {torch.__version__}, {time.perf_counter() - t0:.0f} s"
    print(format_table(rows, header))
    failed = [r.check for r in rows if r.verdict == "FAIL"]
    if args.json:
        write_json(args.json, {"header": header, "passed": not failed, "rows": [asdict(r) for r in rows]})
    if failed:
        print(f"FAILED: {', '.join(failed)}")
    return 1 if failed else 0
