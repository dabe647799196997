"""Notebook 09 (adaptive checkpointing): the checks of the notebook's exercises (09.1 and 09.3).

Each check builds its own tiny trunk (`exercise_model`: eight layers, made expanding on purpose so the fp32 round
trip is visibly lossy at this size) and runs in about a second on a CPU, so it needs nothing from the cells
above it. See `rev.chapters.shared.exercises` for the conventions.
"""
from __future__ import annotations

import contextlib
from typing import Callable, Iterator, Sequence

import torch
from torch import Tensor

from ...core import reversible
from ...core.model import GPT, GPTConfig, TRUNKS
from .measure import apply_keep, backward_reconstruction_errors, fixed_spacing, gradient_cosine, reversal_defect
from .placement import expand_blocks

VOCAB, SEQ, LAYERS, WIDTH = 64, 16, 8, 32


def exercise_model(trunk: str = "reveuler_rev", stream: str = "fp32") -> GPT:
    """A tiny trunk whose fp32 round trip is visibly lossy: twice the default step, blocks expanded 32x and a
    small input stream (the first layer norms amplify it most). Always the same weights."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = GPT(GPTConfig(vocab_size=VOCAB, seq_len=SEQ, n_layer=LAYERS, n_head=2, d_model=WIDTH, trunk=trunk,
                              h=2 * TRUNKS[trunk].h, stream=stream))
    expand_blocks(model, 32.0)
    with torch.no_grad():
        model.wte.weight.mul_(0.1)
        model.wpe.weight.mul_(0.1)
    return model


def exercise_batch(rows: int = 2) -> tuple[Tensor, Tensor]:
    """Fixed random tokens and targets for `exercise_model`."""
    idx = torch.randint(0, VOCAB, (rows, SEQ), generator=torch.Generator().manual_seed(1))
    tgt = torch.randint(0, VOCAB, (rows, SEQ), generator=torch.Generator().manual_seed(2))
    return idx, tgt


def check_span_tops(span_tops: Callable[[int, Sequence[int]], Sequence[int]]) -> str:
    """Exercise 09.1: `span_tops(n_layer, keep)[l]` is the boundary whose exact state backward inverts from to
    rebuild boundary l. Checked by measurement: the defect of each span (l, top) must equal, bit for bit, the
    error of the state the backward rebuilds at l."""
    model, (idx, _) = exercise_model(), exercise_batch()
    for keep in [(), (3, 6), (1, 2, 5)]:
        tops = [int(t) for t in span_tops(LAYERS, keep)]
        assert len(tops) == LAYERS, f"need {LAYERS} tops"
        bad = [(l, t) for l, t in enumerate(tops) if not l < t <= LAYERS]
        assert not bad, f"tops {bad}: l < t <= {LAYERS}?"
        rebuilt = backward_reconstruction_errors(model, idx, keep)
        predicted = reversal_defect(model, idx, list(enumerate(tops)))
        for l, (t, p, r) in enumerate(zip(tops, predicted, rebuilt)):
            assert p == r, f"{keep}, boundary {l}: defect {p:.3g}, error {r:.3g}"
    return "bit for bit"


@contextlib.contextmanager
def trunk_function(function: type[torch.autograd.Function]) -> Iterator[None]:
    """Inside the block, reversible trunks run through `function` (e.g. a broken subclass of
    `rev.core.reversible.ReversibleFunction`) instead of the real one: the seam of the break-it exercise."""
    real = reversible.ReversibleFunction
    reversible.ReversibleFunction = function
    try:
        yield
    finally:
        reversible.ReversibleFunction = real


def check_no_restart(break_restart: Callable[[type], type]) -> str:
    """Exercise 09.3: `break_restart(ReversibleFunction)` returns a Function that still keeps states in forward
    but never restarts from them in backward. Its gradient error with kept states must rise to the level of no
    kept states at all, measured as the relative norm error |g - g_ref| / |g_ref| against the stored twin."""
    model, (idx, tgt) = exercise_model(), exercise_batch()
    keep = fixed_spacing(LAYERS, 2)
    apply_keep(model, ())
    none = gradient_cosine(model, idx, tgt)
    apply_keep(model, keep)
    kept = gradient_cosine(model, idx, tgt)
    broken = break_restart(reversible.ReversibleFunction)
    assert isinstance(broken, type) and issubclass(broken, torch.autograd.Function), f"not a Function: {broken!r}"
    with trunk_function(broken):
        got = gradient_cosine(model, idx, tgt)
    apply_keep(model, ())
    assert kept["rel_err"] < none["rel_err"] / 10, "kept states useless"
    assert got["rel_err"] > kept["rel_err"] * 10, (
        f"error {got['rel_err']:.2g}: still restarts")
    assert got["rel_err"] < none["rel_err"] * 2, (
        f"error {got['rel_err']:.2g}: broke more")
    errors = {"restarting": kept["rel_err"], "not restarting": got["rel_err"], "nothing kept": none["rel_err"]}
    return ", ".join(f"{k} {v:.2g}" for k, v in errors.items()) + f"; worst cosine {got['min']:.5f}"
