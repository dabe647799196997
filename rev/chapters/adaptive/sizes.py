"""Notebook 09 (adaptive checkpointing): the chapter's sizes per profile, its model and its batches.

The chapter owns what its sizes mean on each profile (`SIZES`); a profile is only a size class.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ...core.model import GPTConfig
from ...base.profiles import ProfileLike, get_profile


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


# deeper and narrower than the profile's model (the defect is a matter of depth), pretraining and fine-tuning
# budgets, hook cadence, and the expansion gains scanned for the stress
SIZES: dict[str, ChapterSizes] = {
    "smoke": ChapterSizes(d_model=32, n_head=2, n_layer=6, seq_len=32, batch=4, pretrain_steps=20, pretrain_lr=3e-3,
                          finetune_steps=6, finetune_lr=1e-3, every=2, fidelity_every=3, probe_rows=2, fidelity_rows=2,
                          gains=(1.0, 8.0, 16.0)),
    "cpu": ChapterSizes(d_model=64, n_head=2, n_layer=12, seq_len=64, batch=8, pretrain_steps=160, pretrain_lr=3e-3,
                        finetune_steps=32, finetune_lr=1e-3, every=4, fidelity_every=8, probe_rows=4, fidelity_rows=4,
                        gains=(1.0, 2.0, 4.0, 6.0, 8.0, 12.0, 16.0)),
    "t4": ChapterSizes(d_model=256, n_head=4, n_layer=16, seq_len=256, batch=16, pretrain_steps=2000,
                       pretrain_lr=1e-3, finetune_steps=300, finetune_lr=3e-4, every=10, fidelity_every=25,
                       probe_rows=4, fidelity_rows=4, gains=(1.0, 2.0, 4.0, 6.0, 8.0, 12.0, 16.0)),
    "full": ChapterSizes(d_model=384, n_head=6, n_layer=16, seq_len=256, batch=16, pretrain_steps=4000,
                         pretrain_lr=1e-3, finetune_steps=300, finetune_lr=3e-4, every=10, fidelity_every=25,
                         probe_rows=4, fidelity_rows=4, gains=(1.0, 2.0, 4.0, 6.0, 8.0, 12.0, 16.0)),
}


def chapter_sizes(profile: ProfileLike) -> ChapterSizes:
    """Notebook 09's sizes for a profile (`smoke`, `cpu`, `t4`, `full`, `auto`, or a `Profile`)."""
    return SIZES[get_profile(profile).name]


def model_config(sizes: ChapterSizes, vocab_size: int, trunk: str, stream: str = "fp32") -> GPTConfig:
    """The chapter's GPTConfig for `trunk`, at the trunk's own step size (GPTConfig's default)."""
    return GPTConfig(vocab_size=vocab_size, seq_len=sizes.seq_len, n_layer=sizes.n_layer, n_head=sizes.n_head,
                     d_model=sizes.d_model, trunk=trunk, stream=stream)


def batch_source(data, batch: int, seq_len: int, seed: int, split: str = "train",
                 device: str | torch.device | None = None) -> Callable[[int], tuple]:
    """`get_batch(step)` over a `rev.data.tokens.TokenData`, drawn from its own seeded generator: two sources with the
    same seed hand out the same batches, so every variant of a comparison sees the same data."""
    gen = torch.Generator().manual_seed(seed)
    return lambda step: data.get_batch(split, batch, seq_len, gen, device=device)
