"""Where a training step's memory per sequence goes: a model of its parts beside the measured figure.

Serves notebook 06 (the stacked bar per trunk) and `python -m rev bench --per-sequence`. Each extra sequence
adds tensors of T x d numbers; which of them are alive at the step's peak depends on the trunk. Two moments
compete for the peak:

* the end of forward: the trunk's state (what its backward starts from), the final LayerNorm's saved input
  and what the loss head keeps per token (the fused head: the gradient of its input, computed in forward);
* the trunk's backward: the state and the state's gradients (the head and the norm are done by then).

A reversible trunk's backward keeps nothing else per sequence once its batch is sliced (`GPTConfig.batch_slice`):
one slice's working set is a fixed cost, whatever the batch. Whatever the measurement holds beyond the larger
of the two moments is the remainder: for a stored trunk, the activations autograd keeps for every layer.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..core.integrators import get_integrator
from ..core.model import TRUNKS, GPTConfig
from ..core.streams import get_stream

MIB = 2 ** 20


def _streams(cfg: GPTConfig) -> int:
    """How many (T x d) streams the trunk's state holds: 2 for leapfrog and reversible Euler, 1 for Euler."""
    probe = torch.empty(1, 1, device="meta")
    return len(get_integrator(TRUNKS[cfg.trunk].integrator).init(probe))


def _head_bytes(cfg: GPTConfig, act: int) -> int:
    """Bytes per token the loss head keeps from forward to backward."""
    if cfg.loss_head == "fused":
        return cfg.d_model * 4          # the gradient of its input, fp32
    if cfg.loss_head == "chunked":
        return cfg.d_model * act        # its input, for the chunks' recompute
    return cfg.vocab_size * 4 * 2       # plain: the logits and their softmax


@dataclass(frozen=True)
class Ledger:
    """Bytes per sequence: the parts the model names, at the larger of the two moments, and the remainder."""

    parts: dict[str, float]      # part -> bytes per sequence, in the order a bar stacks them
    moment: str                  # "backward" | "end of forward": where the model puts the peak
    measured: float              # the measured slope of the peak, bytes per sequence
    fixed: float | None = None   # measured bytes above parameters, gradients and AdamW that do not grow with the batch

    @property
    def modelled(self) -> float:
        return sum(self.parts.values())

    @property
    def remainder(self) -> float:
        return self.measured - self.modelled

    def as_row(self) -> dict[str, float]:
        """MiB per sequence by part, the remainder and the measurement (for a table or a stacked bar)."""
        row = {k: v / MIB for k, v in self.parts.items()}
        row["remainder"] = self.remainder / MIB
        row["measured"] = self.measured / MIB
        if self.fixed is not None:
            row["fixed working set"] = self.fixed / MIB
        return row


def sequence_ledger(cfg: GPTConfig, measured: float, fixed: float | None = None,
                    dtype: torch.dtype = torch.float32) -> Ledger:
    """The ledger of one sequence's memory in a training step of `cfg` (activations in `dtype`), against the
    `measured` bytes per sequence (a `MemoryLine` slope) and, if given, the `fixed` working set."""
    stream = get_stream(cfg.stream).at_least(dtype)
    tokens, n = cfg.seq_len, _streams(cfg)
    act = torch.empty(0, dtype=dtype).element_size()
    state_b = torch.empty(0, dtype=stream.dtype).element_size()
    grad_b = torch.empty(0, dtype=stream.carrier_dtype).element_size()
    state = n * tokens * cfg.d_model * state_b
    forward_end = {"state": state, "final norm": tokens * cfg.d_model * act,
                   "loss head": tokens * _head_bytes(cfg, act)}
    backward = {"state": state, "state gradients": n * tokens * cfg.d_model * grad_b}
    if sum(backward.values()) >= sum(forward_end.values()):
        return Ledger(backward, "backward", measured, fixed)
    return Ledger(forward_end, "end of forward", measured, fixed)


def format_ledger(rows: dict[str, dict]) -> list[str]:
    """Lines of the ledger table: one row per run (`Ledger.as_row()` with its `moment`), MiB per sequence."""
    names = ["state", "state gradients", "final norm", "loss head"]
    lines = ["memory per sequence, MiB: the model's parts at its peak moment, then what the measurement holds beyond "
             "them; fixed: the measured working set that does not grow with the batch",
             f"{'run':<34}{'moment':<16}" + "".join(f"{n:>16}" for n in names)
             + f"{'remainder':>11}{'measured':>10}{'fixed':>8}"]
    for name, row in rows.items():
        fixed = row.get("fixed working set")
        lines.append(f"{name:<34}{row['moment']:<16}" + "".join(
            f"{row[n]:>16.2f}" if n in row else f"{'-':>16}" for n in names)
            + f"{row['remainder']:>11.2f}{row['measured']:>10.2f}" + (f"{fixed:>8.0f}" if fixed is not None else f"{'-':>8}"))
    return lines
