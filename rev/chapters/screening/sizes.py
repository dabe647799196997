"""Notebook 03 (screening): the chapter's sizes per profile: how much of the budget a candidate trains on, and
which candidates are screened.

The chapter owns what its sizes mean on each profile (`SIZES`); a profile is only a size class.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...base.profiles import ProfileLike, get_profile


@dataclass(frozen=True)
class ChapterSizes:
    fraction: float          # of the profile's token budget, each screening run (at least one batch)
    candidates: str          # "full": both reversible integrators at two h, on fp32 and on fp64/fixed;
                             # "minimal": one of each (CI)


# cpu: 15% of the budget, to leave the workbook's 30 minutes room for the seed replicas; t4: the same, for one
# Colab session (`python -m rev plan --profile t4`)
SIZES: dict[str, ChapterSizes] = {
    "smoke": ChapterSizes(fraction=0.25, candidates="minimal"),
    "cpu": ChapterSizes(fraction=0.15, candidates="full"),
    "t4": ChapterSizes(fraction=0.15, candidates="full"),
    "full": ChapterSizes(fraction=0.25, candidates="full"),
}


def chapter_sizes(profile: ProfileLike) -> ChapterSizes:
    """Notebook 03's sizes for a profile (`smoke`, `cpu`, `t4`, `full`, `auto`, or a `Profile`)."""
    return SIZES[get_profile(profile).name]
