"""Notebook 09b (adaptive rank): the chapter's sizes per profile (`SIZES`).

State m x m, ranks up to max_rank (default m: full rank), side x side images read one pixel a step by a
`layers`-layer Neural ODE, paired seeds, the controller's starting rank, initial spacings, probe rounds before
training (enough to reach the largest rank from rank0), held-out calibration seeds, directions per enrichment, and
the training each arm gets. Short everywhere: every gradient walks the sequence step by step through the reverse
map in Python (at m=32 and 64 steps about a second each on a CPU core), and the t4 sizes train 7 arms x 8 seeds.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...base.profiles import ProfileLike, get_profile


@dataclass(frozen=True)
class LowRankSizes:
    """Notebook 09b's sizes for one profile."""
    m: int               # state rows = columns
    batch: int
    side: int            # images are side x side pixels: a sequence of side**2 steps
    seeds: int           # paired seeds
    rank0: int           # the controller's starting rank
    spacings: tuple      # initial checkpoint spacings C compared
    rounds: int          # controller probe rounds before its rank and spacing are read off
    calib_seeds: int     # held-out seeds (never the test seeds) the thresholds are calibrated on
    rank_step: int       # directions added per enrichment
    layers: int = 6      # layers of the Neural ODE, each with its own A and C over an equal span of the steps
    train_steps: int = 24  # optimizer steps each arm trains for
    lr: float = 1e-2
    probe_every: int = 4   # the controller probes (delta, rho) and decides every this many steps
    fidelity_every: int = 6  # steps between gradient checks against the dense reference
    test_size: int = 256   # held-out samples the accuracy is measured on
    max_rank: int = 0      # the largest rank an arm may use (0: m, full rank)

    @property
    def rank_cap(self) -> int:
        return self.max_rank or self.m


SIZES: dict[str, LowRankSizes] = {
    # every profile caps the rank below m: at full rank the low-rank model is the dense one, and a fixed arm there
    # computes the dense gradient, so the equal-memory comparison would be decided by construction (at m = 32 on t4,
    # and at m = 8 on cpu, the controller's checkpoints bought the fixed arm exactly that)
    "smoke": LowRankSizes(m=6, max_rank=5, batch=4, side=3, seeds=2, rank0=2, spacings=(4,), rounds=4, calib_seeds=1,
                          rank_step=1, layers=3, train_steps=4, lr=3e-2, probe_every=2, fidelity_every=2, test_size=64),
    "cpu": LowRankSizes(m=8, max_rank=6, batch=8, side=4, seeds=8, rank0=2, spacings=(8,), rounds=6, calib_seeds=3,
                        rank_step=1, layers=6, train_steps=16, lr=3e-2, probe_every=4, fidelity_every=5, test_size=256),
    # t4 compares two spacings, not full's three: the chapter runs on the CPU, ~1.8 s a step at these sizes, and a
    # third spacing is ~10 minutes more of a Colab session (`python -m rev plan --profile t4` counts them)
    "t4": LowRankSizes(m=48, max_rank=32, batch=16, side=8, seeds=8, rank0=5, spacings=(4, 8), rounds=8,
                       calib_seeds=3, rank_step=4, layers=6, train_steps=20, lr=1e-2, probe_every=5, fidelity_every=5,
                       test_size=512),
    "full": LowRankSizes(m=48, max_rank=32, batch=16, side=8, seeds=8, rank0=5, spacings=(4, 8, 16), rounds=8,
                         calib_seeds=3, rank_step=4, layers=6, train_steps=40, lr=1e-2, probe_every=8, fidelity_every=10,
                         test_size=512),
}


def chapter_sizes(profile: ProfileLike) -> LowRankSizes:
    """Notebook 09b's sizes for a profile (a name, `auto`, or a `Profile`)."""
    return SIZES[get_profile(profile).name]
