"""`python -m rev gpucheck [--json F] [--notebooks]`: the CUDA path of `rev`, checked on a real GPU, in one table.

The CPU suite reaches these promises through doubles (tests/fake_cuda.py: `torch.cuda` patched so its allocator
counters follow the CPU allocator and "cuda" tensors are made on the CPU; fp16 autocast with the CPU's GradScaler);
here they meet CUDA's kernels and allocator. Each row is one check (pass / FAIL / skip) or one figure (info):

* gradients of the memory-free trunks against their stored twins in fp32, bf16 (capability >= 8) and fp16 with
  a GradScaler step; again with position chunks, attention head by head, kept states and batch slices at T=256;
* the fused loss head against the plain one under fp16 with a scaled loss (relative gradient error vs fp32);
* a GradScaler step that overflows is skipped, the scale halves, training resumes; the fixed-point stream
  rebuilds the trunk's input bit for bit on the device;
* memory: activations flat in depth, a step's peak independent of other models held;
* the leak regression: the max-batch search's own probe (`probe.measure_config`) made to run out of memory in the
  middle of forward and as backward begins, for a stored, a checkpointed and both reversible trunks, must be a
  miss and free everything it allocated; the search with the allocator capped and no byte budget of its own
  stops at a real out-of-memory and returns a batch;
* a run cut at a checkpoint and resumed against the same run uninterrupted (bit-exact, or how far apart);
* `bench` at batch 8 at the assignment geometry (info);
* a T4 emulated on this GPU: the allocator capped 15 GiB (`T4_CAP`) above what the process holds (a few MiB of
  workspaces and whatever earlier rows left, at most 16 MiB each), fp16 autocast with a GradScaler, the
  assignment geometry: the max batch of residual, midpoint_rev and reveuler_rev; `train()` for a few steps at
  each batch found (peak within the search's budget, loss finite, the scaler's scale sane, evaluation works);
  tokens/s of each trunk at its own max batch, one step of each per round so load cannot favour one (the
  assignment's question: does the larger batch pay for the recompute on a GPU?). Everything in these rows runs in
  the precision its batch was found in: nothing is measured in fp32 at a batch found under fp16;
* a 200-step run of the `t4` profile for residual and the reversible trunk, which must end below the corpus's
  unigram loss (the best a model that ignores context can do) by UNIGRAM_MARGIN;
* with `--notebooks`, notebooks 04-06 of the `smoke` profile run headless on the GPU with the allocator capped
  (`REV_GPU_MEMORY_GIB`, `NOTEBOOK_CAP_GIB`); off by default, since kernel start-ups and the notebooks' own
  searches and seed replicas are not yet timed on a GPU.

Memory: a warm-up first allocates what CUDA keeps for the rest of the process (cuBLAS workspaces), then every row
must leave the allocator within LEFT_LIMIT (16 MiB) of where it found it, after a garbage collection and
`empty_cache`, or it fails whatever it measured (the `left MiB` column): on the first run on an H200, one failed
probe's 1,137 MiB stayed allocated and every later row failed for want of memory.

Time: estimated at under 8 minutes on an H100, not yet timed on one (every row prints its seconds, the header the
total). The estimate counts the work: a step of the assignment model costs ~150 MFLOP a token (~195 where the trunk
is rebuilt), so at a guessed 150 TFLOP/s an H100 runs ~0.6-0.8M tokens/s. The small rows take seconds each (about a
minute together, CUDA's start-up included). What costs is the T4 emulation: at ~3 MiB a sequence a reversible
trunk's max batch is ~4,500 sequences of 512 tokens, ~2.3M tokens and ~4 s a step; each of its searches makes ~10
such probes (~40 s), its training 3 steps and an evaluation (~20 s), the timing 6 rounds of all three trunks
(~50 s): about 3 minutes in all. The two 200-step runs are 3.3M tokens each (~15 s together; the synthetic corpus
they fall back to takes ~5 s to prepare). `--notebooks` adds three kernels' start-ups and smoke's runs, not
estimated.

Everything reuses the rooms below (bench, maxbatch, memory, the training loop); this module only chooses sizes and verdicts, and
each row function takes the device, so the suite runs every row on the CUDA double (`Sizes.tiny`,
tests/training/test_gpucheck.py). Without CUDA it checks nothing and says so; `--device cpu` runs the rows that have
a CPU double at the tiny sizes and skips the others.

The training rows use the prepared TinyStories corpus when --data-dir holds it; otherwise a small synthetic
corpus (preparing 55M TinyStories tokens does not fit the time), and the table says which was used.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
import weakref
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator

import torch

from ..measure.bench import bench_trunks
from ..measure.probe import make_training_step
from ..base.cli import CommandFailed, UserError, file_arg, folder_arg, positive_int
from ..data.corpus import profile_folder
from ..base.device import MEMORY_CAP_ENV, amp_dtype, autocast, describe, pick_device
from ..base.files import read_json, write_json
from ..measure.ledger import static_bytes
from ..measure.maxbatch import MaxBatch, find_max_batch
from ..measure.probe import measure_config
from ..base.profiles import PROFILES, get_profile
from ..measure.slicing import as_planned
from ..measure.stats import median_interval, quartiles
from .device_checks import (CHECKED_TRUNKS, Row, fixed_recon_row, flat_memory_row, grad_rows, head_row, layout_row,
                            relative_memory_row, resume_row, scaler_skip_row)
from .loop import TrainConfig, train
from ..core.model import MLP, GPTConfig
from ..core.reversible import RECON_LIMIT
from ..base.units import GIB, MIB

ASSIGNMENT = "t4"                   # the profile with the assignment geometry (d=384, L=10, T=512, 8K vocab)
T4_TRUNKS = CHECKED_TRUNKS                # the T4 emulation's trunks: those the twin rows check
LEAK_TRUNKS = ("residual", "residual_ckpt", "midpoint_rev", "reveuler_rev")   # stored, checkpointed, reversible
T4_CAP = 15 * GIB                 # what the T4 emulation lets the allocator hold (a Colab T4 has 15 GiB)
LEFT_LIMIT = 16 * MIB             # what a row may leave allocated after it (CUDA's own small caches)
NOTEBOOKS = ("04_run1_baseline", "05_run2_reversible_same_batch", "06_run3_reversible_max_batch")
NOTEBOOK_CAP_GIB = 2.0              # the smoke models are tiny: 2 GiB keeps notebook 06's searches short
SYNTHETIC_TOKENS = 2_000_000        # fallback corpus: enough for 200 steps at about two epochs
# A trained model must beat the best context-free predictor (each token at its training frequency) by this many
# nats per token: ln V is beaten by counting tokens alone, the unigram loss only by reading the context.
UNIGRAM_MARGIN = 0.25
SCALE_RANGE = (1.0, 2.0 ** 16)      # a GradScaler's scale after a few steps: from its start (2^16) halved, never 0


SMALL = dict(vocab_size=256, seq_len=64, n_layer=4, n_head=2, d_model=64)   # sizes for a CPU's doubles


def _size(n: float) -> str:
    """Bytes in GiB from 1 GiB up, else in MiB."""
    return f"{n / GIB:.3g} GiB" if n >= GIB else f"{n / MIB:,.1f} MiB"


@dataclass(frozen=True)
class Sizes:
    """How much each row measures: the defaults are a GPU's (the assignment geometry of the `t4` profile, a 15 GiB
    cap); `Sizes.tiny()` is for the doubles on a CPU (the `smoke` geometry, caps of a few MiB)."""
    geometry: str = ASSIGNMENT              # the profile whose model the leak, OOM, bench and T4 rows build
    head: tuple[int, int, int] = (8192, 8192, 256)   # rows, vocabulary, width of the loss-head check
    flat: dict | None = None                # geometry of the flat-in-depth check (None: its own default)
    flat_batch: int = 16
    other_bytes: int = 256 * MIB          # another model's tensors held beside a measured step
    leak_batch: int = 8
    oom_cap: int = 3 * 2**29                # the OOM search's room under the allocator's cap (`capped`)
    oom_limit: int = 4096
    t4_cap: int = T4_CAP                    # the T4 emulation's room under the cap
    t4_limit: int = 8192                    # the T4 searches' largest batch
    t4_steps: int = 3                       # training steps at each batch found (the second one's peak is measured)
    rounds: int = 5                         # interleaved timing rounds
    train_profile: str | None = None        # None: `t4` on its corpus or a synthetic one (`check_profile`)
    train_steps: int = 200
    resume_steps: int = 24
    left_limit: int = LEFT_LIMIT            # what a row may leave allocated

    @classmethod
    def tiny(cls) -> "Sizes":
        return cls(geometry="smoke", head=(1024, 2048, 64), flat=SMALL, flat_batch=4, other_bytes=16 * MIB,
                   leak_batch=2, oom_cap=6 * MIB, oom_limit=32, t4_cap=12 * MIB, t4_limit=32, rounds=3,
                   train_profile="smoke", train_steps=20, resume_steps=12, left_limit=512 * 2**10)


# --- the checks ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def capped(device: torch.device, room_bytes: int) -> Iterator[None]:
    """The allocator of CUDA `device` capped at what it holds now plus `room_bytes` (never above the device) inside,
    the cap it had restored after, whatever happens inside: a cap left on makes every later check fail for want of
    memory. The cap takes a device *index* (`torch.device("cuda")` has none; a real H200 refused it)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    total = torch.cuda.get_device_properties(index).total_memory
    get_fraction = getattr(torch.cuda, "get_per_process_memory_fraction", None)
    before = 1.0 if get_fraction is None else get_fraction(index)
    torch.cuda.empty_cache()  # memory cached by earlier checks would count against the cap
    cap = torch.cuda.memory_allocated(index) + room_bytes
    torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total), index)
    try:
        yield
    finally:
        torch.cuda.set_per_process_memory_fraction(before, index)
        torch.cuda.empty_cache()


def _run_out(device: torch.device) -> Callable[[], None]:
    """Something that runs out of memory as the device does: on CUDA an allocation larger than the whole GPU (the
    allocator raises torch.OutOfMemoryError); on a CPU, which would try to give it, the error raised directly."""
    if device.type != "cuda":
        def raise_it() -> None:
            raise torch.OutOfMemoryError("CUDA out of memory (raised on the CPU)")
        return raise_it
    index = device.index if device.index is not None else torch.cuda.current_device()
    total = torch.cuda.get_device_properties(index).total_memory
    return lambda: torch.empty(total, dtype=torch.uint8, device=device)


def failing_probe(cfg: GPTConfig, batch: int, device: torch.device, dtype, where: str) -> dict:
    """One probe of the max-batch search (`probe.measure_config`, what `find_max_batch` calls) that runs out of
    memory `where`: "forward" at the MLP call of the middle layer (the (L//2+1)-th MLP call), "backward" as the
    first MLP's backward begins (a reversible trunk's: in its recompute). Global module hooks do it, so the probe
    is the search's own, model and all. Returns whether it was a miss that really ran out, how many module outputs are
    still alive afterwards (weakrefs), and the bytes it left allocated on CUDA (None elsewhere)."""
    run_out, outputs, seen = _run_out(device), [], {"mlp": 0, "ran_out": False}

    def keep(module, args, out) -> None:
        for t in (out if isinstance(out, tuple) else (out,)):
            if isinstance(t, torch.Tensor):
                outputs.append(weakref.ref(t))
        if where == "forward" and isinstance(module, MLP) and not seen["ran_out"]:
            seen["mlp"] += 1
            if seen["mlp"] == cfg.n_layer // 2 + 1:
                seen["ran_out"] = True
                run_out()

    def in_backward(module, grad_output) -> None:
        if isinstance(module, MLP) and not seen["ran_out"]:
            seen["ran_out"] = True
            run_out()

    hooks = [torch.nn.modules.module.register_module_forward_hook(keep)]
    if where == "backward":
        hooks.append(torch.nn.modules.module.register_module_full_backward_pre_hook(in_backward))
    before = _allocated(device)
    try:
        with warnings.catch_warnings():   # a global backward hook also sees the embeddings, whose inputs are ids
            warnings.filterwarnings("ignore", message="Full backward hook is firing")
            result = measure_config(cfg, batch, device, dtype, 1 << 60)
    finally:
        for h in hooks:
            h.remove()
    left = None if before is None else _allocated(device) - before
    return {"missed": result == (None, False) and seen["ran_out"], "alive": sum(r() is not None for r in outputs),
            "outputs": len(outputs), "left": left}


def probe_leak_row(device: torch.device, sizes: Sizes) -> Row:
    """`failing_probe` in forward and in backward for each of LEAK_TRUNKS at the assignment geometry: every one a
    miss, none of its module outputs alive after, the allocator within `sizes.left_limit` of where it started."""
    dtype = amp_dtype(device) if device.type == "cuda" else None
    prof, cases = get_profile(sizes.geometry), {}
    for trunk in LEAK_TRUNKS:
        for where in ("forward", "backward"):
            cases[trunk, where] = failing_probe(prof.model_config(trunk), sizes.leak_batch, device, dtype, where)
    bad = [f"{t} {w}" for (t, w), c in cases.items()
           if not c["missed"] or c["alive"] or not c["outputs"] or (c["left"] or 0) > sizes.left_limit]
    worst = max((c["left"] for c in cases.values() if c["left"] is not None), default=None)
    return Row("a probe out of memory frees everything", "FAIL" if bad else "pass",
               f"{len(cases)} probes ({', '.join(LEAK_TRUNKS)}; forward and backward) at batch {sizes.leak_batch}: "
               + (f"failed: {', '.join(bad)}" if bad else "each a miss, no activation alive after")
               + ("" if worst is None else f"; at most {worst / MIB:.1f} MiB left allocated after one"), 0.0)


def oom_row(device: torch.device, sizes: Sizes) -> Row:
    """The max-batch search with the allocator capped `sizes.oom_cap` above what it holds and no byte budget of its
    own: only a real CUDA out-of-memory can stop it. Passes when a probe hit the OOM, the search still returned a
    batch, and the failed probes' tensors were freed."""
    total = torch.cuda.get_device_properties(device).total_memory
    cfg = get_profile(sizes.geometry).model_config("residual")
    before = _allocated(device)
    with capped(device, sizes.oom_cap):
        res = find_max_batch(cfg, total, str(device), start=4, limit=sizes.oom_limit, progress=False, check_free=False)
    leaked = _allocated(device) - before
    ooms = sum(p.peak_bytes is None for p in res.probes)
    ok = ooms >= 1 and res.batch >= 1 and leaked <= sizes.left_limit
    return Row("max-batch search catches a real OOM", "pass" if ok else "FAIL",
               f"cap {_size(sizes.oom_cap)}: batch {res.batch}, {ooms} OOM probe(s) of {len(res.probes)}, "
               f"{leaked / MIB:.1f} MiB left allocated after", 0.0)


def bench_rows(device: torch.device, sizes: Sizes) -> list[Row]:
    prof = get_profile(sizes.geometry)
    geometry = {k: getattr(prof, k) for k in ("vocab_size", "seq_len", "n_layer", "n_head", "d_model")}
    res = bench_trunks(geometry, 8, trunks=("residual", "residual_ckpt", "midpoint_rev", "reveuler_rev"), steps=5,
                       device=str(device), progress=False)
    return [Row(f"bench {r['trunk']} (batch 8)", "info",
                f"peak {r['peak_bytes'] / MIB:.0f} MiB ({r.get('peak_ratio', math.nan):.2f}x res), "
                f"{r['tokens_per_s']:,.0f} tok/s ({r.get('speed_ratio', math.nan):.2f}x res)", 0.0)
            for r in res["runs"]]


@dataclass
class T4Emulation:
    """A Colab T4 on this GPU: the allocator capped `sizes.t4_cap` above what it holds (`capped`), fp16 autocast with
    a GradScaler, the model of `sizes.geometry`. Each trunk's max batch is searched once (`max_batch_row`) and the
    rows after it use it."""
    device: torch.device
    data_dir: Path
    sizes: Sizes
    found: dict[str, MaxBatch] = field(default_factory=dict)

    def _config(self, trunk: str) -> GPTConfig:
        return get_profile(self.sizes.geometry).model_config(trunk)

    def _found(self, trunk: str) -> MaxBatch:
        if trunk not in self.found:
            raise ValueError(f"no max batch for {trunk}: its search row failed")
        return self.found[trunk]

    def max_batch_row(self, trunk: str) -> Row:
        """The largest batch whose fp16 step fits 90% of what the cap leaves (`cuda_budget`), searched from two
        measured steps and the line through them (`find_max_batch(guess=True)`)."""
        prof = get_profile(self.sizes.geometry)
        with capped(self.device, self.sizes.t4_cap):
            r = find_max_batch(self._config(trunk), None, str(self.device), precision="fp16", start=prof.batch_size,
                               limit=self.sizes.t4_limit, progress=False, guess=True)
        self.found[trunk] = r
        line, base = r.memory_line(), self.found.get("residual")
        ratio = f" ({r.batch / base.batch:.2f}x residual)" if base is not None and trunk != "residual" else ""
        return Row(f"T4 max batch {trunk}", "info",
                   f"{r.batch}{ratio}{' (the search limit)' if r.batch == self.sizes.t4_limit else ''} under "
                   f"{_size(r.budget_bytes)} of the {_size(self.sizes.t4_cap)} cap, {len(r.probes)} "
                   f"probes ({sum(p.peak_bytes is None for p in r.probes)} out of memory)"
                   + ("" if line is None else f", {line.bytes_per_sequence / MIB:.2f} MiB a sequence")
                   + f"; each step {r.slicing.describe()}", 0.0)

    def train_row(self, trunk: str) -> Row:
        """`train()` for `sizes.t4_steps` steps at the batch found, sliced as the search planned, under the cap in
        fp16 with a GradScaler: its measured peak within the search's budget, the loss finite, the scaler's scale
        in SCALE_RANGE, the evaluation's loss finite (and a reversible trunk still rebuilding its input)."""
        r, prof = self._found(trunk), get_profile(self.sizes.geometry)
        profile, corpus = check_profile(self.data_dir, self.sizes.geometry)
        steps = self.sizes.t4_steps
        with tempfile.TemporaryDirectory() as tmp, capped(self.device, self.sizes.t4_cap):
            out = Path(tmp) / trunk
            s = train(TrainConfig(profile=profile, trunk=trunk, out_dir=out, data_dir=self.data_dir,
                                  batch_size=r.batch, batch_slice=r.slicing.batch_slice,
                                  train_tokens=steps * r.batch * prof.seq_len, eval_every=steps, eval_tokens=r.batch * prof.seq_len,
                                  ckpt_every=steps, precision="fp16", device=str(self.device), progress=False))
            scale = torch.load(out / "ckpt.pt", map_location="cpu", weights_only=True)["scaler"]["scale"]
        peak, loss, val, recon = (s["peak_memory_bytes"], s["final_train_loss"], s["final_val_loss"],
                                  s["reconstruction_error"])
        checks = {"peak over the budget": peak is None or peak > r.budget_bytes,
                  "loss not finite": not math.isfinite(loss), "evaluation not finite": not math.isfinite(val),
                  "scale outside 2^0..2^16": not SCALE_RANGE[0] <= scale <= SCALE_RANGE[1],
                  "input not rebuilt": recon is not None and not recon <= RECON_LIMIT}
        failed = [k for k, bad in checks.items() if bad]
        return Row(f"T4 train {trunk} at batch {r.batch}", "FAIL" if failed else "pass",
                   f"{s['steps']} fp16 steps, {r.slicing.describe()}: peak {_size(peak or 0)} of "
                   f"{_size(r.budget_bytes)}, loss {loss:.2f}, val {val:.2f}, scale "
                   + (f"2^{math.log2(scale):.0f}" if scale > 0 else "0")
                   + ("" if recon is None else f", recon. error {recon:.1e}") + f"; {corpus}"
                   + (f" -- {', '.join(failed)}" if failed else ""), 0.0)

    def speed_row(self) -> Row:
        """Tokens/s of each of T4_TRUNKS at its own max batch, fp16 as it was found, from `sizes.rounds` rounds of one
        step of each (after one untimed step each); the median with the quartiles over rounds, and each trunk's speed
        over residual's in the same round with the bootstrap interval of the median of those ratios. The cap grows
        by the models' static memory, so each step has what the T4 would give it while the others stay parked."""
        found = {t: self._found(t) for t in T4_TRUNKS}
        prof = get_profile(self.sizes.geometry)
        cfgs = {t: as_planned(self._config(t), r.slicing, self.device.type) for t, r in found.items()}
        parked = sum(static_bytes(c) for c in cfgs.values())
        with capped(self.device, self.sizes.t4_cap + parked):
            times = _interleaved({t: make_training_step(cfgs[t], found[t].batch, self.device, torch.float16)[2]
                                  for t in found}, self.sizes.rounds, self.device)
        return Row("T4 tokens/s at each max batch", "info",
                   speed_figures(times, {t: r.batch for t, r in found.items()}, prof.seq_len), 0.0)


def _interleaved(steps: dict[str, Callable[[], None]], rounds: int, device: torch.device) -> dict[str, list[float]]:
    """Seconds of each step in `rounds` rounds of one call of each (after one untimed call each: the optimizer's
    state and the allocator's blocks exist from there on). The steps, and their models, go when this returns."""
    times: dict[str, list[float]] = {t: [] for t in steps}
    for step in steps.values():
        step()
    for _ in range(rounds):
        for t, step in steps.items():
            torch.cuda.synchronize(device)
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize(device)
            times[t].append(time.perf_counter() - t0)
    return times


def speed_figures(times: dict[str, list[float]], batches: dict[str, int], seq_len: int) -> str:
    """Each trunk's tokens/s from its step seconds in interleaved rounds (`times[trunk][round]`) at `batches[trunk]`:
    the median with the quartiles over rounds, and for each trunk but residual its speed over residual's round by
    round, the median ratio with its bootstrap interval (`stats.median_interval`)."""
    speed = {t: [batches[t] * seq_len / s for s in ts] for t, ts in times.items()}
    parts = []
    for t, v in speed.items():
        lo, hi = quartiles(v)
        text = f"{t} {statistics.median(v):,.0f} [{lo:,.0f}-{hi:,.0f}] at {batches[t]}"
        if t != "residual":
            ratios = [a / b for a, b in zip(v, speed["residual"])]
            rlo, rhi = median_interval(ratios)
            text += f": {statistics.median(ratios):.2f}x residual (95% interval {rlo:.2f}-{rhi:.2f})"
        parts.append(text)
    return f"median [quartiles] of {len(next(iter(times.values())))} interleaved rounds: " + "; ".join(parts)


def check_profile(data_dir: Path, name: str = ASSIGNMENT) -> tuple[str, str]:
    """(profile name, corpus used) for the training rows: profile `name` on its prepared corpus (TinyStories, or
    the stand-in notebook 00 made when it was unreachable) or on its own synthetic corpus, which training prepares;
    else `name` on a small synthetic corpus, registered as profile `<name>-synthetic` for this process only."""
    prof = get_profile(name)
    folder = profile_folder(prof, data_dir)
    if (folder / "meta.json").exists() or prof.data_source == "synthetic":
        return prof.name, folder.name
    synthetic = f"{prof.name}-synthetic"
    PROFILES[synthetic] = prof.replace(name=synthetic, data_source="synthetic", data_name=f"synthetic-{prof.name}check",
                                       data_tokens=SYNTHETIC_TOKENS)
    return synthetic, f"synthetic (no prepared {prof.data_name} in {data_dir})"


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
                            f"{s['tokens_per_s']:,.0f} tok/s, peak {s['peak_memory_bytes'] / MIB:.0f} MiB"
                            + ("" if recon is None else f", recon. error {recon:.1e} (limit {RECON_LIMIT:g})")
                            + f"; {corpus}", time.perf_counter() - t0))
    return rows


@contextlib.contextmanager
def _environment(name: str, value: str) -> Iterator[None]:
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def notebooks_row(device: torch.device, cap_gib: float = NOTEBOOK_CAP_GIB, run: Callable | None = None) -> Row:
    """Notebooks 04-06 of the `smoke` profile executed headless (`run`, by default `python -m rev workbook`)
    in a fresh results and data folder, their kernels' allocator capped at `cap_gib` GiB through REV_GPU_MEMORY_GIB
    (the kernels inherit it; `pick_device` applies it): each notebook must run to its end, every run it trained
    report a CUDA device, and notebook 06's max-batch budgets lie within the cap."""
    run = run or _workbook_command
    with tempfile.TemporaryDirectory() as tmp, _environment(MEMORY_CAP_ENV, f"{cap_gib:g}"):
        results = Path(tmp) / "results"
        done = run("smoke", out=Path(tmp) / "build", results=results, data_dir=Path(tmp) / "data",
                   only=list(NOTEBOOKS), progress=False)
        runs = [read_json(p) for p in sorted((results / "smoke").rglob("summary.json"))]
        searches = read_json(results / "smoke" / "maxbatch.json") if (results / "smoke" / "maxbatch.json").exists() \
            else {}
    budgets = [v["budget_bytes"] for v in searches.values() if isinstance(v, dict) and "budget_bytes" in v]
    on_cuda = [r for r in runs if "(cuda)" in r.get("device", "")]
    cap = cap_gib * GIB
    ok = len(done) == len(NOTEBOOKS) and runs and len(on_cuda) == len(runs) and budgets and max(budgets) <= cap
    return Row(f"notebooks {NOTEBOOKS[0][:2]}-{NOTEBOOKS[-1][:2]} (smoke) under a {cap_gib:g} GiB cap",
               "pass" if ok else "FAIL",
               f"{len(done)} of {len(NOTEBOOKS)} notebooks ran; {len(on_cuda)} of {len(runs)} runs on CUDA; "
               + (f"max-batch budgets up to {max(budgets) / MIB:,.0f} MiB" if budgets
                  else "no max-batch search found"),
               0.0)


def _workbook_command(profile: str, out: Path, results: Path, data_dir: Path, only: list[str],
                      progress: bool = False) -> list[str]:
    """`python -m rev workbook` in a process of its own (the editions stand above training, so this module runs
    their command rather than importing it); the notebooks it executed to their end."""
    cmd = [sys.executable, "-m", "rev", "workbook", "--profile", profile, "--out", str(out), "--results",
           str(results), "--data-dir", str(data_dir), "--only", *only]
    subprocess.run(cmd, capture_output=not progress, check=False)
    return sorted(p.stem for p in (out / "notebooks").glob("*.ipynb") if p.stem in only)


# --- the command ----------------------------------------------------------------------------------------------

def _allocated(device: torch.device) -> int | None:
    """Bytes the CUDA allocator holds for live tensors after a garbage collection and `empty_cache` (None on a CPU,
    whose allocator keeps no such count)."""
    if device.type != "cuda":
        return None
    gc.collect()
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    return torch.cuda.memory_allocated(device)


def _warm_up(device: torch.device) -> None:
    """Matrix products with and without a bias in each autocast type the rows use, forward and backward: cuBLAS and
    cuBLASLt allocate their workspaces through the caching allocator on first use and keep them for the process,
    which would count against whichever row came first."""
    if device.type != "cuda":
        return
    major, _ = torch.cuda.get_device_capability(device)
    for dtype in (None, torch.float16) + ((torch.bfloat16,) if major >= 8 else ()):
        a = torch.randn(64, 64, device=device, requires_grad=True)
        with autocast(device, dtype):
            out = a @ a + torch.nn.functional.linear(a, a, a[0])
        out.float().sum().backward()


def _timed(fn: Callable[[], Row | list[Row]], name: str, device: torch.device, left_limit: int = LEFT_LIMIT
           ) -> list[Row]:
    """Run one check; its time goes into the row, an exception becomes a FAIL row so the table still prints, and
    what it left allocated goes into `left_mib` (over `left_limit` fails the row, whatever it measured)."""
    before = _allocated(device)
    t0 = time.perf_counter()
    try:
        out = fn()
    except Exception as e:  # noqa: BLE001 -- the table must say what broke and go on
        out = Row(name, "FAIL", f"{type(e).__name__}: {str(e).splitlines()[0][:150] if str(e) else ''}",
                  time.perf_counter() - t0)
    rows = out if isinstance(out, list) else [out]
    if all(r.seconds == 0.0 for r in rows):
        rows[0].seconds = time.perf_counter() - t0
    if before is not None:
        left = _allocated(device) - before
        for r in rows:
            r.left_mib = left / MIB
            if left > left_limit:
                r.verdict = "FAIL"
                r.figure += f"; {_size(left)} left allocated (limit {_size(left_limit)})"
    return rows


def gpucheck(device: torch.device, data_dir: Path, reversible: str = "reveuler_rev", steps: int | None = None,
             sizes: Sizes | None = None, notebooks: bool = False) -> list[Row]:
    """Every row on a CUDA `device`, at `sizes` (a GPU's by default). On a CPU, the rows that have a CPU double run
    at `Sizes.tiny()` (fp16 autocast with the CPU's GradScaler stands in for the T4's, a raised OutOfMemoryError for
    a real one) and the others skip. `steps` overrides the training rows' steps; `notebooks` adds notebooks 04-06."""
    cuda = device.type == "cuda"
    sizes = sizes or (Sizes() if cuda else Sizes.tiny())
    if steps is not None:
        sizes = replace(sizes, train_steps=steps)
    dtype = amp_dtype(device) if cuda else torch.float16   # the precision training uses here (a T4's on a CPU)
    t4 = T4Emulation(device, data_dir, sizes)
    capped_only = "needs a CUDA GPU: the allocator's cap"
    checks = [
        (lambda: grad_rows(device), "gradients", True),
        (lambda: layout_row(device, dtype), "gradients with chunks, head split, kept states", True),
        (lambda: head_row(device, *sizes.head), "fused head vs plain, fp16", True),
        (lambda: scaler_skip_row(device), "GradScaler skips an overflowing step", True),
        (lambda: fixed_recon_row(device, dtype), "fixed stream rebuilds bit for bit", True),
        (lambda: flat_memory_row(device, sizes.flat, sizes.flat_batch), "memory flat in depth", True),
        (lambda: relative_memory_row(device, sizes.other_bytes), "peak memory is relative to the step", True),
        (lambda: probe_leak_row(device, sizes), "a probe out of memory frees everything", True),
        (lambda: oom_row(device, sizes), "max-batch search catches a real OOM", capped_only),
        (lambda: resume_row(device, data_dir, steps=sizes.resume_steps), "resume vs uninterrupted", True),
        (lambda: bench_rows(device, sizes), "bench", False),
        *[(lambda t=t: t4.max_batch_row(t), f"T4 max batch {t}", capped_only) for t in T4_TRUNKS],
        *[(lambda t=t: t4.train_row(t), f"T4 train {t}", capped_only) for t in T4_TRUNKS],
        (t4.speed_row, "T4 tokens/s at each max batch", capped_only),
        (lambda: train_rows(device, data_dir, reversible, sizes.train_steps, sizes.train_profile), "train", False),
    ]
    _warm_up(device)
    rows = [row for fn, name, on_cpu in checks
            for row in (_timed(fn, name, device, sizes.left_limit) if cuda or on_cpu is True else
                        [Row(name, "skip", on_cpu or "needs a CUDA GPU", 0.0)])]
    name = "notebooks 04-06 (smoke) under a capped budget"
    if not cuda:
        rows.append(Row(name, "skip", "needs a CUDA GPU: the notebooks' kernels run on it", 0.0))
    elif notebooks:
        rows += _timed(lambda: notebooks_row(device), name, device, sizes.left_limit)
    else:
        rows.append(Row(name, "skip", "not asked for: --notebooks runs it (not yet timed on a GPU)", 0.0))
    return rows


def format_table(rows: list[Row], header: str) -> str:
    width = max(len(r.check) for r in rows)
    left = lambda r: "" if r.left_mib is None else f"{r.left_mib:.1f}"  # noqa: E731
    lines = [header, f"{'check':<{width}}  {'verdict':<7}  {'s':>5}  {'left MiB':>8}  figure"]
    lines += [f"{r.check:<{width}}  {r.verdict:<7}  {r.seconds:>5.0f}  {left(r):>8}  {r.figure}" for r in rows]
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cuda",
                   help="the CUDA device to check (default cuda); cpu runs the rows that have a CPU double")
    p.add_argument("--data-dir", type=folder_arg, default=Path("data"),
                   help="where a prepared TinyStories corpus may be (else a small synthetic one is made here)")
    p.add_argument("--reversible", default="reveuler_rev", choices=["reveuler_rev", "midpoint_rev"],
                   help="the reversible trunk to train next to residual (the screening's default choice)")
    p.add_argument("--steps", type=positive_int, help="steps of each learning run (default 200 on a GPU)")
    p.add_argument("--notebooks", action="store_true",
                   help=f"also run notebooks 04-06 of the smoke profile on the GPU, capped at {NOTEBOOK_CAP_GIB:g} GiB")
    p.add_argument("--json", type=file_arg, help="write the table here as JSON")


def run_cli(args: argparse.Namespace) -> int:
    if args.device != "cpu" and not torch.cuda.is_available():
        raise CommandFailed("gpucheck needs a CUDA GPU and none is visible (torch.cuda.is_available() is "
                            f"False; torch {torch.__version__}): nothing was checked. On Colab: Runtime > Change "
                            f"runtime type > T4 GPU. `--device cpu` runs the rows that have a CPU double.")
    if os.environ.get(MEMORY_CAP_ENV):
        raise UserError(f"{MEMORY_CAP_ENV} is set ({os.environ[MEMORY_CAP_ENV]!r}): gpucheck sets the "
                        f"allocator's caps its rows need itself (a T4's 15 GiB included); unset it and run again")
    device = pick_device(args.device)
    if device.type not in ("cuda", "cpu"):
        raise UserError(f"gpucheck checks a CUDA device (or the CPU doubles with --device cpu), not {device}")
    t0 = time.perf_counter()
    rows = gpucheck(device, args.data_dir, args.reversible, args.steps, notebooks=args.notebooks)
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
