"""A small GPT whose trunk is chosen by name.

Pre-LN blocks: F = attention(LN1(x)), G = MLP(LN2(x)). A single-stream integrator sees the whole block
f(x) = F(x) + G(x + F(x)), so `residual` at h=1 is exactly the usual pre-LN GPT block. Learned positions,
tied input/output embeddings, and a loss head (rev.core.loss, default: fused chunked linear-cross-entropy)
so the (tokens x vocab) logits never sit in memory at once.

Trunks:
  residual       forward Euler, activations stored (the baseline)
  residual_ckpt  forward Euler, each block under torch.utils.checkpoint (what people use instead)
  midpoint       leapfrog, stored       | midpoint_rev  leapfrog, memory-free reversible backward
  reveuler       reversible Euler, stored | reveuler_rev  reversible Euler, memory-free backward
The non-`_rev` twins run the same integrator under ordinary autograd; they are the references the
reversible gradients are checked against.
"""
from __future__ import annotations

import math
import numbers
import operator
from functools import partial
from typing import Callable, NamedTuple
from dataclasses import asdict, dataclass
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from .integrators import Integrator, get_integrator
from .loss import LOSS_HEADS, cross_entropy
from .pieces import sliced
from .reversible import reversible_trunk
from .streams import STREAMS, Stream, get_stream

class TrunkSpec(NamedTuple):
    """What a trunk name means: which integrator, how backward gets its activations, and its default step h."""

    integrator: str
    backward: str      # "stored" (autograd keeps activations) | "checkpoint" (per block) | "reversible" (rebuilt)
    h: float           # leapfrog adds 2h f per layer, so its h=0.5 weighs each block as a residual block's h=1 does


TRUNKS: dict[str, TrunkSpec] = {
    "residual": TrunkSpec("euler", "stored", 1.0),
    "residual_ckpt": TrunkSpec("euler", "checkpoint", 1.0),
    "midpoint": TrunkSpec("leapfrog", "stored", 0.5),
    "midpoint_rev": TrunkSpec("leapfrog", "reversible", 0.5),
    "reveuler": TrunkSpec("reveuler", "stored", 1.0),
    "reveuler_rev": TrunkSpec("reveuler", "reversible", 1.0),
}


def trunk_spec(trunk: str) -> TrunkSpec:
    """The spec of the trunk called `trunk`, or a clear error naming the choices."""
    if trunk not in TRUNKS:
        raise ValueError(f"unknown trunk {trunk!r}: choose one of {', '.join(TRUNKS)}")
    return TRUNKS[trunk]


def is_reversible(trunk: str) -> bool:
    """True for trunks whose backward rebuilds activations by inversion (the memory-free ones)."""
    return trunk_spec(trunk).backward == "reversible"


def stored_twin(trunk: str) -> str:
    """The trunk running the same integrator under ordinary autograd (stored activations): the reference a
    reversible trunk's gradients are checked against. A stored trunk is its own twin."""
    spec = trunk_spec(trunk)
    return next(name for name, s in TRUNKS.items() if s.integrator == spec.integrator and s.backward == "stored")


def reversible_twin(trunk: str) -> str:
    """The memory-free trunk running the same integrator as `trunk`; an error where the integrator has none."""
    spec = trunk_spec(trunk)
    for name, s in TRUNKS.items():
        if s.integrator == spec.integrator and s.backward == "reversible":
            return name
    raise ValueError(f"trunk {trunk!r} runs {spec.integrator!r}, which has no exact inverse: no reversible twin")


@dataclass
class GPTConfig:
    vocab_size: int = 8192
    seq_len: int = 512
    n_layer: int = 10
    n_head: int = 6
    d_model: int = 384
    trunk: str = "residual"
    h: float | None = None          # None: the trunk's own step (TRUNKS[trunk].h), resolved on construction
    stream: str = "fp32"
    dropout: float = 0.0
    keep: tuple[int, ...] = ()      # layer boundaries whose state a reversible trunk stores (see reversible.py)
    loss_chunk: int = 1024          # rows of logits materialised at once by the loss
    loss_head: str = "fused"        # "fused" | "chunked" (checkpointed chunks) | "plain" (see rev.core.loss)
    # positions per chunk for the MLP in the reversible backward and residual_ckpt's recompute (see Block):
    # "auto" picks `auto_pos_chunk(seq_len, split_heads)`, 0 or None evaluates the whole sequence at once
    pos_chunk: int | str | None = "auto"
    # reversible trunks: attention evaluated and backpropagated head by head too (about 3 fewer (T x d) tensors
    # per sequence; off by default because its CPU speed was erratic at small batches: `python -m rev bench
    # --split-heads` measures both)
    split_heads: bool = False
    # sequences per batch slice in the reversible trunks and residual_ckpt: the trunk runs (forward, recompute
    # and backward) over slices of the batch, so one block evaluation holds one slice's activations, whatever
    # the batch. "auto" is the policy of `rev.measure.slicing`: on a CPU `auto_batch_slice(seq_len)` (what a model
    # built from this config runs), on a GPU what the budget needs, set by training and the max-batch search;
    # 0 or None runs the whole batch at once
    batch_slice: int | str | None = "auto"

    def __post_init__(self) -> None:
        if self.h is None:
            self.h = trunk_spec(self.trunk).h
        else:
            trunk_spec(self.trunk)
        if self.loss_head not in LOSS_HEADS:
            raise ValueError(f"unknown loss_head {self.loss_head!r}: choose one of {', '.join(LOSS_HEADS)}")
        if self.stream not in STREAMS:
            raise ValueError(f"unknown stream {self.stream!r}: choose one of {', '.join(STREAMS)}")
        if not (isinstance(self.h, numbers.Real) and math.isfinite(self.h) and self.h > 0):
            raise ValueError(f"step size h must be a finite number > 0 (got {self.h!r}); try h=1.0 for residual, "
                             f"0.5 for midpoint")
        for name in ("vocab_size", "seq_len", "n_layer", "n_head", "d_model", "loss_chunk"):
            setattr(self, name, whole_count(name, getattr(self, name), 1))
        for name, unit in (("pos_chunk", "positions per chunk; 0 turns it off"),
                           ("batch_slice", "sequences per slice; 0 runs the whole batch at once")):
            value = getattr(self, name)
            if value not in ("auto", None):
                try:
                    setattr(self, name, whole_count(name, value, 0))
                except (TypeError, ValueError):
                    raise ValueError(f"{name} must be 'auto', None or an integer >= 0 ({unit}), got {value!r}") \
                        from None
        if self.d_model % self.n_head:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_head={self.n_head}: "
                             f"pick n_head dividing d_model (e.g. {_divisor_near(self.d_model, self.n_head)})")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.dropout > 0 and self.reversible:
            raise ValueError(f"trunk {self.trunk!r} rebuilds activations in backward, so dropout would need its "
                             f"random masks replayed exactly; set dropout=0 or use a stored trunk")
        self.keep = tuple(sorted(set(whole_count("keep", k, 0) for k in self.keep)))
        if any(not 0 < k < self.n_layer for k in self.keep):
            raise ValueError(f"keep boundaries must lie in 1..n_layer-1 = 1..{self.n_layer - 1}, got {self.keep}")

    @property
    def reversible(self) -> bool:
        return is_reversible(self.trunk)

    @property
    def positions_per_chunk(self) -> int:
        """`pos_chunk` resolved: the chunk size in positions, 0 for off. "auto" with batch slices on chunks only
        sequences longer than a slice's rows (`SLICE_ROWS`): a slice already bounds the MLP's working set, and
        smaller pieces cost speed (`python -m rev bench --pos-chunks auto 0 --batch-slices auto 0`)."""
        if self.pos_chunk == "auto":
            if self.sequences_per_slice:
                return SLICE_ROWS if self.seq_len > SLICE_ROWS else 0
            return auto_pos_chunk(self.seq_len, self.split_heads)
        return int(self.pos_chunk or 0)

    @property
    def sequences_per_slice(self) -> int:
        """`batch_slice` resolved: sequences per slice, 0 for the whole batch."""
        if self.batch_slice == "auto":
            return auto_batch_slice(self.seq_len)
        return int(self.batch_slice or 0)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["keep"] = list(self.keep)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "GPTConfig":
        """The config `to_dict` wrote (a run's config.json or checkpoint): the one way back from a saved model."""
        return cls(**d)


MIN_POS_CHUNK = 64


def auto_pos_chunk(seq_len: int, split_heads: bool = False) -> int:
    """The default MLP chunk when the whole batch runs at once (`batch_slice=0`), from a memory target: the MLP's
    four hidden tensors alive in a chunk's backward (c x 4d each: the first linear's output, the GELU's, and their
    gradients) should hold no more than what the attention holds in its own backward anyway. Evaluated whole, that
    is four (T x d) tensors (queries, keys, values, output), so c <= T / 4: smaller chunks lower nothing and cost
    speed. Head by head (`split_heads`) it is about one (T x d) tensor, so c <= T / 16. At least `MIN_POS_CHUNK`
    positions, so each chunk's matmuls keep enough rows; 0 (off) when that is the whole sequence.
    `python -m rev bench --pos-chunks 0 64 128 --batch-slices 0 --split-heads --per-sequence` measures the choice."""
    c = max(MIN_POS_CHUNK, seq_len // (16 if split_heads else 4))
    return c if c < seq_len else 0


SLICE_ROWS = 1024


def auto_batch_slice(seq_len: int) -> int:
    """The default batch slice: enough sequences for `SLICE_ROWS` tokens (at least one), so each slice's matmuls
    have rows enough for full speed while one slice's activations stay a fixed few MiB: the memory a reversible
    step adds per sequence is then the state alone (`python -m rev bench --per-sequence` shows the ledger)."""
    return max(1, SLICE_ROWS // seq_len)


def whole_count(name: str, value: object, minimum: int) -> int:
    """`value` as the whole number a count field holds: an int (numpy's too) as it is, a float that is a whole number
    converted (counts read back from a results table or a JSON file are floats: 4.0 layers is 4), anything else
    refused with a TypeError (not a number) or a ValueError (4.5, nan, below `minimum`) that says what to give."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a whole number >= {minimum}, got {value!r} ({type(value).__name__})")
    try:
        count = operator.index(value)
    except TypeError:   # a float: whole, or refused
        if not math.isfinite(value) or value != int(value):
            raise ValueError(f"{name} must be a whole number >= {minimum}, got {value!r}: a count has no "
                             f"fraction") from None
        count = int(value)
    if count < minimum:
        raise ValueError(f"{name} must be a positive integer, got {value}" if minimum == 1 else
                         f"{name} must be an integer >= {minimum}, got {value}")
    return count


def _divisor_near(n: int, k: int) -> int:
    return min((d for d in range(1, n + 1) if n % d == 0), key=lambda d: abs(d - k))


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_head, self.dropout = cfg.n_head, cfg.dropout
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return F.dropout(self.proj(y), self.dropout, self.training)

    def head(self, x: Tensor, i: int) -> Tensor:
        """Head i's share of `forward(x)` without dropout: the output projection sums over heads, so
        `sum(head(x, i) for i in range(n_head))` is `forward(x)` up to rounding, with one head's activations."""
        C, hd = x.size(-1), x.size(-1) // self.n_head
        w = self.qkv.weight.view(3, self.n_head, hd, C)[:, i].reshape(3 * hd, C)
        q, k, v = (t.unsqueeze(-3) for t in F.linear(x, w).split(hd, dim=-1))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).squeeze(-3)
        return F.linear(y, self.proj.weight[:, i * hd:(i + 1) * hd])


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.fc = nn.Linear(cfg.d_model, 4 * cfg.d_model, bias=False)
        self.proj = nn.Linear(4 * cfg.d_model, cfg.d_model, bias=False)
        self.dropout = cfg.dropout

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(self.proj(F.gelu(self.fc(x))), self.dropout, self.training)


class Block(nn.Module):
    """One layer's vector field: components F (attention), G (MLP) and f (the whole pre-LN block).

    G acts on each position alone, and the block says so in `position_wise`: the reversible trunk
    (rev.core.reversible) then evaluates and backpropagates G over chunks of `pos_chunk` positions, so only
    one chunk's (c x 4d) hidden activations are alive. With `checkpoint_chunks` (residual_ckpt) G does the same
    inside f by running each chunk under its own checkpoint, nested in the block's: the block's recompute then
    keeps one chunk's MLP activations too, at the price of a third MLP forward.
    """

    position_wise = ("G",)

    def parts(self, name: str) -> list[Callable[[Tensor], Tensor]] | None:
        """F as a sum over heads with `split_heads` (the reversible trunk evaluates and backpropagates one
        head at a time); None: evaluate the component whole."""
        if name != "F" or not self.split_heads:
            return None
        return [partial(self._head, i) for i in range(self.attn.n_head)]

    def _head(self, i: int, x: Tensor) -> Tensor:
        return self.attn.head(self.ln1(x), i)

    def __init__(self, cfg: GPTConfig, pos_chunk: int = 0, checkpoint_chunks: bool = False):
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(cfg.d_model), CausalSelfAttention(cfg)
        self.ln2, self.mlp = nn.LayerNorm(cfg.d_model), MLP(cfg)
        self.pos_chunk, self.checkpoint_chunks = pos_chunk, checkpoint_chunks
        self.split_heads = cfg.split_heads

    def F(self, x: Tensor) -> Tensor:
        return self.attn(self.ln1(x))

    def G(self, x: Tensor) -> Tensor:
        if self.checkpoint_chunks and 0 < self.pos_chunk < x.size(-2) and torch.is_grad_enabled():
            parts = x.split(self.pos_chunk, dim=-2)
            return torch.cat([checkpoint(self._mlp, p, use_reentrant=False) for p in parts], dim=-2)
        return self._mlp(x)

    def _mlp(self, x: Tensor) -> Tensor:
        return self.mlp(self.ln2(x))

    def f(self, x: Tensor) -> Tensor:
        a = self.F(x)
        return a + self.G(x + a)

    def component(self, name: str):
        return {"f": self.f, "F": self.F, "G": self.G}[name]


class Trunk(nn.Module):
    """The stack of blocks, run by an integrator on a stream, with activations stored, checkpointed or
    rebuilt in backward."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        integrator_name, self.mode, _ = TRUNKS[cfg.trunk]
        self.integrator: Integrator = get_integrator(integrator_name)
        self.stream: Stream = get_stream(cfg.stream)
        self.h, self.keep = cfg.h, cfg.keep
        recomputed = self.mode != "stored"  # stored trunks are the baseline: neither chunked nor sliced
        chunk = cfg.positions_per_chunk if recomputed else 0
        self.batch_slice = cfg.sequences_per_slice if recomputed else 0
        self.blocks = nn.ModuleList(Block(cfg, chunk, self.mode == "checkpoint") for _ in range(cfg.n_layer))

    def forward(self, x: Tensor) -> Tensor:
        if self.mode == "reversible":
            return reversible_trunk(self.integrator, self.blocks, x, self.h, self.stream, self.keep, self.batch_slice)
        if self.mode == "checkpoint" and torch.is_grad_enabled():
            # slice by slice through every layer: a block's recompute in backward then holds one slice's activations
            return sliced(self._layers, x, self.batch_slice)
        return self._layers(x)

    def _layers(self, x: Tensor) -> Tensor:
        st, dtype = self.stream.at_least(x.dtype), x.dtype  # a .double() model sums in float64 on 'fp32' too
        state = tuple(st.encode_diff(s) for s in self.integrator.init(x))
        for layer, block in enumerate(self.blocks):
            if self.mode == "checkpoint" and torch.is_grad_enabled():
                state = checkpoint(self._step, block, layer, dtype, *state, use_reentrant=False)
            else:
                state = self._step(block, layer, dtype, *state)
        return self.integrator.output(tuple(s.to(dtype) for s in state))

    def _step(self, block: Block, layer: int, dtype: torch.dtype, *state: Tensor) -> tuple[Tensor, ...]:
        call = lambda name, s: block.component(name)(s.to(dtype))  # noqa: E731
        return self.integrator.step(state, call, self.h, layer, self.stream.add_diff)


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.wpe = nn.Embedding(cfg.seq_len, cfg.d_model)
        self.trunk = Trunk(cfg)
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("proj.weight"):  # scaled so the stream's variance does not grow with depth
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def n_params(self, non_embedding: bool = False) -> int:
        n = sum(p.numel() for p in self.parameters())
        return n - self.wpe.weight.numel() if non_embedding else n

    def check_input(self, idx: Tensor, targets: Tensor | None = None) -> None:
        """Shape and range checks. The range check runs only on CPU tensors: on a GPU it would force a
        sync every step, and `rev.data.tokens.load` already checks the data's vocabulary against the model's."""
        if idx.dim() != 2 or idx.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"idx must be an integer tensor of shape (batch, time), got {tuple(idx.shape)} "
                             f"{idx.dtype}")
        if idx.size(1) > self.cfg.seq_len:
            raise ValueError(f"sequence length {idx.size(1)} exceeds the model's seq_len={self.cfg.seq_len}: "
                             f"crop the input to the last {self.cfg.seq_len} tokens or build a longer model")
        if targets is not None and targets.shape != idx.shape:
            raise ValueError(f"targets shape {tuple(targets.shape)} != idx shape {tuple(idx.shape)}")
        if idx.device.type == "cpu" and idx.numel():
            lo, hi = int(idx.min()), int(idx.max())
            if lo < 0 or hi >= self.cfg.vocab_size:
                raise ValueError(f"token ids must lie in [0, {self.cfg.vocab_size}) but range over [{lo}, {hi}]: "
                                 f"the data's tokenizer does not match this model's vocab_size")

    def embed(self, idx: Tensor) -> Tensor:
        pos = torch.arange(idx.size(1), device=idx.device)
        return self.wte(idx) + self.wpe(pos)

    def hidden(self, idx: Tensor) -> Tensor:
        """Final-layer-normed hidden states (batch, time, d_model)."""
        return self.ln_f(self.trunk(self.embed(idx)))

    def forward(self, idx: Tensor, targets: Tensor | None = None) -> Tensor:
        self.check_input(idx, targets)
        h = self.hidden(idx)
        if targets is None:
            return h @ self.wte.weight.t()
        return cross_entropy(h, self.wte.weight, targets, self.cfg.loss_head, self.cfg.loss_chunk)

    @torch.no_grad()
    def generate(self, idx: Tensor, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
                 generator: torch.Generator | None = None) -> Tensor:
        """Sample `max_new_tokens` tokens after `idx` (batch, time)."""
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.check_input(idx[:, -self.cfg.seq_len:])  # sampled ids stay in range, so once is enough
        for _ in range(max_new_tokens):
            ctx = idx[:, -self.cfg.seq_len:]
            logits = (self.hidden(ctx)[:, -1, :] @ self.wte.weight.t()).float() / temperature
            if top_k is not None:
                kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, [-1]]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            nxt = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)
            idx = torch.cat([idx, nxt], dim=1)
        return idx
