"""Notebook 00 (setup): the checks of its exercises (conventions: `rev.chapters.shared.exercises`).

* `check_plan_steps`      -- exercise 00.2: the learner's step count of a token budget against `plan_run`;
* `check_swapped_reading` -- exercise 00.3: reading token files with another corpus's tokenizer, and what `load`
                             says about the mixed folder.

Both run on two tiny corpora made in a temporary folder, so they need neither the profile's data nor a network.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable

from ...data.tokens import DataError, load
from ...base.profiles import PROFILES
from ...training.loop import TrainConfig, plan_run
from .lessons import swapped_copy, tiny_corpora

def check_plan_steps(plan_steps: Callable[[int, int, int, int], tuple[int, int]]) -> str:
    """Exercise 00.2: `plan_steps(train_tokens, warmup_tokens, batch_size, seq_len)` against `plan_run`, for every
    profile at three batch sizes."""
    cases = 0
    for prof in PROFILES.values():
        # its own batch, one that divides nothing, and one whose step is longer than the whole warm-up
        for batch in (prof.batch_size, 3, 2 * prof.warmup_tokens // prof.seq_len):
            plan = plan_run(TrainConfig(profile=prof.name, batch_size=batch))
            got = plan_steps(prof.train_tokens, prof.warmup_tokens, batch, prof.seq_len)
            want = (plan.steps, plan.warmup_steps)
            # the exercise's text states the rules (whole steps; a warm-up of at least WARMUP_FLOOR_STEPS, at most
            # the run); the message gives the case to retrace
            assert tuple(got) == want, (f"plan_steps({prof.train_tokens}, {prof.warmup_tokens}, {batch}, "
                                        f"{prof.seq_len}) = {tuple(got)}, want {want}")
            cases += 1
    return f"(steps, warm-up steps) match plan_run in {cases} cases."


def check_swapped_reading(read_with: Callable[[Path, Path, int], str], n: int = 40) -> str:
    """Exercise 00.3: `read_with(tokenizer_folder, token_folder, n)` decodes the first `n` training tokens of
    `token_folder` with the tokenizer of `tokenizer_folder`; then `load` must refuse the swapped folder."""
    with tempfile.TemporaryDirectory() as tmp:
        ours, other = tiny_corpora(tmp)
        data = load(ours)
        ids = data.array("train")[:n]
        right = {data.decode(ids, skip_special=skip) for skip in (True, False)}  # with or without <|endoftext|>
        mine = read_with(ours, ours, n)
        assert mine in right, f"read_with(ours, ours) gave {str(mine)[:40]!r}, not the corpus's own text"
        swapped = read_with(other, ours, n)
        assert swapped not in right, "read_with(other, ours) decoded with the right tokenizer, not other's"
        mixed = swapped_copy(ours, other, Path(tmp) / "mixed")
        try:
            load(mixed)
        except DataError as e:
            why = str(e).replace(f"{mixed}/", "")[:64]
            return f"the wrong tokenizer reads {swapped[:36]!r}...; load refuses the mixed folder: {why}..."
    raise AssertionError("load accepted another corpus's tokenizer.json")
