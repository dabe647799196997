"""How many slices a recomputed trunk's step runs its batch in: one policy, by device and memory budget.

A recomputed trunk (the reversible ones and `residual_ckpt`) runs its forward, recompute and backward over slices
of the batch (`GPTConfig.batch_slice`), so one block evaluation holds one slice's activations whatever the batch;
the memory a sequence adds is then its state alone. Slices cost time where the hardware needs large matmuls to be
busy, and buy nothing once the whole batch fits. So `batch_slice="auto"` means:

* CPU: slices of `SLICE_ROWS` tokens (`auto_batch_slice`), as before: a CPU's cores are already busy at 1,024-row
  matmuls, and the slices measured free there (`python -m rev bench --batch-slices auto 0`).
* CUDA with a budget: the whole batch when its step fits; where it does not, the fewest slices that fit, found by
  the same measured probes as the max-batch search (`measured_slices`, `rev.measure.probe`: a real step at the
  batch, its peak against the budget). The fewest slices are the largest ones, so a GPU runs the largest matmuls
  memory allows; a plan whose slices fall below `GPU_MIN_ROWS` rows says that memory forced it there.
* CUDA without a budget: the whole batch.

An explicit `batch_slice` (a number, or 0 for the whole batch) is kept as given. Slicing changes where memory
goes and how long a step takes, not the step's result (gradients equal to rounding: `tests/measure/test_slicing.py`),
so a run's settings keep "auto" and its summary records the plan it ran (`SlicePlan.to_dict`).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass
from typing import Callable

import torch

from ..core.model import SLICE_ROWS, TRUNKS, GPTConfig, auto_batch_slice
from .probe import cuda_budget, measure_config
from .search import largest_fitting

# Rows (tokens) per slice below which a GPU's matmuls leave units idle: a (rows x d) by (d x 4d) product at the
# assignment geometry (d = 384) in 128 x 128 tiles makes rows / 128 x 12 tiles, ~1,500 at 16K rows (tens of waves
# over a T4's 40 SMs); at 1,024 rows 96 tiles, a few waves with Python and launch overhead per slice and layer.
GPU_MIN_ROWS = 16_384


class SliceError(ValueError):
    """The batch does not fit the budget in any slicing: lower the batch."""


@dataclass(frozen=True)
class SlicePlan:
    """What one step runs: `slices` slices of at most `sequences` sequences (one slice of `batch`: whole)."""

    batch: int
    sequences: int
    slices: int
    reason: str

    @property
    def batch_slice(self) -> int:
        """As `GPTConfig.batch_slice` takes it: sequences per slice (the batch itself for one piece, not 0, which
        would also turn on the whole-batch position chunks the probes did not measure)."""
        return self.sequences

    def describe(self) -> str:
        if self.slices == 1:
            return f"the whole batch of {self.batch} in one piece"
        return f"{self.slices} slices of {self.sequences} sequence{'s' if self.sequences > 1 else ''}"

    def to_dict(self) -> dict:
        return asdict(self) | {"described": self.describe()}


def recomputes(cfg: GPTConfig) -> bool:
    """Whether `cfg`'s trunk rebuilds activations in backward (and so can slice its batch)."""
    return TRUNKS[cfg.trunk].backward != "stored"


def planned_by_probes(cfg: GPTConfig, device_type: str) -> bool:
    """Whether `cfg`'s slicing on `device_type` is the GPU's measured plan (an "auto" slice of a recomputed trunk on
    CUDA), rather than the CPU rule or a slice given by hand."""
    return device_type == "cuda" and cfg.batch_slice == "auto" and recomputes(cfg)


def _fixed(batch: int, sequences: int, reason: str) -> SlicePlan:
    """Slices of `sequences` and a shorter last one, as `rev.core.pieces.sliced` cuts them."""
    sequences = max(1, min(sequences, batch))
    return SlicePlan(batch, sequences, math.ceil(batch / sequences), reason)


def _balanced(batch: int, sequences: int, reason: str) -> SlicePlan:
    """As few slices of at most `sequences` as `batch` needs, made as equal as they can be (never larger, so a
    slice size that fits still fits)."""
    slices = _fixed(batch, sequences, reason).slices
    return SlicePlan(batch, math.ceil(batch / slices), slices, reason)


def plan_slices(cfg: GPTConfig, batch: int, device_type: str,
                fits: Callable[[int], bool] | None = None) -> SlicePlan:
    """The slicing of `cfg`'s step at `batch` on a `device_type` ("cpu", "cuda", ...) device. `fits(s)` says
    whether the step at `batch` in slices of `s` sequences fits the memory budget (CUDA: measured probes); without
    it a GPU runs the whole batch. Raises `SliceError` when not even slices of one sequence fit."""
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    if not recomputes(cfg):
        return SlicePlan(batch, batch, 1, "a stored trunk keeps every layer's activations: nothing to slice")
    if cfg.batch_slice != "auto":
        return _fixed(batch, cfg.sequences_per_slice or batch, "set by batch_slice")
    if device_type != "cuda":
        return _fixed(batch, auto_batch_slice(cfg.seq_len),
                         f"{device_type.upper()}: slices of {SLICE_ROWS:,} tokens, the default off a GPU")
    if fits is None:
        return _fixed(batch, batch, "a GPU with no memory budget given: the whole batch")
    largest = largest_fitting(fits, batch, batch)
    if largest == 0:
        raise SliceError(f"batch {batch} does not fit the memory budget even in slices of one sequence: lower the "
                         f"batch (`python -m rev maxbatch` finds the largest that fits)")
    if largest == batch:
        return _fixed(batch, batch, "the whole batch fits the budget")
    plan = _balanced(batch, largest, "the fewest slices that fit the budget")
    if plan.sequences * cfg.seq_len < GPU_MIN_ROWS:
        plan = SlicePlan(plan.batch, plan.sequences, plan.slices,
                         f"{plan.reason}; memory forces slices below {GPU_MIN_ROWS:,} rows, where a GPU's matmuls "
                         f"leave units idle")
    return plan


def as_planned(cfg: GPTConfig, plan: SlicePlan, device_type: str) -> GPTConfig:
    """The model config a step runs under `plan`: on a GPU "auto" becomes the plan's slice; elsewhere "auto"
    already is the plan (the CPU rule), and an explicit slice is kept."""
    if planned_by_probes(cfg, device_type):
        return dataclasses.replace(cfg, batch_slice=plan.batch_slice)
    return cfg




def measured_slices(cfg: GPTConfig, batch: int, device: torch.device, dtype, budget: int | None = None) -> SlicePlan:
    """`plan_slices` for `cfg` at `batch` on `device`; on CUDA each candidate slicing is a
    measured probe (a real step, its peak against `budget`, default `cuda_budget`)."""
    if not planned_by_probes(cfg, device.type):
        return plan_slices(cfg, batch, device.type)
    budget = cuda_budget(device) if budget is None else budget
    fits = lambda s: measure_config(  # noqa: E731
        dataclasses.replace(cfg, batch_slice=s), batch, device, dtype, budget)[1]
    return plan_slices(cfg, batch, device.type, fits)


def resolved(cfg: GPTConfig, batch: int, device: torch.device, dtype,
             budget: int | None = None) -> tuple[GPTConfig, SlicePlan]:
    """The model config a step of `cfg` at `batch` runs on `device`, and the plan it follows (`measured_slices`,
    then `as_planned`): the one way from a config that says "auto" to what runs, for every entry point (a training
    run, the screening's stream probes)."""
    plan = measured_slices(cfg, batch, device, dtype, budget)
    return as_planned(cfg, plan, device.type), plan
