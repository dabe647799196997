"""`python -m rev gpucheck [--json F]`: the CUDA path of `rev`, checked on a real GPU, in one table.

The CPU suite cannot reach these lines: autocast replay in bf16 (capability >= 8) and fp16 with a GradScaler
step, the CUDA allocator's peak counters, a real out-of-memory caught by the max-batch search. Each row of the
table is one check (pass / FAIL / skip) or one figure (info): gradient equivalence of the memory-free trunks
with their stored twins, activation memory flat in depth, the OOM search, `bench` and the max batch of
residual / reveuler_rev / midpoint_rev at the assignment geometry, and a 200-step run of the `t4` profile for
residual and the reversible trunk. Everything reuses rev.engine (bench, maxbatch, memory, train); this module
only chooses sizes and verdicts. Sized to finish in under 8 minutes on a T4 (not yet measured on one).

The training rows use the prepared TinyStories corpus when --data-dir holds it; otherwise a small synthetic
corpus (preparing 55M TinyStories tokens does not fit the time), and the table says which was used.
"""
from __future__ import annotations

import argparse
import math
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import torch

from .bench import bench_depths, bench_trunks
from .corpus import profile_folder
from .device import amp_dtype, autocast, describe, pick_device
from .files import write_json
from .maxbatch import find_max_batch
from .profiles import PROFILES, get_profile
from .train import TrainConfig, train
from ..core.model import GPT, GPTConfig, reversible_twin
from ..core.reversible import RECON_LIMIT

ASSIGNMENT = "t4"                   # the profile with the assignment geometry (d=384, L=10, T=512, 8K vocab)
MAXBATCH_TRUNKS = ("residual", "reveuler_rev", "midpoint_rev")
# Largest relative gradient gap to the stored twin, by autocast dtype. Fixed stream: the rebuilt states are
# bit-identical, so only the order of rounding may differ; the CPU suite's bf16 bound for both half types
# (forgetting the autocast replay gives ~8e-3 in bf16 but only ~8e-4 in fp16, so fp16 needs it this tight).
GRAD_TOL = {None: 1e-5, torch.bfloat16: 1e-4, torch.float16: 1e-4}
# Autocast keeps a half-precision copy of every layer's weights for the step, which does grow with depth; at
# this batch the activations of the stored trunk outgrow it by ~20x, so a flat trunk stays well under 10%.
FLAT_RATIO = 0.1
SYNTHETIC_TOKENS = 2_000_000        # fallback corpus: enough for 200 steps at about two epochs


@dataclass
class Row:
    check: str
    verdict: str      # pass | FAIL | skip | info
    figure: str
    seconds: float


# --- the checks ---------------------------------------------------------------------------------------------

def twin_gap(base: str, device: torch.device, dtype: torch.dtype | None, scaler: bool = False) -> dict:
    """Largest per-parameter relative gradient gap between `base`_rev (memory-free backward) and its stored
    twin `base` on the same weights and batch, fixed-point stream, under autocast `dtype`. With `scaler` the
    loss is scaled, gradients unscaled and one GradScaler step taken on each (plain SGD, so the update is the
    unscaled gradient itself and its gap is comparable); then the updates are compared too."""
    cfg = dict(vocab_size=256, seq_len=64, n_layer=4, n_head=2, d_model=64, h=0.5, stream="fixed")
    torch.manual_seed(0)
    stored = GPT(GPTConfig(trunk=base, **cfg)).to(device)
    rev = GPT(GPTConfig(trunk=reversible_twin(base), **cfg)).to(device)
    rev.load_state_dict(stored.state_dict())
    gen = torch.Generator().manual_seed(1)
    idx = torch.randint(0, 256, (4, 65), generator=gen).to(device)
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
    major, minor = torch.cuda.get_device_capability(device)
    cases = [("fp32", None, False), ("bf16 autocast", torch.bfloat16, False),
             ("fp16 autocast + GradScaler", torch.float16, True)]
    rows = []
    for label, dtype, scaler in cases:
        if dtype is torch.bfloat16 and major < 8:
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


def flat_memory_row(device: torch.device) -> Row:
    """Activation memory of a training step at 4 and 16 layers (CUDA allocator counters), in the device's
    autocast dtype: the reversible trunks must grow by under FLAT_RATIO of what the stored residual grows."""
    geometry = dict(vocab_size=2048, seq_len=256, n_layer=4, n_head=4, d_model=256)
    act = bench_depths(geometry, 16, depths=(4, 16), trunks=("residual",) + MAXBATCH_TRUNKS[1:],
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
    total = torch.cuda.get_device_properties(device).total_memory
    cfg = get_profile(ASSIGNMENT).model_config("residual")
    torch.cuda.empty_cache()  # memory cached by earlier checks would count against the cap
    before = torch.cuda.memory_allocated(device)
    torch.cuda.set_per_process_memory_fraction(min(1.0, cap_bytes / total), device)
    try:
        res = find_max_batch(cfg, total, str(device), start=4, limit=4096, progress=False)
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, device)
    leaked = torch.cuda.memory_allocated(device) - before
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


def max_batch_rows(device: torch.device) -> list[Row]:
    prof = get_profile(ASSIGNMENT)
    found = {t: find_max_batch(prof.model_config(t), None, str(device), start=prof.batch_size,
                               limit=4096, progress=False) for t in MAXBATCH_TRUNKS}
    base = found["residual"].batch
    return [Row(f"max batch {t}", "info", f"{r.batch} ({r.batch / base:.2f}x residual) under "
                f"{r.budget_bytes / 2**30:.1f} GiB, {len(r.probes)} probes", 0.0) for t, r in found.items()]


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


def train_rows(device: torch.device, data_dir: Path, reversible: str, steps: int) -> list[Row]:
    profile, corpus = check_profile(data_dir)
    prof = get_profile(profile)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for trunk in ("residual", reversible):
            t0 = time.perf_counter()
            s = train(TrainConfig(profile=profile, trunk=trunk, out_dir=Path(tmp) / trunk, data_dir=data_dir,
                                  train_tokens=steps * prof.batch_size * prof.seq_len, eval_every=steps // 2,
                                  ckpt_every=10 * steps, device=str(device), progress=False))
            recon = s["reconstruction_error"]
            ok = s["final_val_loss"] < math.log(prof.vocab_size) and (recon is None or recon <= RECON_LIMIT)
            rows.append(Row(f"train {trunk} {s['steps']} steps", "pass" if ok else "FAIL",
                            f"val {s['final_val_loss']:.3f} (ln V {math.log(prof.vocab_size):.2f}), "
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


def gpucheck(device: torch.device, data_dir: Path, reversible: str = "reveuler_rev", steps: int = 200) -> list[Row]:
    return [row for fn, name in (
        (lambda: grad_rows(device), "gradients"),
        (lambda: flat_memory_row(device), "memory flat in depth"),
        (lambda: oom_row(device), "max-batch search catches a real OOM"),
        (lambda: bench_rows(device), "bench"),
        (lambda: max_batch_rows(device), "max batch"),
        (lambda: train_rows(device, data_dir, reversible, steps), "train"),
    ) for row in _timed(fn, name)]


def format_table(rows: list[Row], header: str) -> str:
    width = max(len(r.check) for r in rows)
    lines = [header, f"{'check':<{width}}  {'verdict':<7}  {'s':>5}  figure"]
    lines += [f"{r.check:<{width}}  {r.verdict:<7}  {r.seconds:>5.0f}  {r.figure}" for r in rows]
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cuda", help="the CUDA device to check (default cuda)")
    p.add_argument("--data-dir", type=Path, default=Path("data"),
                   help="where a prepared TinyStories corpus may be (else a small synthetic one is made here)")
    p.add_argument("--reversible", default="reveuler_rev", choices=["reveuler_rev", "midpoint_rev"],
                   help="the reversible trunk to train next to residual (the screening's default choice)")
    p.add_argument("--steps", type=int, default=200, help="training steps of each run")
    p.add_argument("--json", type=Path, help="write the table here as JSON")


def run_cli(args: argparse.Namespace) -> int:
    if not torch.cuda.is_available():
        raise SystemExit("error: gpucheck needs a CUDA GPU and none is visible (torch.cuda.is_available() is "
                         f"False; torch {torch.__version__}). On Colab: Runtime > Change runtime type > T4 GPU.")
    device = pick_device(args.device)
    if device.type != "cuda":
        raise SystemExit(f"error: gpucheck needs a CUDA device, not {device}")
    t0 = time.perf_counter()
    rows = gpucheck(device, args.data_dir, args.reversible, args.steps)
    header = (f"gpucheck on {describe(device, amp_dtype(device))}, torch {torch.__version__}, "
              f"{time.perf_counter() - t0:.0f} s")
    print(format_table(rows, header))
    failed = [r.check for r in rows if r.verdict == "FAIL"]
    if args.json:
        write_json(args.json, {"header": header, "passed": not failed, "rows": [asdict(r) for r in rows]})
    if failed:
        print(f"FAILED: {', '.join(failed)}")
    return 1 if failed else 0
