"""Named run sizes: one place that fixes geometry, data, token budget and optimiser settings. A profile is a size
class; each companion chapter owns what its sizes mean on each profile (its `sizes` module).

`smoke` is for CI (seconds per run), `cpu` is the default main job on a 2-core laptop, `t4` fits the whole
workbook into one Colab T4 session (about 3 hours estimated: `python -m rev plan --profile t4`), and `full` is the
assignment geometry (d=384, L=10, 6 heads, T=512, 8K vocab, 50M tokens).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Union

import torch

from ..core.model import GPTConfig
from .units import GIB, MIB


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
    # validation tokens per pass: one fixed sample of eval_tokens // seq_len sequences, the same for every run of
    # the profile whatever its batch (`rev.training.loop.evaluate`), so two runs' validation losses compare
    eval_tokens: int = 65_536
    ckpt_every: int = 200        # steps between checkpoints
    # the byte budget a training step must fit in for the max-batch and depth searches: on a CPU the profile's
    # `cpu_mem_budget`; on a GPU `gpu_mem_budget` (0: 90% of what the GPU can give), never more than the GPU can give
    cpu_mem_budget: int = 2 * GIB
    gpu_mem_budget: int = 0
    # most measured probes one search may make (a batch, a depth): each probe is a real training step, seconds
    # each at a large batch on a GPU; once they are spent the search returns the largest size that fitted
    search_probes: int = 16

    def replace(self, **changes) -> "Profile":
        return dataclasses.replace(self, **changes)

    def gpu_budget(self, available: int) -> int:
        """The memory searches' byte budget on a GPU that can give a training step `available` bytes: the profile's
        `gpu_mem_budget`, never more than is available (all of it when the profile sets none)."""
        return min(self.gpu_mem_budget, available) if self.gpu_mem_budget else available

    def model_config(self, trunk: str = "residual", n_layer: int | None = None, h: float | None = None,
                     stream: str = "fp32", **options) -> GPTConfig:
        """The model this profile trains with `trunk`: the profile's geometry (depth `n_layer` when given), step
        `h` (None: the trunk's own), `stream`, and any other `GPTConfig` option (`loss_head`, `pos_chunk`,
        `split_heads`, `keep`, ...). The one place a profile becomes a model."""
        return GPTConfig(vocab_size=self.vocab_size, seq_len=self.seq_len, n_head=self.n_head, d_model=self.d_model,
                         n_layer=self.n_layer if n_layer is None else n_layer, trunk=trunk, h=h, stream=stream,
                         **options)


PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        name="smoke", d_model=64, n_layer=2, n_head=2, seq_len=64, vocab_size=512,
        data_source="synthetic", data_name="synthetic-smoke", data_tokens=200_000,
        batch_size=8, train_tokens=40_960, lr=3e-3, min_lr=3e-4, warmup_tokens=4_096,
        eval_every=20, eval_tokens=1_024, ckpt_every=40, cpu_mem_budget=16 * MIB,
    ),
    "cpu": Profile(
        name="cpu", d_model=128, n_layer=6, n_head=4, seq_len=128, vocab_size=2048,
        data_source="synthetic", data_name="synthetic-cpu", data_tokens=5_000_000,
        batch_size=16, train_tokens=700_000, lr=2e-3, min_lr=2e-4, warmup_tokens=50_000,
        # a small device's budget, so the max-batch runs teach: at 48 MiB (~24 of it weights and AdamW state) the
        # residual trunk fits 4 sequences and the batch-sliced reversible trunks 33-55 (fp64 / fp32 midpoint_rev), so
        # run 3 trains at ~3x run 1's batch, below run 1's measured noise scale (~80 sequences late in training), where
        # a larger batch costs few extra tokens; the max-batch runs' tokens are raised to give the largest batch
        # the assignment's fewest steps (`rev.chapters.assignment.sizes`). (At 72 MiB, batch 143 lies above the noise scale and the three max-batch runs
        # take twice the time.) The workbook's 30 minutes on 2 cores set the rest: 700K tokens for runs 1, 2 and 4
        # (800K left no room for runs 1 and 2 at two more seeds, ~320 s; the chapters' own sizes follow the same
        # limit).
        eval_every=50, eval_tokens=16_384, ckpt_every=200, cpu_mem_budget=48 * MIB,
    ),
    "t4": Profile(
        name="t4", d_model=384, n_layer=10, n_head=6, seq_len=512, vocab_size=8192,
        data_source="tinystories", data_name="tinystories", data_tokens=55_000_000,
        batch_size=32, train_tokens=15_000_000, lr=1e-3, min_lr=1e-4, warmup_tokens=1_000_000,
        # A 1 GiB budget of the T4's 15, so run 3 sits where a larger batch can still pay. What a batch B buys is
        # set by the gradient noise scale B_noise that notebook 06 measures at run 1's end (McCandlish et al.: the
        # steps to a loss S = S_min (1 + B_noise / B), the tokens E = E_min (1 + B / B_noise)): up to about B_noise
        # a step at B is worth nearly B / B1 of run 1's and costs at most twice the fewest tokens; far beyond it
        # the extra sequences buy nothing. The noise scale measured so far (the cpu workbook, run 1's end) is 78
        # sequences, 5x run 1's batch, after growing 20x from run 1's first weights; a T4 has not measured its
        # own yet. The budget puts the reversible trunk's max batch at that same multiple of run 1's: the ledger
        # predicts 174 sequences under fp16 autocast (5.4x; 116 on the fp64 stream, run 3b), where by that
        # measurement a step is worth 3.1 of run 1's for 1.7x the tokens, and notebook 06 checks it against the
        # T4's own measurement. The residual trunk fits 9 there (run 1b, below run 1's 32, as on cpu); without a
        # budget, 13.5 GiB would give the reversible trunk ~3,600 sequences: 8 optimizer steps of 15M tokens, all
        # warm-up. A Colab session sets the rest (`python -m rev plan --profile t4`: 2.9 h estimated on a T4):
        # 15M tokens for runs 1, 2 and 4, validation on 512 fixed sequences, at most 12 probes a search (the
        # chapters' sizes follow: 150 steps at least for the largest max batch, 168 at 174; at most 16 layers for
        # the deep run, 1.5x run 2's compute and 2.0x run 1's; one seed).
        eval_every=100, eval_tokens=262_144, ckpt_every=200, gpu_mem_budget=1 * GIB, search_probes=12,
    ),
    "full": Profile(
        name="full", d_model=384, n_layer=10, n_head=6, seq_len=512, vocab_size=8192,
        data_source="tinystories", data_name="tinystories", data_tokens=55_000_000,
        batch_size=32, train_tokens=50_000_000, lr=1e-3, min_lr=1e-4, warmup_tokens=2_000_000,
        eval_every=250, eval_tokens=655_360, ckpt_every=1000,
    ),
}


ProfileLike = Union[str, Profile]


def get_profile(profile: ProfileLike = "auto") -> Profile:
    """The profile a name stands for, resolved once at an entry point and passed down as the object: `auto` is the
    GPU profile when CUDA is present, else `cpu`; a `Profile` (also one changed with `replace`) is returned as is."""
    if isinstance(profile, Profile):
        return profile
    if profile == "auto":
        return PROFILES["t4" if torch.cuda.is_available() else "cpu"]
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}: choose one of {', '.join(PROFILES)} or 'auto'")
    return PROFILES[profile]


def resolve_profile_name(profile: ProfileLike = "auto") -> str:
    """The name of `get_profile(profile)`."""
    return get_profile(profile).name
