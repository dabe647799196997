"""Notebook 10 (fine-tuning trace): the chapter's run on each profile (`SIZES`): fine-tuning steps, prefixed stories,
peak lr, the share of the profile's tokens to pretrain on when no finished run is there, and the model's geometry
where it is not the profile's (`model_profile`). Batch and sequence length are the profile's.

An exact trace keeps, per step, every element of the weights' float difference and of both AdamW moments (about
9 bytes per parameter compressed, `storage.size_breakdown`), so its size is steps x parameters x that.

t4/full keep fewer steps: at ~25M parameters one exact step (weights + Adam moments) is ~230 MB in memory, and the
notebook holds the trace, its lossy copies and (while reading it back) a second copy.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...base.profiles import Profile, ProfileLike, get_profile


@dataclass(frozen=True)
class TraceSize:
    """The chapter's run on one profile."""
    steps: int                    # fine-tuning steps
    n_stories: int                # stories given the prefix
    lr: float                     # peak lr (the schedule ends at 0.3 of it)
    pretrain_fraction: float      # of the profile's tokens, when no finished run is there to start from
    # the model fine-tuned: 0 keeps the profile's geometry (and a finished run of the profile is reused); a
    # smaller one is the chapter's own, pretrained here once (a trace keeps ~9 bytes per parameter per step)
    d_model: int = 0
    n_layer: int = 0
    n_head: int = 0


SIZES: dict[str, TraceSize] = {
    "smoke": TraceSize(steps=48, n_stories=200, lr=5e-3, pretrain_fraction=1.0),
    # the cpu profile's own GPT (~1.5M parameters) would keep ~13 MiB per step: 60 steps were a 769 MiB file and
    # 14 minutes. A quarter-width, two-layer GPT on the same data keeps under 3 MiB per step.
    "cpu": TraceSize(steps=40, n_stories=400, lr=5e-3, pretrain_fraction=0.5, d_model=64, n_layer=2, n_head=2),
    "t4": TraceSize(steps=20, n_stories=1000, lr=2e-3, pretrain_fraction=0.25),
    "full": TraceSize(steps=20, n_stories=1000, lr=2e-3, pretrain_fraction=0.1),
}


def chapter_sizes(profile: ProfileLike) -> TraceSize:
    """Notebook 10's sizes for a profile (a name, `auto`, or a `Profile`)."""
    return SIZES[get_profile(profile).name]


def model_profile(profile: ProfileLike) -> Profile:
    """The profile with the geometry of the model this chapter fine-tunes (the profile's own where the sizes keep
    it): data, batch, sequence length and optimiser settings stay the profile's."""
    prof, size = get_profile(profile), chapter_sizes(profile)
    changes = {k: v for k, v in (("d_model", size.d_model), ("n_layer", size.n_layer), ("n_head", size.n_head)) if v}
    return prof.replace(**changes) if changes else prof
