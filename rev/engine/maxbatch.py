"""`python -m rev maxbatch`: the largest batch whose training step fits a memory budget.

Search: double the batch until a probe does not fit, then binary-search between the last fit and the first
miss. Every probe builds the model and optimizer afresh and runs real optimizer steps (the first creates
Adam's state, the second is measured), so what is measured is what training will need.

* CUDA: the budget is a fraction of the free memory; a probe that runs out of memory is caught, its
  tensors freed, and counted as a miss.
* CPU: nothing runs out of memory soon enough to tell, so the budget is an explicit byte count (the
  profile's `cpu_mem_budget` unless given), checked against the peak measured by `rev.engine.memory`.

The same measured search also finds the deepest model that fits at a fixed batch (`find_max_depth`), and two
probes give a straight-line memory model (`MemoryLine`) that predicts the max batch before any search runs.
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import math
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
    """One measured step of the batch search."""
    batch: int
    peak_bytes: int | None   # None when the probe ran out of memory
    fits: bool


@dataclass
class DepthProbe:
    """One measured step of the depth search (fixed batch, `n_layer` layers)."""
    n_layer: int
    peak_bytes: int | None
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


@dataclass
class MaxDepth:
    trunk: str
    n_layer: int             # deepest model that fits (0: none)
    batch: int               # the batch every probe ran at
    budget_bytes: int
    max_layers: int          # the search's cap
    probes: list[DepthProbe] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"trunk": self.trunk, "batch": self.batch, "budget_bytes": self.budget_bytes,
                "probes": [vars(p) for p in self.probes],
                "n_layer": self.n_layer, "max_layers": self.max_layers}


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


def _measure(cfg: GPTConfig, batch: int, device: torch.device, dtype, budget: int) -> tuple[int | None, bool]:
    """(peak bytes, fits) of one probe; a CUDA out-of-memory is a miss with no peak."""
    try:
        peak = probe(cfg, batch, device, dtype)
        return peak, peak <= budget
    except torch.OutOfMemoryError:
        return None, False
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


def cuda_budget(dev: torch.device, fraction: float = 0.9) -> int:
    """`fraction` of what a CUDA device can give a training step: its free memory plus what torch holds."""
    free, _ = torch.cuda.mem_get_info(dev)
    return int(fraction * (free + torch.cuda.memory_allocated(dev)))


def _search(desc: str, measure: Callable[[int], tuple[int | None, bool]], record: Callable, start: int,
            limit: int, progress: bool) -> int:
    """`largest_fitting` over measured probes, each recorded by `record(n, peak, fits)`, with a progress bar."""
    bar = tqdm(desc=desc, disable=not progress, unit="probe")

    def test(n: int) -> bool:
        peak, fits = measure(n)
        record(n, peak, fits)
        bar.update()
        bar.set_postfix(n=n, peak_MiB=None if peak is None else round(peak / 2**20), fits=fits)
        return fits

    found = largest_fitting(test, max(1, start), limit)
    bar.close()
    return found


def find_max_batch(cfg: GPTConfig, budget_bytes: int | None = None, device: str = "auto", precision: str = "auto",
                   start: int = 1, limit: int = 1 << 16, progress: bool = True, cuda_fraction: float = 0.9) -> MaxBatch:
    """Largest batch in [1, limit] whose measured step peak is <= budget (see module docstring)."""
    dev = pick_device(device)
    dtype = amp_dtype(dev, precision)
    if budget_bytes is None:
        if dev.type != "cuda":
            raise ValueError("on CPU give an explicit byte budget (e.g. the profile's cpu_mem_budget)")
        budget_bytes = cuda_budget(dev, cuda_fraction)
    floor = static_bytes(cfg)
    if budget_bytes <= floor:
        raise ValueError(f"budget {budget_bytes / 2**20:.1f} MiB is smaller than the model itself "
                         f"({floor / 2**20:.1f} MiB for parameters, gradients and Adam state): raise the budget")
    result = MaxBatch(cfg.trunk, 0, budget_bytes)
    result.batch = _search(f"max batch {cfg.trunk}", lambda b: _measure(cfg, b, dev, dtype, budget_bytes),
                           lambda b, peak, fits: result.probes.append(Probe(b, peak, fits)), start, limit, progress)
    if result.batch == 0:
        raise ValueError(f"not even batch 1 fits in {budget_bytes / 2**20:.1f} MiB for trunk {cfg.trunk!r}")
    return result


def find_max_depth(cfg: GPTConfig, batch: int, budget_bytes: int, max_layers: int, device: str = "auto",
                   precision: str = "auto", progress: bool = True) -> MaxDepth:
    """Deepest `cfg` (up to `max_layers`, starting from `cfg.n_layer`) whose training step at `batch` fits
    `budget_bytes`: the same doubling + bisection, on the layer count. `n_layer` is 0 when not even one fits."""
    dev = pick_device(device)
    dtype = amp_dtype(dev, precision)
    result = MaxDepth(cfg.trunk, 0, batch, budget_bytes, max_layers)
    measure = lambda n: _measure(dataclasses.replace(cfg, n_layer=n), batch, dev, dtype, budget_bytes)  # noqa: E731
    result.n_layer = _search(f"deepest {cfg.trunk}", measure,
                             lambda n, peak, fits: result.probes.append(DepthProbe(n, peak, fits)),
                             cfg.n_layer, max_layers, progress)
    return result


@dataclass(frozen=True)
class MemoryLine:
    """A training step's peak as a straight line in the batch: `static_bytes + bytes_per_sequence * batch`.
    Parameters, gradients and Adam state do not depend on the batch; activations grow with it."""
    static_bytes: float
    bytes_per_sequence: float

    @classmethod
    def through(cls, b1: int, peak1: int, b2: int, peak2: int) -> "MemoryLine":
        """The line through two measured (batch, peak) points."""
        slope = (peak2 - peak1) / (b2 - b1)
        return cls(peak1 - slope * b1, slope)

    def max_batch(self, budget_bytes: int) -> int:
        """Largest batch the line keeps within `budget_bytes` (0 when the static part alone is over)."""
        if self.bytes_per_sequence <= 0:
            raise ValueError(f"the peak did not grow with the batch ({self.bytes_per_sequence:.0f} bytes per "
                             f"sequence): measure at two batches further apart")
        return max(0, math.floor((budget_bytes - self.static_bytes) / self.bytes_per_sequence))


def measure_memory_line(cfg: GPTConfig, b1: int, b2: int, device: str = "auto",
                        precision: str = "auto") -> MemoryLine:
    """Measure a training step's peak at batches `b1` < `b2` and draw the line through the two points."""
    dev = pick_device(device)
    dtype = amp_dtype(dev, precision)
    return MemoryLine.through(b1, probe(cfg, b1, dev, dtype), b2, probe(cfg, b2, dev, dtype))


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
