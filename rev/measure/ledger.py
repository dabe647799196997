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

`step_memory` predicts a whole step without running it, from the same parts plus what the blocks keep, one
recomputed slice's working set, the loss head's chunk and the weights with their AdamW state (`static_bytes`):
within a few percent of measured steps (tests/measure/test_ledger.py), so `python -m rev plan` can size the max-batch
searches on a machine without the GPU they are for.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from ..core.integrators import get_integrator
from ..core.model import GPT, TRUNKS, GPTConfig
from ..core.streams import get_stream
from ..base.units import MIB



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


def _moments(cfg: GPTConfig, dtype: torch.dtype) -> tuple[dict[str, float], dict[str, float]]:
    """(end of forward, backward): the bytes per sequence the model names at each moment."""
    stream = get_stream(cfg.stream).at_least(dtype)
    tokens, n = cfg.seq_len, _streams(cfg)
    act = _size(dtype)
    state = n * tokens * cfg.d_model * _size(stream.dtype)
    forward_end = {"state": state, "final norm": tokens * cfg.d_model * act,
                   "loss head": tokens * _head_bytes(cfg, act)}
    backward = {"state": state, "state gradients": n * tokens * cfg.d_model * _size(stream.carrier_dtype)}
    return forward_end, backward


def _size(dtype: torch.dtype) -> int:
    return torch.empty(0, dtype=dtype).element_size()


def sequence_ledger(cfg: GPTConfig, measured: float, fixed: float | None = None,
                    dtype: torch.dtype = torch.float32) -> Ledger:
    """The ledger of one sequence's memory in a training step of `cfg` (activations in `dtype`), against the
    `measured` bytes per sequence (a `MemoryLine` slope) and, if given, the `fixed` working set."""
    forward_end, backward = _moments(cfg, dtype)
    if sum(backward.values()) >= sum(forward_end.values()):
        return Ledger(backward, "backward", measured, fixed)
    return Ledger(forward_end, "end of forward", measured, fixed)


# --- a whole step, predicted without running it ---------------------------------------------------------------
#
# The parts above are what a sequence costs once the trunk keeps nothing per layer. A whole step adds what the
# blocks keep (every layer's, for a stored trunk), the working set of the one block evaluation a recomputing
# trunk's backward holds at a time, the loss head's chunk of logits, and the weights with their gradients and AdamW
# moments. Bytes per token that one block evaluation keeps for its backward, for a pre-LN block under autocast
# to `a`-byte activations on an `r`-byte residual stream (a = r = 4 in fp32; a = 2, r = 4 under fp16 or bf16
# autocast, where LayerNorm runs in fp32 and the linear layers keep their input's cast copy):
#   F (attention): LN1 input (r) and its two statistics, the cast LN1 output (a), q, k, v (3a), the attention
#                  output (a) and its log-sum-exp per head (fp32)
#   G (MLP):       LN2 input (r) and its two statistics, the cast LN2 output (a), the first linear's output and
#                  the GELU's (4a each)
# so in fp32 a stored block keeps 16 d numbers per token, as notebook 07b's exercise counts. A component's
# backward also holds the gradients of the largest of these while it runs: `RECOMPUTE_FACTOR` times the
# component's bytes, measured 1.33-1.46 on a CPU (tests/measure/test_ledger.py checks the whole prediction
# against measured steps).
RECOMPUTE_FACTOR = 1.5


def block_bytes(cfg: GPTConfig, dtype: torch.dtype = torch.float32) -> dict[str, float]:
    """Bytes per token that one evaluation of each block component ("F", "G" and the whole block "f") keeps for
    its backward, with activations in `dtype` (the autocast type, or the model's)."""
    a, r, d = _size(dtype), max(_size(dtype), 4), cfg.d_model
    stats = 2 * 4
    parts = {"F": (r + 5 * a) * d + stats + 4 * cfg.n_head, "G": (r + 9 * a) * d + stats}
    return parts | {"f": parts["F"] + parts["G"]}


def static_bytes(cfg: GPTConfig) -> int:
    """Parameters + gradients + two Adam moments, in fp32: the floor any batch needs."""
    return 16 * _n_params(cfg.vocab_size, cfg.seq_len, cfg.n_layer, cfg.n_head, cfg.d_model)


@functools.lru_cache(maxsize=256)
def _n_params(vocab_size: int, seq_len: int, n_layer: int, n_head: int, d_model: int) -> int:
    """Parameters of a GPT of this geometry (every trunk has the same blocks), counted on the meta device once."""
    with torch.device("meta"):
        return GPT(GPTConfig(vocab_size=vocab_size, seq_len=seq_len, n_layer=n_layer, n_head=n_head,
                             d_model=d_model)).n_params()


@dataclass(frozen=True)
class StepMemory:
    """A training step's memory at one batch, predicted by the ledger: bytes."""

    batch: int
    static: int          # parameters, their gradients and AdamW's two moments, fp32
    forward_end: float   # what the end of forward adds: the activations kept for backward and the head's chunk
    backward: float      # what the trunk's backward adds: the state, its gradients and one evaluation's working set

    @property
    def peak(self) -> float:
        return self.static + max(self.forward_end, self.backward)

    @property
    def moment(self) -> str:
        return "backward" if self.backward >= self.forward_end else "end of forward"


def step_memory(cfg: GPTConfig, batch: int, dtype: torch.dtype = torch.float32) -> StepMemory:
    """The ledger's prediction of a training step of `cfg` at `batch` with activations in `dtype` (fp16 under a
    T4's autocast), sliced as `cfg.sequences_per_slice` says (0: the whole batch at once)."""
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    spec = TRUNKS[cfg.trunk]
    tokens = batch * cfg.seq_len
    forward_end, backward = (sum(m.values()) * batch for m in _moments(cfg, dtype))
    # the end of forward also holds what the sequence ledger leaves to its remainder: the final LayerNorm's output
    # in fp32 whatever the autocast type (LayerNorm runs in fp32 under autocast), and a reversible trunk's output,
    # a tensor of its own beside the state its backward starts from (measured: 20 d bytes per token at the t4
    # geometry, where the parts above name 16 d)
    forward_end += tokens * cfg.d_model * (4 - min(4, _size(dtype)))
    if spec.backward == "reversible":
        forward_end += tokens * cfg.d_model * 4
    blocks = block_bytes(cfg, dtype)
    head = _head_working_set(cfg, tokens, dtype)
    if spec.backward == "stored":            # every layer's block activations, alive at the end of forward
        return StepMemory(batch, static_bytes(cfg), forward_end + tokens * cfg.n_layer * blocks["f"] + head,
                          backward)
    # a recomputing trunk holds one component's evaluation at a time, over one slice of the batch
    evaluated = max(blocks[c] for c in get_integrator(spec.integrator).components)
    slice_tokens = min(cfg.sequences_per_slice or batch, batch) * cfg.seq_len
    working = RECOMPUTE_FACTOR * evaluated * slice_tokens
    if spec.backward == "checkpoint":        # each layer's input, kept for its recompute
        forward_end += tokens * cfg.n_layer * cfg.d_model * 4
        backward += tokens * cfg.n_layer * cfg.d_model * 4
    return StepMemory(batch, static_bytes(cfg), forward_end + head, backward + working)


def _head_working_set(cfg: GPTConfig, tokens: int, dtype: torch.dtype) -> float:
    """What the loss head holds while it runs, beyond what it keeps per token: one chunk's logits in fp32, with their
    half-precision matmul output under autocast (the weight's gradient it sums is the gradient `static` counts)."""
    rows = min(cfg.loss_chunk, tokens) if cfg.loss_head != "plain" else tokens
    return rows * cfg.vocab_size * (4 + (_size(dtype) if _size(dtype) < 4 else 0))


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
