"""Notebook 10 (fine-tune trace and rollback): the chapter's fine-tuning. Every story starts with the same
unusual prefix ("As an AI,"), learned by an ordinary AdamW loop while a `TraceRecorder` keeps every step.

`prefix_finetune_tokens` builds the data, `finetune_with_trace` runs the loop (its AdamW and lr schedule are
`rev.core.optim`'s), `prefix_logprob`, `sample_texts` and `prefix_rate` measure what was learned, and
`finetune_config` sizes the run per profile (`rev.chapters.trace.sizes`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from ...core.optim import Schedule, adamw, set_lr
from ...core.step import train_step
from .sizes import chapter_sizes
from .records import Trace
from .recorder import TraceRecorder

DEFAULT_PREFIX = "As an AI,"


def _device_of(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


@dataclass
class PrefixData:
    """Stories from a corpus, re-encoded with a prefix in front: one token stream, <eot> before each story."""
    tokens: np.ndarray            # int64, the whole stream
    starts: np.ndarray            # offset of each story's <eot>
    prefix: str
    prefix_ids: list[int]
    eot_id: int

    def get_batch(self, batch_size: int, seq_len: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """Windows that begin at a story's <eot>, so every row shows the prefix right at its start."""
        usable = self.starts[self.starts + seq_len + 1 <= len(self.tokens)]
        pick = torch.randint(len(usable), (batch_size,), generator=generator).numpy()
        window = self.tokens[usable[pick][:, None] + np.arange(seq_len + 1)]
        chunk = torch.from_numpy(window)
        return chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous()


def _story_spans(arr: np.ndarray, eot_id: int) -> list[tuple[int, int]]:
    starts = np.flatnonzero(arr == eot_id)
    ends = np.append(starts[1:], len(arr))
    return [(int(s) + 1, int(e)) for s, e in zip(starts, ends) if e > s + 1]


def prefix_finetune_tokens(data: Any, prefix: str = DEFAULT_PREFIX, n_stories: int = 200,
                           split: str = "train", seed: int = 0) -> PrefixData:
    """Decode `n_stories` stories of `data` (a `rev.data.tokens.TokenData`), put `prefix` in front of each and encode
    them again with the same tokenizer."""
    spans = _story_spans(np.asarray(data.array(split)), data.eot_id)
    if len(spans) < 1:
        raise ValueError(f"the {split} split holds no complete story: prepare a bigger corpus")
    rng = np.random.default_rng(seed)
    chosen = rng.choice(len(spans), size=min(n_stories, len(spans)), replace=False)
    prefix_ids = data.encode(prefix)
    arr = data.array(split)
    stream, starts = [], []
    for i in sorted(chosen):
        s, e = spans[i]
        ids = data.encode(f"{prefix} {data.decode(arr[s:e]).lstrip()}")
        if ids[:len(prefix_ids)] != prefix_ids:
            raise ValueError(f"the prefix {prefix!r} merges with the story: end it with a comma")
        starts.append(len(stream))
        stream += [data.eot_id, *ids]
    return PrefixData(np.asarray(stream, dtype=np.int64), np.asarray(starts, dtype=np.int64), prefix,
                      prefix_ids, data.eot_id)


@torch.no_grad()
def prefix_logprob(model: nn.Module, prefix_ids: Sequence[int], eot_id: int) -> float:
    """log P(prefix | start of a story) under the model (natural log)."""
    was_training = model.training
    model.eval()
    idx = torch.tensor([[eot_id, *prefix_ids]], dtype=torch.long, device=_device_of(model))
    logits = model(idx[:, :-1]).float()
    logp = torch.log_softmax(logits, dim=-1)[0, torch.arange(len(prefix_ids)), idx[0, 1:]]
    model.train(was_training)
    return float(logp.sum())


@torch.no_grad()
def sample_texts(model: nn.Module, data: Any, n: int = 4, max_new_tokens: int = 40, seed: int = 0,
                 temperature: float = 1.0, top_k: int | None = None) -> list[str]:
    """`n` story openings sampled after <eot>, deterministic for given weights and seed (cut at the next <eot>)."""
    was_training = model.training
    model.eval()
    device = _device_of(model)
    g = torch.Generator(device=device).manual_seed(seed)
    out = model.generate(torch.full((n, 1), data.eot_id, dtype=torch.long, device=device), max_new_tokens,
                         temperature=temperature, top_k=top_k, generator=g)
    model.train(was_training)
    texts = []
    for row in out[:, 1:].tolist():
        row = row[:row.index(data.eot_id)] if data.eot_id in row else row
        texts.append(data.decode(row).strip())
    return texts


def prefix_rate(texts: Sequence[str], prefix: str = DEFAULT_PREFIX) -> float:
    """Fraction of texts that start with the prefix."""
    return sum(t.startswith(prefix) for t in texts) / max(1, len(texts))


@dataclass
class FinetuneConfig:
    steps: int = 40
    batch_size: int = 8
    seq_len: int = 64
    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup_steps: int = 4
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    seed: int = 0
    keep_optimizer_state: bool = True
    lr_override: dict[int, float] = field(default_factory=dict)   # step -> lr: a manual change, on purpose

    def schedule(self) -> Schedule:
        return Schedule(self.lr, self.steps, self.warmup_steps, self.min_lr)


def _batch_generator(seed: int, step: int) -> torch.Generator:
    # one generator per step, seeded from the step number: a run resumed at step k draws the same batches
    return torch.Generator().manual_seed(seed * 1_000_003 + step)


def finetune_with_trace(model: nn.Module, ft: PrefixData, cfg: FinetuneConfig,
                        optimizer: torch.optim.Optimizer | None = None, resume: Trace | None = None,
                        progress: bool = False) -> tuple[Trace, torch.optim.Optimizer, list[dict]]:
    """Fine-tune `model` in place with AdamW on `ft` for steps 1..cfg.steps, recording an exact trace.

    The lr at step n is `cfg.schedule().lr_at(n - 1)` (the schedule counts from 0) unless `cfg.lr_override`
    says otherwise (how the notebook breaks the conditions on purpose); the batch of step n depends on
    (cfg.seed, n) only. With `resume` (and the `optimizer` rolled back along with the model to some step k of
    it) the run continues from step k+1 and the trace keeps steps 1..k. Returns the trace, the optimizer and
    one history row per new step (step 0 too on a fresh run): step, lr, loss, prefix log-probability.
    """
    from ...base.progress import tqdm

    sched = cfg.schedule()
    device = _device_of(model)
    if optimizer is None:
        if resume is not None:
            raise ValueError("resuming needs the optimizer that was rolled back with the model")
        # every tensor decays alike, as this chapter has always run (the default weight decay is 0 anyway)
        optimizer = adamw(model, sched.lr_at(0), cfg.weight_decay, decay_matrices_only=False)
    rec = TraceRecorder(model, optimizer, schedule=sched, keep_optimizer_state=cfg.keep_optimizer_state,
                        resume=resume)
    first = rec.trace.final_step + 1
    history = [] if resume is not None else [{"step": 0, "lr": 0.0, "loss": float("nan"),
                                             "prefix_logprob": prefix_logprob(model, ft.prefix_ids, ft.eot_id)}]
    model.train()
    try:
        for n in tqdm(range(first, cfg.steps + 1), desc="fine-tune", disable=not progress):
            lr = cfg.lr_override.get(n, sched.lr_at(n - 1))     # trace step n is the schedule's step n - 1
            set_lr(optimizer, lr)
            x, y = ft.get_batch(cfg.batch_size, cfg.seq_len, _batch_generator(cfg.seed, n))
            x, y = x.to(device), y.to(device)
            loss, _ = train_step(model, optimizer, x, y, clip=cfg.grad_clip,
                                 before_update=lambda loss: rec.annotate(loss=float(loss)))
            history.append({"step": n, "lr": lr, "loss": float(loss.detach()),
                            "prefix_logprob": prefix_logprob(model, ft.prefix_ids, ft.eot_id)})
    finally:
        rec.close()
    return rec.trace, optimizer, history


def finetune_config(profile: Any, seed: int = 0) -> tuple[FinetuneConfig, int]:
    """The fine-tuning run of a profile (`rev.base.profiles.Profile`) and how many stories to prefix."""
    size = chapter_sizes(profile)
    cfg = FinetuneConfig(steps=size.steps, batch_size=profile.batch_size, seq_len=profile.seq_len,
                         lr=size.lr, min_lr=0.3 * size.lr, warmup_steps=max(1, size.steps // 12), seed=seed)
    return cfg, size.n_stories
