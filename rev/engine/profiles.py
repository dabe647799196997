"""Named run sizes: one place that fixes geometry, data, token budget and optimiser settings.

`smoke` is for CI (seconds per run), `cpu` is the default main job on a 2-core laptop, `t4` fits a Colab T4
in about half an hour per run, and `full` is the assignment geometry (d=384, L=10, 6 heads, T=512, 8K vocab,
50M tokens).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import NamedTuple

import torch


@dataclass(frozen=True)
class Profile:
    name: str
    # model geometry
    d_model: int
    n_layer: int
    n_head: int
    seq_len: int
    vocab_size: int
    # data: which corpus `train` prepares when it is missing
    data_source: str          # "synthetic" | "tinystories" | "text:PATH"
    data_name: str            # folder under the data directory
    data_tokens: int          # size of a synthetic corpus, in (approximate) tokens
    # optimisation
    batch_size: int
    train_tokens: int
    lr: float
    min_lr: float
    warmup_tokens: int
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    # bookkeeping
    eval_every: int = 50         # steps between validation passes
    eval_batches: int = 8
    ckpt_every: int = 200        # steps between checkpoints
    # max-batch search on CPU: the byte budget a training step must fit in
    cpu_mem_budget: int = 2 * 2**30
    # the max-batch runs (1b, 3, 3b) train on at least this many optimizer steps: their shared token budget
    # grows when the largest max batch would otherwise get fewer (`max_batch_tokens`); 0 keeps `train_tokens`
    max_batch_min_steps: int = 0
    # screening runs use this fraction of the token budget
    screening_fraction: float = 0.25
    # "full": both reversible integrators at two h on fp32 and on fp64/fixed; "minimal": one of each (CI)
    screening_set: str = "full"
    # the "spend memory on depth" run searches depths up to this many layers (bounds its training time)
    deep_max_layers: int = 64

    def replace(self, **changes) -> "Profile":
        return dataclasses.replace(self, **changes)


PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        name="smoke", d_model=64, n_layer=2, n_head=2, seq_len=64, vocab_size=512,
        data_source="synthetic", data_name="synthetic-smoke", data_tokens=200_000,
        batch_size=8, train_tokens=40_960, lr=3e-3, min_lr=3e-4, warmup_tokens=4_096,
        eval_every=20, eval_batches=2, ckpt_every=40, cpu_mem_budget=16 * 2**20, max_batch_min_steps=4,
        screening_fraction=0.25, screening_set="minimal", deep_max_layers=6,
    ),
    "cpu": Profile(
        name="cpu", d_model=128, n_layer=6, n_head=4, seq_len=128, vocab_size=2048,
        data_source="synthetic", data_name="synthetic-cpu", data_tokens=5_000_000,
        batch_size=16, train_tokens=800_000, lr=2e-3, min_lr=2e-4, warmup_tokens=50_000,
        # a small device's budget, so the max-batch runs teach: at 320 MiB the reversible trunks fit 170-250
        # sequences and 800K tokens gave them 25-36 steps (they ended on the context-free line); at 72 MiB
        # reveuler_rev fits ~42 (midpoint_rev ~28, residual ~7), 150+ steps on the same tokens, searches cheaper
        eval_every=50, eval_batches=8, ckpt_every=200, cpu_mem_budget=72 * 2**20, max_batch_min_steps=150,
        screening_fraction=0.2, deep_max_layers=12,
    ),
    "t4": Profile(
        name="t4", d_model=384, n_layer=10, n_head=6, seq_len=512, vocab_size=8192,
        data_source="tinystories", data_name="tinystories", data_tokens=55_000_000,
        batch_size=32, train_tokens=20_000_000, lr=1e-3, min_lr=1e-4, warmup_tokens=1_000_000,
        eval_every=200, eval_batches=20, ckpt_every=500,
    ),
    "full": Profile(
        name="full", d_model=384, n_layer=10, n_head=6, seq_len=512, vocab_size=8192,
        data_source="tinystories", data_name="tinystories", data_tokens=55_000_000,
        batch_size=32, train_tokens=50_000_000, lr=1e-3, min_lr=1e-4, warmup_tokens=2_000_000,
        eval_every=250, eval_batches=40, ckpt_every=1000,
    ),
}


class MainRun(NamedTuple):
    role: str          # the report's name for it
    label: str         # short label for plot legends
    what: str          # one line: what the run trains


# The workbook's main runs, in the order notebooks 04-06 make them; folder names under results/<profile>/.
MAIN_RUNS: dict[str, MainRun] = {
    "run1_baseline": MainRun("baseline", "baseline", "residual at the profile's batch"),
    "run1b_baseline_maxbatch": MainRun("baseline, max batch", "baseline max batch",
                                       "residual at its own max batch under the memory budget"),
    "run2_reversible_same_batch": MainRun("reversible, same batch", "reversible",
                                          "the screened reversible trunk at the profile's batch"),
    "run3_reversible_max_batch": MainRun("reversible, max batch", "reversible max batch",
                                         "the screened reversible trunk at its max batch under the same budget"),
    "run4_reversible_deep": MainRun("reversible, deep", "reversible deep",
                                    "the deepest reversible model that fits the baseline's memory at its batch"),
}

# Runs the report shows when they are there, never listed as missing: run 3b (notebook 06) and the screening's
# runner-up at the full budget (notebook 07).
EXTRA_RUNS: dict[str, MainRun] = {
    "run3b_reversible_max_batch_stream": MainRun("reversible, max batch, other stream", "reversible max batch, 3b",
                                                 "the screened reversible trunk on the other stream (fp32 <-> "
                                                 "fp64) at its own max batch"),
    "run2b_screening_runner_up": MainRun("screening runner-up", "runner-up",
                                         "the screening's second-best reversible candidate at the profile's batch"),
}

# Sizes of the companion chapters' experiments, per profile, next to the profiles they belong to: chapter ->
# profile -> keyword arguments of that chapter's size dataclass (each chapter module builds its own from these).
CHAPTER_SIZES: dict[str, dict[str, dict]] = {
    # notebook 08: "sweep" -> thermo.SweepSizes (the potential measurements), "shock" -> thermo.FluctuationSizes
    # (the paper's Figure 2 size from cpu up, run by `python -m rev thermo-shock`), "quick" -> changes to "shock"
    # the notebook runs when that command's results are not cached (cpu: paper-size seeds take ~4.5 min each)
    "thermo": {
        "smoke": {"sweep": dict(n_etas=4, total_steps_at_max=4, n_points=3, k_tr=4, n_sub=8, drift_steps=100),
                  "shock": dict(d_model=32, n_head=2, d_ff=64, vocab_size=16, seq_len=6, batch_size=16,
                                change_step=60, total_steps=120, window=30, threads=1, layout="distinct",
                                seeds=2)},
        "cpu": {"sweep": dict(),
                "shock": dict(threads=1, seeds=3),
                "quick": dict(d_model=64, d_ff=256, batch_size=32, change_step=300, total_steps=600, window=100)},
        "t4": {"sweep": dict(n_etas=7), "shock": dict(transformer_scan=(1 / 3, 3.0), device="auto")},
        "full": {"sweep": dict(n_etas=7), "shock": dict(transformer_scan=(1 / 3, 3.0), device="auto")},
    },
    # notebook 10 -> trace.TraceSize: fine-tuning steps, prefixed stories, peak lr, and the share of the profile's
    # tokens to pretrain on when no finished run is there. t4/full keep fewer steps: at ~25M parameters one exact
    # step (weights + Adam moments) is ~230 MB in memory, and the notebook holds the trace, its lossy copies and
    # (while reading it back) a second copy.
    "trace": {
        "smoke": dict(steps=48, n_stories=200, lr=5e-3, pretrain_fraction=1.0),
        "cpu": dict(steps=60, n_stories=400, lr=3e-3, pretrain_fraction=0.25),
        "t4": dict(steps=20, n_stories=1000, lr=2e-3, pretrain_fraction=0.25),
        "full": dict(steps=20, n_stories=1000, lr=2e-3, pretrain_fraction=0.1),
    },
    # notebook 09b -> lowrank.LowRankSizes: state m x m, ranks up to max_rank (default m: full rank), side x side
    # images read one pixel a step by a `layers`-layer Neural ODE, paired seeds, the controller's starting rank,
    # initial spacings, probe rounds before training (enough to reach the largest rank from rank0), held-out
    # calibration seeds, directions per enrichment, and the training each arm gets. Short everywhere: every
    # gradient walks the sequence step by step through the reverse map in Python (at m=32 and 64 steps about a
    # second each on a CPU core), and the t4 sizes train 7 arms x 8 seeds.
    "lowrank": {
        "smoke": dict(m=6, batch=4, side=3, seeds=2, rank0=2, spacings=(4,), rounds=4, calib_seeds=1, rank_step=1,
                      layers=3, train_steps=4, lr=3e-2, probe_every=2, fidelity_every=2, test_size=64),
        "cpu": dict(m=8, batch=8, side=4, seeds=8, rank0=2, spacings=(8,), rounds=6, calib_seeds=3, rank_step=1,
                    layers=6, train_steps=16, lr=3e-2, probe_every=4, fidelity_every=5, test_size=256),
        # at m = 32 the largest rank is the dense state itself (the controller reached it on every seed and no
        # fixed arm could match its memory): the state is wider than the largest rank
        "t4": dict(m=48, max_rank=32, batch=16, side=8, seeds=8, rank0=5, spacings=(4, 8, 16), rounds=8,
                   calib_seeds=3, rank_step=4, layers=6, train_steps=20, lr=1e-2, probe_every=5, fidelity_every=5,
                   test_size=512),
        "full": dict(m=48, max_rank=32, batch=16, side=8, seeds=8, rank0=5, spacings=(4, 8, 16), rounds=8,
                     calib_seeds=3, rank_step=4, layers=6, train_steps=40, lr=1e-2, probe_every=8, fidelity_every=10,
                     test_size=512),
    },
    # notebook 09 -> adaptive.ChapterSizes: deeper and narrower than the profile's model (the defect is a matter
    # of depth), pretraining and fine-tuning budgets, hook cadence, and the expansion gains scanned for the stress
    "adaptive": {
        "smoke": dict(d_model=32, n_head=2, n_layer=6, seq_len=32, batch=4, pretrain_steps=20, pretrain_lr=3e-3,
                      finetune_steps=6, finetune_lr=1e-3, every=2, fidelity_every=3, probe_rows=2, fidelity_rows=2,
                      gains=(1.0, 8.0, 16.0)),
        "cpu": dict(d_model=64, n_head=2, n_layer=12, seq_len=64, batch=8, pretrain_steps=160, pretrain_lr=3e-3,
                    finetune_steps=32, finetune_lr=1e-3, every=4, fidelity_every=8, probe_rows=4, fidelity_rows=4,
                    gains=(1.0, 2.0, 4.0, 6.0, 8.0, 12.0, 16.0)),
        "t4": dict(d_model=256, n_head=4, n_layer=16, seq_len=256, batch=16, pretrain_steps=2000, pretrain_lr=1e-3,
                   finetune_steps=300, finetune_lr=3e-4, every=10, fidelity_every=25, probe_rows=4, fidelity_rows=4,
                   gains=(1.0, 2.0, 4.0, 6.0, 8.0, 12.0, 16.0)),
        "full": dict(d_model=384, n_head=6, n_layer=16, seq_len=256, batch=16, pretrain_steps=4000, pretrain_lr=1e-3,
                     finetune_steps=300, finetune_lr=3e-4, every=10, fidelity_every=25, probe_rows=4, fidelity_rows=4,
                     gains=(1.0, 2.0, 4.0, 6.0, 8.0, 12.0, 16.0)),
    },
}


def chapter_sizes(chapter: str, profile: str) -> dict:
    """The keyword arguments of `chapter`'s experiment size on `profile` ('auto' resolved)."""
    if chapter not in CHAPTER_SIZES:
        raise ValueError(f"unknown chapter {chapter!r}: choose one of {', '.join(CHAPTER_SIZES)}")
    return dict(CHAPTER_SIZES[chapter][resolve_profile_name(profile)])


def resolve_profile_name(name: str = "auto") -> str:
    """`auto` means the GPU profile when CUDA is present, else `cpu`."""
    if name == "auto":
        return "t4" if torch.cuda.is_available() else "cpu"
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}: choose one of {', '.join(PROFILES)} or 'auto'")
    return name


def get_profile(name: str = "auto") -> Profile:
    """The named profile (`auto` resolved as in `resolve_profile_name`)."""
    return PROFILES[resolve_profile_name(name)]


def max_batch_tokens(profile: str, batches: list[int]) -> int:
    """The token budget the max-batch runs share: the profile's `train_tokens`, raised when needed so the
    largest of `batches` still takes `max_batch_min_steps` optimizer steps (equal tokens for every max-batch
    run, so the smaller batches take more steps)."""
    prof = get_profile(profile)
    return max(prof.train_tokens, prof.max_batch_min_steps * max(batches) * prof.seq_len)
