"""Notebook 07b (where reversible training stands): memory models of the ways to train past activation memory.

Every model counts **bytes per token**, per layer where it grows with depth, for one GPT block of width h with a
heads and sequence length s. A stored pre-LN block keeps 16 values of width h per token for backward -- the
two LayerNorm inputs and outputs (4), Q, K, V (3), the attention output that feeds the projection (1), the MLP's
hidden activations before and after GELU (4 + 4) -- plus small per-token statistics (LayerNorm mean and rstd,
the fused attention's log-sum-exp). Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
Transformer Models") count the same 16 values at 2 bytes, add 1-byte dropout masks, and, without a fused
attention kernel, the (s x s) scores: 34 sbh + 5 as^2 b bytes per layer. `Geometry(flash=False, dropout=True,
act_bytes=2)` is their setting, and the model reproduces their formulas (tested).

Techniques (`TECHNIQUES`), each as bytes per token per layer plus a once-per-model working set:
  stored          everything above, per layer
  selective       Megatron's selective recomputation: the core attention (scores, softmax) is rebuilt, so the
                  (s x s) term and the log-sum-exp go
  ckpt_attention  the attention sub-layer (QKV, attention, projection) rebuilt: only its input is kept
  ckpt_block      per-block checkpointing ("full recomputation"): one stream value per layer, one block rebuilt
  reversible      nothing per layer: the final state (two streams) and one block rebuilt in backward
  offload         the stored activations, moved to host memory (device side: nothing per layer)
and parallel layouts that split what is left (`Plan`): tensor parallel t (with or without sequence parallel),
pipeline p with m micro-batches (1F1B: the first stage holds min(p, m) micro-batches of L/p layers), context
parallel c (the sequence split c ways, ring attention), and ZeRO stages 1-3 / FSDP for weights and optimizer.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from ...base.units import GIB

TECHNIQUES = ("stored", "selective", "ckpt_attention", "ckpt_block", "reversible", "offload")
LABELS = {"stored": "stored (all activations)", "selective": "selective recompute (core attention)",
          "ckpt_attention": "checkpoint attention sub-layer", "ckpt_block": "per-block checkpointing",
          "reversible": "reversible trunk", "offload": "activation offload (device side)"}


@dataclass(frozen=True)
class Geometry:
    """One GPT's shape and numerics as the memory models see them."""

    name: str
    n_layer: int
    d_model: int
    n_head: int
    seq_len: int
    micro_batch: int
    vocab_size: int
    act_bytes: int = 4       # bytes per stored activation value: 4 fp32, 2 bf16/fp16
    stream_bytes: int = 4    # bytes per value of a reversible trunk's stream (4 fp32, 8 fp64)
    flash: bool = True       # fused attention: keeps its output and log-sum-exp, never the (s x s) scores
    dropout: bool = False    # 1-byte masks after attention and MLP, and on the scores when they are stored

    @property
    def n_params(self) -> int:
        """Weights: 12 h^2 per block (QKV, projection, MLP), tied token embedding, learned positions."""
        h = self.d_model
        return 12 * h * h * self.n_layer + (self.vocab_size + self.seq_len) * h

    @property
    def tokens(self) -> int:
        return self.seq_len * self.micro_batch

    def describe(self) -> str:
        """The shape and numerics in one line for a reader (the dataclass repr reads as code)."""
        numerics = [f"{8 * self.act_bytes}-bit activations", f"{8 * self.stream_bytes}-bit reversible stream",
                    "fused attention" if self.flash else "no fused attention",
                    "dropout" if self.dropout else "no dropout"]
        return (f"{self.name}: {self.n_layer} layers, d_model {self.d_model:,}, {self.n_head} heads, sequence "
                f"{self.seq_len:,}, micro-batch {self.micro_batch}, vocabulary {self.vocab_size:,}; "
                + ", ".join(numerics))


@dataclass(frozen=True)
class Plan:
    """A parallel layout: degrees of tensor (t), pipeline (p, with m micro-batches), context (c) and data
    (dp, with a ZeRO stage) parallelism."""

    t: int = 1
    sp: bool = False
    p: int = 1
    m: int = 1
    c: int = 1
    dp: int = 1
    zero: int = 0

    def describe(self) -> str:
        parts = [f"TP{self.t}" + ("+SP" if self.sp else "")] if self.t > 1 else []
        parts += [f"PP{self.p}"] if self.p > 1 else []
        parts += [f"CP{self.c}"] if self.c > 1 else []
        parts += [f"ZeRO-{self.zero}/DP{self.dp}"] if self.zero else []
        return " ".join(parts) or "1 device"

    def in_words(self) -> str:
        """`describe` spelled out: each degree of parallelism by name (what `TP8+SP PP8` abbreviates)."""
        parts = [f"tensor parallel {self.t}" + (" with sequence parallelism" if self.sp else "")] if self.t > 1 else []
        parts += [f"pipeline parallel {self.p} over {self.m} micro-batches"] if self.p > 1 else []
        parts += [f"context parallel {self.c}"] if self.c > 1 else []
        zero = f" with ZeRO stage {self.zero}" if self.zero else ""
        parts += [f"data parallel {self.dp}{zero}"] if self.dp > 1 else []
        return ", ".join(parts) or "one device"


# --- per token, per layer --------------------------------------------------------------------------------

LN_STATS = 16.0   # fp32 LayerNorm mean and rstd, two norms per block: bytes per token


def _lse(g: Geometry) -> float:
    """A fused attention kernel's fp32 log-sum-exp, one per head and token, kept for its backward."""
    return 4.0 * g.n_head if g.flash else 0.0


def _scores(g: Geometry) -> float:
    """The (s x s) attention scores one token's rows hold: softmax output, and its dropout mask and output."""
    if g.flash:
        return 0.0
    return g.n_head * g.seq_len * (2 * g.act_bytes + 1 if g.dropout else g.act_bytes)


def _layer_parts(g: Geometry, technique: str) -> tuple[float, float]:
    """(bytes tensor parallelism cannot split, bytes it splits) per token per layer.

    Unsplit, after Korthikanti et al.: the LayerNorm inputs and outputs (the outputs feed the column-parallel
    QKV and MLP matmuls whole) and the dropout masks after attention and MLP; everything inside attention and
    the MLP is split t ways."""
    h, v = g.d_model, g.act_bytes
    masks = 2 * h if g.dropout else 0
    unsplit = 4 * v * h + masks + LN_STATS
    split = 12 * v * h + _scores(g) + _lse(g)              # Q, K, V, attention output, MLP 4 + 4; scores; lse
    if technique == "stored":
        return unsplit, split
    if technique == "selective":
        return unsplit, 12 * v * h
    if technique == "ckpt_attention":  # keeps LN1's output (the sub-layer's input); drops Q, K, V, output, scores
        return unsplit - (h if g.dropout else 0), 8 * v * h
    if technique == "ckpt_block":
        return float(v * h), 0.0                            # the block input, one stream value
    if technique in ("reversible", "offload"):
        return 0.0, 0.0
    raise ValueError(f"unknown technique {technique!r}: choose one of {', '.join(TECHNIQUES)}")


def layer_bytes(g: Geometry, technique: str, plan: Plan = Plan()) -> float:
    """Activation bytes per token per layer a device keeps for backward."""
    unsplit, split = _layer_parts(g, technique)
    if plan.sp:
        return (unsplit + split) / plan.t
    return unsplit + split / plan.t


def working_set_bytes(g: Geometry, technique: str, plan: Plan = Plan()) -> float:
    """Bytes per token held once, not per layer: the block a recomputing technique rebuilds in backward and,
    for a reversible trunk, its final state (two streams of width h). An upper bound for reversible Euler,
    which rebuilds attention and MLP one at a time."""
    if technique in ("ckpt_block", "reversible"):
        state = 2 * g.stream_bytes * g.d_model / (plan.t if plan.sp else 1) if technique == "reversible" else 0
        return layer_bytes(g, "stored", plan) + state
    if technique == "ckpt_attention":
        return layer_bytes(g, "stored", plan) - layer_bytes(g, "ckpt_attention", plan)
    return 0.0


def activation_bytes(g: Geometry, technique: str, plan: Plan = Plan()) -> float:
    """Activation bytes one device holds at the peak of a training step: the busiest (first) pipeline stage,
    with min(p, m) micro-batches in flight under 1F1B, each of `micro_batch` sequences split c ways."""
    tokens = g.tokens / plan.c
    in_flight = min(plan.p, plan.m)
    per_layer = layer_bytes(g, technique, plan)
    return tokens * (in_flight * (g.n_layer / plan.p) * per_layer + working_set_bytes(g, technique, plan))


def host_bytes(g: Geometry, technique: str, plan: Plan = Plan()) -> float:
    """Host (CPU) memory an offloading device needs: the stored activations it moved there."""
    return activation_bytes(g, "stored", plan) if technique == "offload" else 0.0


# --- weights, gradients, optimizer state ---------------------------------------------------------------------

def static_bytes(n_params: int, plan: Plan = Plan(), mixed: bool = True) -> float:
    """Weights + gradients + Adam state per device (Rajbhandari et al. 2020). Mixed precision: 2-byte weights and
    gradients, 12 bytes of fp32 master copy and moments; fp32 training: 4 + 4 + 8. ZeRO-1 shards the optimizer
    state over dp devices, ZeRO-2 also the gradients, ZeRO-3 (= FSDP) also the weights; TP and PP split all
    three."""
    w, gr, opt = (2, 2, 12) if mixed else (4, 4, 8)
    dp = plan.dp
    shard = n_params / (plan.t * plan.p)
    return shard * (w / (dp if plan.zero >= 3 else 1) + gr / (dp if plan.zero >= 2 else 1)
                    + opt / (dp if plan.zero >= 1 else 1))


# --- compute ------------------------------------------------------------------------------------------------

def forward_flops(g: Geometry) -> float:
    """Forward FLOPs per token per layer: 24 h^2 for the matmuls, 4 s h for scores and weighted values."""
    return 24.0 * g.d_model ** 2 + 4.0 * g.seq_len * g.d_model


def recompute_overhead(g: Geometry, technique: str) -> float:
    """Extra FLOPs of a training step over the stored one (forward + backward = 3 forwards), as a fraction."""
    h, s = g.d_model, g.seq_len
    extra = {"stored": 0.0, "offload": 0.0, "selective": 4.0 * s * h, "ckpt_attention": 8.0 * h * h + 4.0 * s * h,
             "ckpt_block": forward_flops(g), "reversible": forward_flops(g)}[technique]
    return extra / (3 * forward_flops(g))


@dataclass(frozen=True)
class Hardware:
    """An accelerator as the offload estimate needs it; the figures are assumptions, labelled as such."""

    name: str
    hbm_bytes: float
    flops: float            # sustained training FLOP/s
    link_bytes_per_s: float  # host link, one direction


# Assumed: an H100 SXM (80 GB HBM3, 989 TFLOP/s dense bf16 peak) at 50% of peak, PCIe Gen5 x16 (64 GB/s).
H100_ASSUMED = Hardware("H100 SXM (assumed: 50% of 989 TFLOP/s bf16, PCIe Gen5 x16 64 GB/s)", 80e9, 0.5 * 989e12,
                        64e9)


def offload_ratio(g: Geometry, hw: Hardware = H100_ASSUMED) -> float:
    """Time to move one layer's stored activations out and back over the host link, over the time to compute
    that layer's forward and backward: below 1 the copies can hide behind compute, above 1 they cannot."""
    transfer = 2 * layer_bytes(g, "stored") / hw.link_bytes_per_s
    compute = 3 * forward_flops(g) / hw.flops
    return transfer / compute


# --- geometries the chapter evaluates ------------------------------------------------------------------------

def profile_geometry(profile, act_bytes: int = 4) -> Geometry:
    """This workbook's GPT on `profile` (a `rev.base.profiles.Profile`), at its training batch."""
    return Geometry(f"this GPT ({profile.name} profile)", profile.n_layer, profile.d_model, profile.n_head,
                    profile.seq_len, profile.batch_size, profile.vocab_size, act_bytes=act_bytes)


# GPT-3 175B as Korthikanti et al. 2022 train it (their Table 3): 96 layers, h=12288, 96 heads, s=2048,
# micro-batch 1, bf16/fp16 activations, dropout, no fused attention; TP 8, PP 8. 64 micro-batches per step and
# 8-way data parallelism are our assumptions (only min(p, m) and the ZeRO shard depend on them).
FRONTIER = Geometry("GPT-3 175B (Korthikanti et al. 2022)", 96, 12288, 96, 2048, 1, 51200, act_bytes=2,
                    stream_bytes=4, flash=False, dropout=True)
FRONTIER_PLAN = Plan(t=8, sp=True, p=8, m=64, dp=8)


def with_flash(g: Geometry) -> Geometry:
    """The same model with a fused attention kernel (no stored scores), as most training now runs."""
    return replace(g, name=g.name + ", fused attention", flash=True)


def plans_for(frontier: bool) -> list[tuple[str, str, Plan]]:
    """(label, technique, plan) rows the chapter evaluates: each technique alone on one device, then, for the
    frontier model, the combinations large-scale training uses and reversible in their place."""
    rows = [(LABELS[t], t, Plan()) for t in TECHNIQUES]
    if not frontier:
        return rows
    tp, full = Plan(t=8), FRONTIER_PLAN
    return rows + [("TP8", "stored", tp), ("TP8+SP", "stored", replace(tp, sp=True)),
                   ("TP8+SP+PP8", "stored", full), ("TP8+SP+PP8, selective", "selective", full),
                   ("TP8+SP+PP8, per-block ckpt", "ckpt_block", full),
                   ("TP8+SP+PP8, reversible", "reversible", full),
                   ("TP8+SP+PP8+CP2, selective", "selective", replace(full, c=2))]


def evaluate(g: Geometry, frontier: bool = False, zero: int = 3) -> list[dict]:
    """One row per plan: activation and static GiB per device, host GiB, and the modelled recompute overhead.
    Static memory assumes ZeRO stage `zero` over the plan's data-parallel degree (none on one device)."""
    out = []
    for label, technique, plan in plans_for(frontier):
        zplan = replace(plan, zero=zero if plan.dp > 1 else 0)
        out.append({"geometry": g.name, "plan": label, "technique": technique, "layout": zplan.describe(),
                    "activation_GiB": activation_bytes(g, technique, plan) / GIB,
                    "static_GiB": static_bytes(g.n_params, zplan, mixed=g.act_bytes == 2) / GIB,
                    "host_GiB": host_bytes(g, technique, plan) / GIB,
                    "recompute_overhead": recompute_overhead(g, technique)})
    return out
