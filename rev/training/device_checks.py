"""The rows of `python -m rev gpucheck` that check the reversible trunk itself on a device: its gradients against
the stored twin (fp32, bf16, fp16 with a GradScaler step; again with every memory option on), the fused loss head
under fp16, a GradScaler skipping an overflowing step, the fixed stream rebuilding bit for bit, and its memory
(flat in depth, a step's peak independent of other tensors held). `gpucheck` runs them beside the rows that
measure the GPU itself (leaks, out-of-memory, the T4 emulation, training).
"""
from __future__ import annotations

import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from ..measure.bench import bench_depths
from ..measure.probe import make_training_step
from ..base.device import autocast
from ..measure.memory import training_step_memory
from ..core.loss import cross_entropy
from ..core.model import GPT, GPTConfig, reversible_twin
from ..core.reversible import reconstruction_error
from ..base.profiles import get_profile
from ..base.units import MIB
from .checkpoint import load_model
from .loop import TrainConfig, train

# Largest relative gradient gap to the stored twin, by autocast dtype. Fixed stream: the rebuilt states are
# bit-identical, so only the order of rounding may differ; the CPU suite's bf16 bound for both half types
# (forgetting the autocast replay gives ~8e-3 in bf16 but only ~8e-4 in fp16, so fp16 needs it this tight).
CHECKED_TRUNKS = ("residual", "midpoint_rev", "reveuler_rev")   # the stored baseline and both reversible trunks
GRAD_TOL = {None: 1e-5, torch.bfloat16: 1e-4, torch.float16: 1e-4}
# Autocast keeps a half-precision copy of every layer's weights for the step, which does grow with depth; at
# this batch the activations of the stored trunk outgrow it by ~20x, so a flat trunk stays well under 10%.
FLAT_RATIO = 0.1
# The memory options on at once: position chunks of 64 of 256 positions, the head split, a kept state and the
# batch of 4 in slices of 3 (a short last slice): the twin must still match the stored trunk.
LAYOUT = dict(seq_len=256, pos_chunk=64, split_heads=True, keep=(2,), batch_slice=3)
# With LAYOUT the rebuilt blocks run their matmuls in other shapes (per chunk, per head) than the stored trunk, so
# under autocast they round differently: measured on a CPU 9.9e-7 in fp32, 6.0e-4 in fp16, 4.9e-3 in bf16, while
# backpropagating one chunk too few gives 0.64.
LAYOUT_TOL = {None: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}
RESUME_TOL = 1e-3                   # rel. weight gap of a resumed run to an uninterrupted one, if not bit-exact
HEAD_RATIO = 2.0                    # the fused head's fp16 gradient error may be at most this times the plain one's


@dataclass
class Row:
    check: str
    verdict: str      # pass | FAIL | skip | info
    figure: str
    seconds: float
    left_mib: float | None = None     # what the row's check left allocated on the GPU (None: not measured)


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


def relative_memory_row(device: torch.device, other_bytes: int = 256 * MIB) -> Row:
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
               f"alone {alone / MIB:.1f} MiB, with {other_bytes / MIB:.0f} MiB of another model held "
               f"{crowded / MIB:.1f} MiB ({100 * gap:.2f}% apart)", 0.0)


def _dtype_name(dtype: torch.dtype | None) -> str:
    return "fp32" if dtype is None else str(dtype).replace("torch.", "")


def flat_memory_row(device: torch.device, geometry: dict | None = None, batch: int = 16) -> Row:
    """Activation memory of a training step at 4 and 16 layers (CUDA allocator counters), in the device's
    autocast dtype: the reversible trunks must grow by under FLAT_RATIO of what the stored residual grows."""
    geometry = geometry or dict(vocab_size=2048, seq_len=256, n_layer=4, n_head=4, d_model=256)
    act = bench_depths(geometry, batch, depths=(4, 16), trunks=CHECKED_TRUNKS,
                       device=str(device), progress=False)
    growth = {t: row[16] - row[4] for t, row in act.items()}
    ratios = {t: growth[t] / growth["residual"] for t in CHECKED_TRUNKS[1:]}
    ok = growth["residual"] > 0 and all(r < FLAT_RATIO for r in ratios.values())
    return Row("memory flat in depth (L=4 -> 16)", "pass" if ok else "FAIL",
               f"residual +{growth['residual'] / MIB:.0f} MiB; "
               + ", ".join(f"{t} {r:.3f}x of that" for t, r in ratios.items()), 0.0)


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
