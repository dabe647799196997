"""Notebook 08 (training irreversibility): how much each profile runs.

The chapter owns what its sizes mean on each profile (`SIZES`, one `ThermoSizes` per profile): `SweepSizes` (the
potential measurements) and `FluctuationSizes` (the learning-rate shock at the paper's Figure 2 size from cpu up,
run by `python -m rev thermo-shock`), with its reduced `quick` variant for a notebook without cached paper-size
results (cpu: paper-size seeds take minutes each).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from ...base.profiles import PROFILES, Profile, ProfileLike

@dataclass(frozen=True)
class FluctuationSizes:
    """Geometry and schedule of the learning-rate shock experiment."""

    d_model: int = 128
    n_head: int = 4
    d_ff: int = 512
    n_layer: int = 2
    vocab_size: int = 64            # includes the separator token (and, in the paper layout, tokens 0..3)
    seq_len: int = 16               # tokens to reverse
    noise: float = 0.05             # label-noise rate on the reversed half
    layout: str = "paper"           # shock.reversal_batch: "paper" (tokens {4..V-1}) or "distinct"
    batch_size: int = 64
    lr: float = 1e-3                # Adam, transformer
    linear_lr: float = 1e-2         # Adam, linear perceptron (it learns more slowly per step at equal LR)
    # extra base-LR multipliers, to see whether a verdict depends on where the model was trained
    linear_scan: tuple[float, ...] = (1 / 3, 3.0)
    transformer_scan: tuple[float, ...] = ()
    change_step: int = 1000         # the LR is multiplied by each factor here
    total_steps: int = 2000
    window: int = 200               # windowed variance of the update norm
    threads: int = 0                # intra-op threads for the run; 0 leaves torch's setting alone
    seeds: int = 5                  # seeds of the multi-seed experiment (`seeds.shock_over_seeds`)
    device: str = "cpu"             # "auto": CUDA when present

    def __post_init__(self) -> None:
        if self.d_model % self.n_head:
            raise ValueError(f"d_model={self.d_model} must be divisible by n_head={self.n_head}")
        if not 0 <= self.noise < 1:
            raise ValueError(f"noise must be a rate in [0, 1), got {self.noise}")
        if self.vocab_size < 3:
            raise ValueError("vocab_size must be >= 3 (two data tokens and a separator)")
        if self.layout not in ("distinct", "paper") or (self.layout == "paper" and self.vocab_size < 6):
            raise ValueError(f"layout must be 'distinct' or 'paper' (which needs vocab_size >= 6: four reserved "
                             f"tokens and two data tokens), got {self.layout!r} with vocab_size={self.vocab_size}")
        if self.seeds < 1:
            raise ValueError(f"seeds must be >= 1, got {self.seeds}")
        if self.device not in ("cpu", "cuda", "auto"):
            raise ValueError(f"device must be 'cpu', 'cuda' or 'auto', got {self.device!r}")
        if not 0 < self.change_step < self.total_steps:
            raise ValueError(f"need 0 < change_step < total_steps, got {self.change_step}, {self.total_steps}")
        if self.window < 3 or self.window > min(self.change_step, self.total_steps - self.change_step):
            raise ValueError(f"window={self.window} must be >= 3 and fit both before and after the change "
                             f"(<= {min(self.change_step, self.total_steps - self.change_step)})")

    def replace(self, **changes) -> "FluctuationSizes":
        return replace(self, **changes)


@dataclass(frozen=True)
class SweepSizes:
    """How much of the potential measurements a profile runs."""

    n_etas: int = 6
    total_steps_at_max: int = 12
    n_points: int = 6
    k_tr: int = 6
    n_sub: int = 16
    drift_steps: int = 400
    sgd_batch: int = 16             # minibatch of the SGD paths (`sgd.sgd_sweep`; the problems hold 48-64 samples)


@dataclass(frozen=True)
class ThermoSizes:
    """Notebook 08's sizes on one profile."""

    sweep: SweepSizes
    shock: FluctuationSizes
    quick: FluctuationSizes | None = None   # the shock the notebook runs when `shock`'s results are not cached

    def __iter__(self):  # `sweep, shock = chapter_sizes(profile)`
        return iter((self.sweep, self.shock))


_SMOKE_SHOCK = FluctuationSizes(d_model=32, n_head=2, d_ff=64, vocab_size=16, seq_len=6, batch_size=16,
                                change_step=60, total_steps=120, window=30, threads=1, layout="distinct", seeds=2)
_CPU_SHOCK = FluctuationSizes(threads=1, seeds=3)
_GPU_SHOCK = FluctuationSizes(transformer_scan=(1 / 3, 3.0), device="auto")
SIZES: dict[str, ThermoSizes] = {
    "smoke": ThermoSizes(SweepSizes(n_etas=4, total_steps_at_max=4, n_points=3, k_tr=4, n_sub=8, drift_steps=100),
                         _SMOKE_SHOCK),
    "cpu": ThermoSizes(SweepSizes(), _CPU_SHOCK,
                       quick=_CPU_SHOCK.replace(d_model=64, d_ff=256, batch_size=32, change_step=300, total_steps=600,
                                                window=100)),
    # t4: 3 seeds, as cpu (full keeps 5): each seed is two 4,000-step runs, and the t4 workbook fits one Colab session
    "t4": ThermoSizes(SweepSizes(n_etas=7), _GPU_SHOCK.replace(seeds=3)),
    "full": ThermoSizes(SweepSizes(n_etas=7), _GPU_SHOCK),
}


def chapter_sizes(profile: ProfileLike) -> ThermoSizes:
    """The sizes this chapter runs at for a resolved profile (a name or a `Profile`)."""
    # 'auto' is refused rather than resolved: the notebook resolves it once and prints which profile it runs
    name = profile.name if isinstance(profile, Profile) else profile
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}: resolve 'auto' with rev.base.profiles.get_profile first; "
                         f"known: {', '.join(PROFILES)}")
    return SIZES[name]


def quick_shock_sizes(profile: ProfileLike) -> FluctuationSizes | None:
    """The reduced shock a profile's notebook runs when the paper-size results are not cached (None: run the
    full `shock` sizes). Same protocol and data; only the changes listed under "quick" differ."""
    return chapter_sizes(profile).quick


# what defines the paper's Figure 2 experiment: its geometry, data, batch, optimiser and schedule. The window, the
# base-LR scans, seeds, threads and device change how it is measured or how long it takes, not the experiment.
PAPER_SETUP_FIELDS = ("d_model", "n_head", "d_ff", "n_layer", "vocab_size", "seq_len", "noise", "layout",
                      "batch_size", "lr", "change_step", "total_steps")


def paper_sizes() -> FluctuationSizes:
    """The paper's Figure 2 setup (the defaults of `FluctuationSizes`)."""
    return FluctuationSizes()


def paper_differences(sizes: FluctuationSizes) -> dict[str, tuple]:
    """The setup fields where `sizes` differs from the paper's Figure 2 setup: field -> (run, paper). Empty only
    when the run is the paper's experiment."""
    paper = paper_sizes()
    return {k: (getattr(sizes, k), getattr(paper, k)) for k in PAPER_SETUP_FIELDS
            if getattr(sizes, k) != getattr(paper, k)}


def setup_table(sizes: FluctuationSizes) -> pd.DataFrame:
    """The setup fields of `sizes` beside the paper's Figure 2 setup: one row per field (`PAPER_SETUP_FIELDS`),
    columns `here`, `paper` and `same`."""
    paper = paper_sizes()
    return pd.DataFrame([{"field": k, "here": getattr(sizes, k), "paper": getattr(paper, k),
                          "same": getattr(sizes, k) == getattr(paper, k)} for k in PAPER_SETUP_FIELDS])


# per-profile views of the same numbers (the notebook compares its run with the full specification)
SWEEP_SIZES: dict[str, SweepSizes] = {p: s.sweep for p, s in SIZES.items()}
FLUCTUATION_SIZES: dict[str, FluctuationSizes] = {p: s.shock for p, s in SIZES.items()}
