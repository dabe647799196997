"""Notebooks 04-06 (the assignment's runs): the chapter's sizes per profile: the seeds of runs 1 and 2, the steps
the max-batch runs train at least, and how deep the depth run may search.

The chapter owns what its sizes mean on each profile (`SIZES`); a profile is only a size class.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...base.profiles import ProfileLike, get_profile


@dataclass(frozen=True)
class ChapterSizes:
    # runs 1 and 2 train on this many seeds (0, 1, ...): seed 0 is the main runs, the others measure the seed
    # spread that the tie margin of single-seed verdicts comes from (`rev.chapters.assignment.seeds`); 1 = none
    seeds: int
    # the max-batch runs (1b, 3, 3b) train on at least this many optimizer steps: their shared token budget grows
    # when the largest max batch would otherwise get fewer (`max_batch_tokens`); 0 keeps the profile's budget
    max_batch_min_steps: int
    # the "spend memory on depth" run (4) searches depths up to this many layers (bounds its training time)
    deep_max_layers: int


# cpu: the workbook's 30 minutes on 2 cores set these: two more seeds of runs 1 and 2 (~320 s), 120 steps for the
# largest max batch (run 1b at batch 4 then takes ~1,650), at most 8 layers for the deep run (10 took ~145 s).
# t4: one Colab session (`python -m rev plan --profile t4`: 2.9 h estimated): one seed, 150 steps for the largest
# max batch (168 at 174), at most 16 layers for the deep run (1.5x run 2's compute, 2.0x run 1's).
SIZES: dict[str, ChapterSizes] = {
    "smoke": ChapterSizes(seeds=2, max_batch_min_steps=4, deep_max_layers=6),
    "cpu": ChapterSizes(seeds=3, max_batch_min_steps=120, deep_max_layers=8),
    "t4": ChapterSizes(seeds=1, max_batch_min_steps=150, deep_max_layers=16),
    "full": ChapterSizes(seeds=3, max_batch_min_steps=0, deep_max_layers=64),
}


def chapter_sizes(profile: ProfileLike) -> ChapterSizes:
    """Notebooks 04-06's sizes for a profile (`smoke`, `cpu`, `t4`, `full`, `auto`, or a `Profile`)."""
    return SIZES[get_profile(profile).name]


def max_batch_tokens(profile: ProfileLike, batches: list[int]) -> int:
    """The token budget the max-batch runs share: the profile's `train_tokens`, raised when needed so the
    largest of `batches` still takes `max_batch_min_steps` optimizer steps (equal tokens for every max-batch
    run, so the smaller batches take more steps)."""
    prof = get_profile(profile)
    return max(prof.train_tokens, chapter_sizes(prof).max_batch_min_steps * max(batches) * prof.seq_len)
