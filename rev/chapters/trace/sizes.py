"""Notebook 10 (fine-tuning trace): the chapter's run on each profile (`SIZES`): fine-tuning steps, prefixed stories,
peak lr, and the share of the profile's tokens to pretrain on when no finished run is there. Batch and sequence
length are the profile's.

t4/full keep fewer steps: at ~25M parameters one exact step (weights + Adam moments) is ~230 MB in memory, and the
notebook holds the trace, its lossy copies and (while reading it back) a second copy.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...engine.profiles import ProfileLike, get_profile


@dataclass(frozen=True)
class TraceSize:
    """The chapter's run on one profile."""
    steps: int                    # fine-tuning steps
    n_stories: int                # stories given the prefix
    lr: float                     # peak lr (the schedule ends at 0.3 of it)
    pretrain_fraction: float      # of the profile's tokens, when no finished run is there to start from


SIZES: dict[str, TraceSize] = {
    "smoke": TraceSize(steps=48, n_stories=200, lr=5e-3, pretrain_fraction=1.0),
    "cpu": TraceSize(steps=60, n_stories=400, lr=3e-3, pretrain_fraction=0.25),
    "t4": TraceSize(steps=20, n_stories=1000, lr=2e-3, pretrain_fraction=0.25),
    "full": TraceSize(steps=20, n_stories=1000, lr=2e-3, pretrain_fraction=0.1),
}


def chapter_sizes(profile: ProfileLike) -> TraceSize:
    """Notebook 10's sizes for a profile (a name, `auto`, or a `Profile`)."""
    return SIZES[get_profile(profile).name]
