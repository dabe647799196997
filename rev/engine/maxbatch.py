"""`python -m rev maxbatch`: the largest batch whose training step fits a memory budget.

Search: double the batch until a probe does not fit, then binary-search between the last fit and the first
miss. Every probe builds the model and optimizer afresh and runs real optimizer steps (the first creates
Adam's state, the second is measured), so what is measured is what training will need.

* CUDA: the budget is a fraction of the free memory; a probe that runs out of memory is caught, its
  tensors freed, and counted as a miss.
* CPU: nothing runs out of memory soon enough to tell, so the budget is an explicit byte count (the
  profile's `cpu_mem_budget` unless given), checked against the peak measured by `rev.engine.memory`.
"""
from __future__ import annotations

import argparse
import gc
from dataclasses import dataclass, field
from typing import Callable
from pathlib import Path

import torch
from tqdm.auto import tqdm

from .bench import make_training_step
from .device import amp_dtype, pick_device
from .memory import training_step_memory
from ..core.model import GPT, TRUNKS, GPTConfig
from .profiles import get_profile
from .files import write_json


@dataclass
class Probe:
    batch: int
    peak_bytes: int | None   # None when the probe ran out of memory
    fits: bool


@dataclass
class MaxBatch:
    trunk: str
    batch: int
    budget_bytes: int
    probes: list[Probe] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"trunk": self.trunk, "batch": self.batch, "budget_bytes": self.budget_bytes,
                "probes": [vars(p) for p in self.probes]}


def static_bytes(cfg: GPTConfig) -> int:
    """Parameters + gradients + two Adam moments, in fp32: the floor any batch needs."""
    with torch.device("meta"):
        n = GPT(cfg).n_params()
    return 16 * n


def probe(cfg: GPTConfig, batch: int, device: torch.device, dtype) -> int:
    """Peak bytes of a real training step at `batch` (raises torch.OutOfMemoryError on CUDA OOM)."""
    model, opt, step = make_training_step(cfg, batch, device, dtype)
    step()  # creates Adam's state, as in training
    return training_step_memory(model, opt, step, device).peak_bytes


def _fits(cfg, batch, device, dtype, budget) -> Probe:
    try:
        peak = probe(cfg, batch, device, dtype)
        return Probe(batch, peak, peak <= budget)
    except torch.OutOfMemoryError:
        return Probe(batch, None, False)
    finally:
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()


def largest_fitting(fits: Callable[[int], bool], start: int, limit: int) -> int:
    """Largest n in [1, limit] with fits(n), assuming fits is monotone (true up to some n, false after):
    double from `start` until a miss (or bisect below `start` if it already misses), then bisect."""
    lo, hi = 0, limit + 1          # invariant: lo fits (0 = none known), hi does not
    n = min(start, limit)
    if not fits(n):
        hi = n
    else:
        lo = n
        while lo < limit:
            n = min(2 * lo, limit)
            if not fits(n):
                hi = n
                break
            lo = n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def find_max_batch(cfg: GPTConfig, budget_bytes: int | None = None, device: str = "auto", precision: str = "auto",
                   start: int = 1, limit: int = 1 << 16, progress: bool = True, cuda_fraction: float = 0.9) -> MaxBatch:
    """Largest batch in [1, limit] whose measured step peak is <= budget (see module docstring)."""
    dev = pick_device(device)
    dtype = amp_dtype(dev, precision)
    if budget_bytes is None:
        if dev.type != "cuda":
            raise ValueError("on CPU give an explicit byte budget (e.g. the profile's cpu_mem_budget)")
        free, _ = torch.cuda.mem_get_info(dev)
        budget_bytes = int(cuda_fraction * (free + torch.cuda.memory_allocated(dev)))
    floor = static_bytes(cfg)
    if budget_bytes <= floor:
        raise ValueError(f"budget {budget_bytes / 2**20:.1f} MiB is smaller than the model itself "
                         f"({floor / 2**20:.1f} MiB for parameters, gradients and Adam state): raise the budget")
    result = MaxBatch(cfg.trunk, 0, budget_bytes)
    bar = tqdm(desc=f"max batch {cfg.trunk}", disable=not progress, unit="probe")

    def test(b: int) -> bool:
        p = _fits(cfg, b, dev, dtype, budget_bytes)
        result.probes.append(p)
        bar.update()
        bar.set_postfix(batch=b, peak_MiB=None if p.peak_bytes is None else round(p.peak_bytes / 2**20), fits=p.fits)
        return p.fits

    lo = largest_fitting(test, max(1, start), limit)
    bar.close()
    if lo == 0:
        raise ValueError(f"not even batch 1 fits in {budget_bytes / 2**20:.1f} MiB for trunk {cfg.trunk!r}")
    result.batch = lo
    return result


def profile_model_config(profile: str, trunk: str, n_layer: int | None = None, h: float | None = None,
                         stream: str = "fp32") -> GPTConfig:
    """The model a profile trains with `trunk` (and optional depth, step size and stream)."""
    prof = get_profile(profile)
    return GPTConfig(vocab_size=prof.vocab_size, seq_len=prof.seq_len, n_layer=n_layer or prof.n_layer,
                     n_head=prof.n_head, d_model=prof.d_model, trunk=trunk,
                     h=TRUNKS[trunk].h if h is None else h, stream=stream)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default="auto")
    p.add_argument("--trunk", nargs="+", default=["residual", "reveuler_rev"], choices=list(TRUNKS))
    p.add_argument("--budget-mib", type=float, help="memory budget (default: the profile's on CPU, 90%% of free on CUDA)")
    p.add_argument("--n-layer", type=int)
    p.add_argument("--device", default="auto")
    p.add_argument("--precision", default="auto")
    p.add_argument("--json", type=Path)


def run_cli(args: argparse.Namespace) -> int:
    prof = get_profile(args.profile)
    dev = pick_device(args.device)
    budget = int(args.budget_mib * 2**20) if args.budget_mib else (None if dev.type == "cuda" else prof.cpu_mem_budget)
    results = {}
    for trunk in args.trunk:
        try:
            r = find_max_batch(profile_model_config(prof.name, trunk, args.n_layer), budget, args.device, args.precision)
        except ValueError as e:
            raise SystemExit(f"error: {e}")
        results[trunk] = r.to_dict()
        print(f"{trunk}: max batch {r.batch} under {r.budget_bytes / 2**20:.0f} MiB "
              f"({len(r.probes)} probes)")
    if "residual" in results and len(results) > 1:
        for t, r in results.items():
            if t != "residual":
                print(f"{t} / residual max batch: {r['batch'] / results['residual']['batch']:.2f}x")
    if args.json:
        write_json(args.json, results)
    return 0
