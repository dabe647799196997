"""What a piece of the workbook's work costs: model FLOPs per token, and the wall time a Colab T4 is estimated to
take, from a stated throughput model (nothing here was measured on a T4).

FLOPs per token of a GPT (d = d_model, L layers, T positions, V vocabulary, tied head), counting a multiply-add as
two FLOPs:

* forward: 2 (12 L d^2 + V d) for the matmuls (12 d^2 per block: qkv 3 d^2, projection d^2, MLP 8 d^2; the head
  V d), plus 4 L T d for attention (queries times keys and weights times values over T keys; the causal mask
  halves what a kernel must do, which this leaves as headroom);
* training: three forwards (backward is about twice a forward, Kaplan et al. 2020's 6N), plus for a trunk that
  recomputes (the reversible ones, residual_ckpt) one more forward of the trunk's blocks in its backward.

The T4 estimate of a piece of work with `tokens` trained, `eval_tokens` evaluated and `steps` optimizer steps is

    seconds = (tokens x train FLOPs + eval_tokens x forward FLOPs) / T4_FLOPS
              + steps x (STEP_OVERHEAD_S + layers x slices x LAYER_OVERHEAD_S),

or, for work that runs on the CPU whatever the device, its steps times the seconds a step took on a CPU,

an estimate, labelled so wherever it is printed. Where the plan runs on a GPU it also times a few real steps of
each trunk (`measured_rates`) and prices the same work at the rates measured there.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from ...core.model import GPTConfig, trunk_spec

# The T4's effective rate on this workbook's steps: an assumption, not a measurement. Its fp16 tensor cores peak at
# 65 TFLOP/s (NVIDIA's datasheet), but a 70 W card holds its clock well below boost under a sustained load, and an
# eager PyTorch step of a d=384 GPT is far from the peak: 320 GB/s feeds the LayerNorms, GELUs, casts and AdamW,
# attention runs the memory-efficient kernel (flash attention needs capability 8.0; the T4 has 7.5), and small
# models reach 15-25% of a GPU's dense peak even on bigger cards. 4 TFLOP/s is about 6% of the peak: about 27,000
# tokens/s for the residual baseline, 20 minutes for 20M tokens. A T4 that runs `python -m rev plan` measures its
# own rate and replaces this figure.
T4_FLOPS = 4.0e12
STEP_OVERHEAD_S = 0.02      # per optimizer step: Python, the data batch, AdamW's kernels, the loss head's chunks
LAYER_OVERHEAD_S = 0.0008   # per layer and batch slice: ~60 kernel launches (forward, recompute, backward) at ~13 us


def matmul_macs(cfg: GPTConfig) -> float:
    """Multiply-adds per token of the blocks' and the tied head's matmuls."""
    return 12 * cfg.n_layer * cfg.d_model ** 2 + cfg.vocab_size * cfg.d_model


def forward_flops(cfg: GPTConfig) -> float:
    """FLOPs per token of a forward pass."""
    return 2 * matmul_macs(cfg) + 4 * cfg.n_layer * cfg.seq_len * cfg.d_model


def train_flops(cfg: GPTConfig) -> float:
    """FLOPs per token of a training step: forward, backward (twice a forward), and a recomputing trunk's second
    forward of its blocks."""
    blocks = 2 * 12 * cfg.n_layer * cfg.d_model ** 2 + 4 * cfg.n_layer * cfg.seq_len * cfg.d_model
    return 3 * forward_flops(cfg) + (blocks if trunk_spec(cfg.trunk).backward != "stored" else 0)


@dataclass(frozen=True)
class Work:
    """One piece of a notebook's work: a training run (`kind="run"`) or a measurement that trains or evaluates steps
    without being a run (`kind="measure"`: search probes, timed steps, gradient evaluations)."""

    notebook: str
    name: str             # the run's folder under results/<profile>/, or what is measured
    kind: str             # "run" | "measure"
    trunk: str            # a GPT trunk, or the model a companion chapter trains
    layers: int
    batch: int
    slices: int           # batch slices a step runs in (1: the whole batch)
    steps: int            # optimizer steps (measurements: forward-backward passes)
    seq_len: int
    flops_per_token: float
    eval_tokens: int = 0            # forward-only tokens (validation passes)
    forward_flops_per_token: float = 0.0
    cpu_step_s: float = 0.0         # > 0: the work runs on the CPU whatever the device (09b), this long a step

    @property
    def tokens(self) -> int:
        return self.steps * self.batch * self.seq_len

    @property
    def flops(self) -> float:
        return self.tokens * self.flops_per_token + self.eval_tokens * self.forward_flops_per_token

    @property
    def cpu_seconds(self) -> float:
        return self.steps * self.cpu_step_s

    def t4_seconds(self) -> float:
        """The estimate of the module docstring."""
        if self.cpu_step_s:
            return self.cpu_seconds
        overhead = self.steps * (STEP_OVERHEAD_S + self.layers * self.slices * LAYER_OVERHEAD_S)
        return self.flops / T4_FLOPS + overhead

    def as_row(self) -> dict:
        return {"notebook": self.notebook, "run": self.name, "kind": self.kind, "trunk": self.trunk,
                "layers": self.layers, "batch": self.batch, "slices": self.slices, "steps": self.steps,
                "tokens": self.tokens, "tflop": self.flops / 1e12, "t4_minutes": self.t4_seconds() / 60}


def gpt_work(notebook: str, name: str, kind: str, cfg: GPTConfig, batch: int, steps: int, slices: int = 1,
             evaluations: int = 0, eval_tokens: int = 0) -> Work:
    """A `Work` of `steps` training steps of `cfg` at `batch`, with `evaluations` validation passes of
    `eval_tokens` tokens each."""
    return Work(notebook, name, kind, cfg.trunk, cfg.n_layer, batch, slices, steps, cfg.seq_len, train_flops(cfg),
                evaluations * eval_tokens, forward_flops(cfg))


# --- on a GPU: the rates the trunks reach there ------------------------------------------------------------------

def measured_rates(configs: dict[str, GPTConfig], batch: int, device: torch.device, steps: int = 4) -> dict[str, float]:
    """FLOP/s each model of `configs` reaches in training steps at `batch` on `device` (in its autocast type): the
    median of `steps` timed steps after two untimed ones, times the step's FLOPs."""
    from ...measure.probe import make_training_step
    from ...base.device import amp_dtype

    dtype = amp_dtype(device)
    rates = {}
    for name, cfg in configs.items():
        model, opt, step = make_training_step(cfg, batch, device, dtype)
        times = []
        for i in range(steps + 2):
            _sync(device)
            t0 = time.perf_counter()
            step()
            _sync(device)
            if i >= 2:
                times.append(time.perf_counter() - t0)
        times.sort()
        rates[name] = batch * cfg.seq_len * train_flops(cfg) / times[len(times) // 2]
        del model, opt, step
    return rates


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
