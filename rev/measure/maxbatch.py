"""`python -m rev maxbatch`: the largest batch whose training step fits a memory budget.

Search: double the batch until a probe does not fit, then binary-search between the last fit and the first
miss. Every probe builds the model and optimizer afresh and runs real optimizer steps (the first creates
Adam's state, the second is measured), so what is measured is what training will need.

* CUDA: the budget is a fraction of what the device can give (`cuda_budget`); a probe that runs out of memory,
  whichever way CUDA reports it (`is_out_of_memory`), is a miss, and its tensors are freed before the next.
* CPU: nothing runs out of memory soon enough to tell, so the budget is an explicit byte count (the
  profile's `cpu_mem_budget` unless given), checked against the peak measured by `rev.measure.memory`; a probe the
  allocator cannot serve at all is a miss too.

Either way a budget is first compared with what the machine has free (`check_budget`): one larger is refused
before any probe runs.

The same measured search also finds the deepest model that fits at a fixed batch (`find_max_depth`), and two
probes give a straight-line memory model (`rev.measure.memory.MemoryLine`) that predicts the max batch before any
search runs; its slope through a search's two largest fitting probes is the measured memory per sequence.

Slicing (`rev.measure.slicing`): on a GPU, with `batch_slice="auto"`, a batch fits when its thinnest slicing (one
sequence a slice) does, and the result carries the slicing a step at the batch found needs (`measured_slices`: the
fewest slices that fit, by the same probes); on a CPU every probe runs the CPU's fixed slices, which the result
reports too. Training at that batch runs the same plan.
"""
from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from typing import Callable

from ..base.progress import tqdm

from .bench import run_label
from .probe import step_peak
from ..base.cli import batch_slice_arg, device_arg, file_arg, pos_chunk_arg, positive_float, positive_int
from ..base.device import amp_dtype, pick_device
from .ledger import static_bytes
from .memory import MemoryLine
from ..core.loss import LOSS_HEADS
from ..core.model import TRUNKS, GPTConfig
from ..core.streams import STREAMS
from ..base.profiles import get_profile
from ..base.files import write_json
from .search import largest_fitting  # noqa: F401  (the search lives there; this module's name for it)
from .probe import CUDA_FRACTION, check_budget, cuda_budget, measure_config
from .slicing import SlicePlan, measured_slices, planned_by_probes
from ..base.units import MIB


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
    slicing: SlicePlan | None = None   # how a step at `batch` slices it (`rev.measure.slicing`)

    def memory_line(self) -> MemoryLine | None:
        """The line through the two largest fitting probes (where activations dominate most), or None with
        fewer than two: its slope is the measured memory per sequence."""
        fit = sorted({p.batch: p.peak_bytes for p in self.probes if p.fits and p.peak_bytes is not None}.items())
        return MemoryLine.through(*fit[-2], *fit[-1]) if len(fit) >= 2 else None

    def to_dict(self) -> dict:
        line = self.memory_line()
        return {"trunk": self.trunk, "batch": self.batch, "budget_bytes": self.budget_bytes,
                "probes": [vars(p) for p in self.probes],
                "bytes_per_sequence": None if line is None else line.bytes_per_sequence,
                "slicing": None if self.slicing is None else self.slicing.to_dict()}


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


def _search(desc: str, measure: Callable[[int], tuple[int | None, bool]], record: Callable, start: int,
            limit: int, progress: bool, gallop: bool = False, max_probes: int | None = None) -> int:
    """`largest_fitting` over measured probes (at most `max_probes`), each recorded by `record(n, peak, fits)`, with
    a progress bar."""
    bar = tqdm(desc=desc, disable=not progress, bar_format="{desc}: {n_fmt} probes{postfix} [{elapsed}]")

    def test(n: int) -> bool:
        peak, fits = measure(n)
        record(n, peak, fits)
        bar.update()
        bar.set_postfix(n=n, peak_MiB=None if peak is None else round(peak / MIB), fits=fits)
        return fits

    found = largest_fitting(test, max(1, start), limit, gallop, max_probes)
    bar.set_postfix_str(f"largest fitting batch {found}")   # the saved last state is the result, not the last probe
    bar.close()
    return found


def find_max_batch(cfg: GPTConfig, budget_bytes: int | None = None, device: str = "auto", precision: str = "auto",
                   start: int = 1, limit: int = 1 << 16, progress: bool = True, cuda_fraction: float = CUDA_FRACTION,
                   guess: bool = False, max_probes: int | None = None, check_free: bool = True) -> MaxBatch:
    """Largest batch in [1, limit] whose measured step peak is <= budget (see module docstring), in at most
    `max_probes` measured probes when given (`largest_fitting`: then the largest batch that fitted). With `guess`,
    the steps at `start` and `2 * start` are measured first and the search gallops from the batch their straight
    line predicts (`MemoryLine.max_batch`): a few probes near the answer instead of doubling up to it, which saves
    most of the time where each probe at a large batch takes minutes (a CPU at the full geometry)."""
    dev = pick_device(device)
    dtype = amp_dtype(dev, precision)
    if budget_bytes is None:
        if dev.type != "cuda":
            raise ValueError("on CPU give an explicit byte budget (e.g. the profile's cpu_mem_budget)")
        budget_bytes = cuda_budget(dev, cuda_fraction)
    floor = static_bytes(cfg)
    if budget_bytes <= floor:
        raise ValueError(f"budget {budget_bytes / MIB:.1f} MiB is smaller than the model itself "
                         f"({floor / MIB:.1f} MiB for parameters, gradients and Adam state): raise the budget")
    if check_free:   # False: a budget above what is free, so only a real out-of-memory ends the search
        check_budget(budget_bytes, dev)
    result = MaxBatch(cfg.trunk, 0, budget_bytes)
    record = lambda b, peak, fits: result.probes.append(Probe(b, peak, fits))  # noqa: E731
    # on a GPU "auto" slices only as far as memory forces it, so a batch fits when its thinnest slicing does; the
    # slicing the step needs at the batch found is then planned (and measured) once, below
    probe_cfg = dataclasses.replace(cfg, batch_slice=1) if planned_by_probes(cfg, dev.type) else cfg
    measure = lambda b: measure_config(probe_cfg, b, dev, dtype, budget_bytes)  # noqa: E731
    if guess:
        start = _line_guess(measure, record, max(1, start), limit, budget_bytes)
    result.batch = _search(f"max batch {cfg.trunk}", measure, record, start, limit, progress, gallop=guess,
                           max_probes=max_probes)
    if result.batch == 0:
        raise ValueError(f"not even batch 1 fits in {budget_bytes / MIB:.1f} MiB for trunk {cfg.trunk!r}")
    result.slicing = measured_slices(cfg, result.batch, dev, dtype, budget_bytes)
    return result


def _line_guess(measure: Callable[[int], tuple[int | None, bool]], record: Callable, start: int, limit: int,
                budget: int) -> int:
    """The max batch predicted by the line through the measured steps at `start` and `2 * start` (both recorded as
    probes); `start` itself when the second does not fit or the line does not rise."""
    points = []
    for b in (start, min(2 * start, limit)):
        peak, fits = measure(b)
        record(b, peak, fits)
        if not fits or peak is None:
            return start
        points.append((b, peak))
    (b1, p1), (b2, p2) = points
    if b2 <= b1 or p2 <= p1:
        return start
    return min(limit, max(1, MemoryLine.through(b1, p1, b2, p2).max_batch(budget)))


def find_max_depth(cfg: GPTConfig, batch: int, budget_bytes: int, max_layers: int, device: str = "auto",
                   precision: str = "auto", progress: bool = True, max_probes: int | None = None) -> MaxDepth:
    """Deepest `cfg` (up to `max_layers`, starting from `cfg.n_layer`) whose training step at `batch` fits
    `budget_bytes`: the same doubling + bisection, on the layer count, in at most `max_probes` probes when given.
    `n_layer` is 0 when not even one fits."""
    dev = pick_device(device)
    dtype = amp_dtype(dev, precision)
    check_budget(budget_bytes, dev)
    result = MaxDepth(cfg.trunk, 0, batch, budget_bytes, max_layers)
    measure = lambda n: measure_config(  # noqa: E731
        dataclasses.replace(cfg, n_layer=n), batch, dev, dtype, budget_bytes)
    result.n_layer = _search(f"deepest {cfg.trunk}", measure,
                             lambda n, peak, fits: result.probes.append(DepthProbe(n, peak, fits)),
                             cfg.n_layer, max_layers, progress, max_probes=max_probes)
    return result


def measure_memory_line(cfg: GPTConfig, b1: int, b2: int, device: str = "auto",
                        precision: str = "auto") -> MemoryLine:
    """Measure a training step's peak at batches `b1` < `b2` and draw the line through the two points."""
    dev = pick_device(device)
    dtype = amp_dtype(dev, precision)
    return MemoryLine.through(b1, step_peak(cfg, b1, dev, dtype), b2, step_peak(cfg, b2, dev, dtype))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default="auto")
    p.add_argument("--trunk", nargs="+", default=["residual", "reveuler_rev"], choices=list(TRUNKS))
    p.add_argument("--budget-mib", type=positive_float,
                   help="memory budget (default: the profile's; on CUDA at most 90%% of what the GPU can give)")
    p.add_argument("--n-layer", type=positive_int)
    p.add_argument("--loss-head", default="fused", choices=list(LOSS_HEADS), help="loss head (see rev.core.loss)")
    p.add_argument("--pos-chunk", type=pos_chunk_arg, default="auto",
                   help="positions per chunk in the recompute: auto (default) | 0 (off) | a number")
    p.add_argument("--batch-slice", type=batch_slice_arg, default="auto",
                   help="sequences per batch slice in the recompute: auto (default) | 0 (the whole batch) | a number")
    p.add_argument("--guess", action="store_true",
                   help="measure two batches first and search from the batch their line predicts (few probes near "
                        "the answer: for a CPU, where a probe at a large batch takes minutes)")
    p.add_argument("--start", type=positive_int, default=1, help="the batch the search starts from (with --guess: "
                   "the first of the line's two batches)")
    p.add_argument("--stream", default="fp32", choices=list(STREAMS), help="the trunk's stream (fp32, fp64, fixed)")
    p.add_argument("--split-heads", action="store_true", help="reversible trunks: backpropagate attention head by head")
    p.add_argument("--device", default="auto", type=device_arg)
    p.add_argument("--precision", default="auto")
    p.add_argument("--json", type=file_arg)


def run_cli(args: argparse.Namespace) -> int:
    prof = get_profile(args.profile)
    dev = pick_device(args.device)
    budget = int(args.budget_mib * MIB) if args.budget_mib else (
        prof.gpu_budget(cuda_budget(dev)) if dev.type == "cuda" else prof.cpu_mem_budget)
    results = {}
    for trunk in args.trunk:
        # the baseline keeps its fp32 stream: the stream option is the reversible trunks'
        stream = args.stream if TRUNKS[trunk].backward != "stored" else "fp32"
        cfg = prof.model_config(trunk, args.n_layer, stream=stream, loss_head=args.loss_head,
                                pos_chunk=args.pos_chunk, batch_slice=args.batch_slice,
                                split_heads=args.split_heads)
        r = find_max_batch(cfg, budget, args.device, args.precision, start=args.start, guess=args.guess,
                           max_probes=prof.search_probes)
        results[trunk] = r.to_dict() | {"config": cfg.to_dict()}
        line = r.memory_line()
        per_seq = "" if line is None else f", {line.bytes_per_sequence / MIB:.2f} MiB per sequence"
        print(f"{trunk}: max batch {r.batch} under {r.budget_bytes / MIB:.0f} MiB "
              f"({len(r.probes)} probes{per_seq}; {stream} stream, {args.loss_head} head, pos_chunk "
              f"{run_label(cfg)['pos_chunk']}); each step runs {r.slicing.describe()} ({r.slicing.reason})")
    if "residual" in results and len(results) > 1:
        for t, r in results.items():
            if t != "residual":
                print(f"{t} / residual max batch: {r['batch'] / results['residual']['batch']:.2f}x")
    if args.json:
        write_json(args.json, results)
    return 0
