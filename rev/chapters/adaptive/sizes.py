"""Notebook 09 (adaptive checkpointing): the chapter's sizes per profile, its model and its batches.

The numbers live in `rev.engine.profiles.CHAPTER_SIZES["adaptive"]`, next to the profiles they belong to.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ...core.model import GPTConfig, TRUNKS
from ...engine import profiles


@dataclass(frozen=True)
class ChapterSizes:
    """Geometry and budgets of notebook 09 for one profile. Deeper and narrower than the profile's own model:
    the defect is a matter of depth, and the chapter trains several variants."""
    d_model: int
    n_head: int
    n_layer: int
    seq_len: int
    batch: int
    pretrain_steps: int      # steps that produce the "trained weights" the measurements start from
    pretrain_lr: float
    finetune_steps: int      # steps of each variant in the training comparison
    finetune_lr: float
    every: int               # hook: defect probe every this many steps
    fidelity_every: int      # hook: gradient-cosine check every this many steps
    probe_rows: int
    fidelity_rows: int
    gains: tuple[float, ...]  # expansion gains scanned for the stress


def chapter_sizes(profile: str) -> ChapterSizes:
    """Notebook 09's sizes for a profile name (`smoke`, `cpu`, `t4`, `full`, or `auto`)."""
    return ChapterSizes(**profiles.chapter_sizes("adaptive", profile))


def model_config(sizes: ChapterSizes, vocab_size: int, trunk: str, stream: str = "fp32") -> GPTConfig:
    """The chapter's GPTConfig for `trunk`, at the trunk's default step size (`TRUNKS[trunk].h`)."""
    return GPTConfig(vocab_size=vocab_size, seq_len=sizes.seq_len, n_layer=sizes.n_layer, n_head=sizes.n_head,
                     d_model=sizes.d_model, trunk=trunk, h=TRUNKS[trunk].h, stream=stream)


def batch_source(data, batch: int, seq_len: int, seed: int, split: str = "train",
                 device: str | torch.device | None = None) -> Callable[[int], tuple]:
    """`get_batch(step)` over a `rev.engine.data.TokenData`, drawn from its own seeded generator: two sources with the
    same seed hand out the same batches, so every variant of a comparison sees the same data."""
    gen = torch.Generator().manual_seed(seed)
    return lambda step: data.get_batch(split, batch, seq_len, gen, device=device)
