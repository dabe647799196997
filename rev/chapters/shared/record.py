"""One record of a run, whichever way a page holds it: notebooks 04-06 hold a run's summary (a dict whose config
names its folder), REPORT.md and notebook 07 a row of `results.load_runs` (a `path` column). `RunRecord` reads
either, so a finding drawn from two runs (their losses at equal tokens, what spending the saved memory bought) is
computed once, by one function, and the notebook and the report print the same numbers.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .run_log import first_evaluation_from, number, val_loss_at



@dataclass(frozen=True)
class RunRecord:
    """What a finding reads of one run: its folder (its log), token count, final validation loss, optimizer
    steps, batch and depth."""
    path: Path | None
    tokens: float | None
    final_val_loss: float | None
    steps: float | None = None
    batch_size: float | None = None
    n_layer: float | None = None

    @classmethod
    def of(cls, run: Mapping | None) -> "RunRecord | None":
        """The record of a run summary (`train`'s, its folder in config.out_dir) or of a `load_runs` row (its
        folder in `path`); None for None."""
        if run is None:
            return None
        get = run.get
        folder = get("path") if isinstance(get("path"), (str, Path)) and get("path") else \
            (get("config") or {}).get("out_dir") if isinstance(get("config"), Mapping) else None
        path = Path(folder) if folder and Path(folder).is_dir() else None
        return cls(path, number(get("tokens")), number(get("final_val_loss")), number(get("steps")),
                   number(get("batch_size")), number(get("n_layer")))


@dataclass(frozen=True)
class Gap:
    """`run`'s validation loss minus `ref`'s at `tokens`; `bound`: `run` had no evaluation by then, so its first
    evaluation after (more tokens, a loss no higher) makes `diff` a lower bound."""
    tokens: int
    run_loss: float
    ref_loss: float
    bound: bool = False

    @property
    def diff(self) -> float:
        return self.run_loss - self.ref_loss


def equal_tokens(a: RunRecord, b: RunRecord) -> tuple[int, float | None, float | None] | None:
    """(tokens, a's validation loss, b's) at the token count both runs reached: their final losses when they
    trained on the same tokens, else read from their logs at the smaller count (None where a log cannot say)."""
    if not a.tokens or not b.tokens:
        return None
    if a.tokens == b.tokens and a.final_val_loss is not None and b.final_val_loss is not None:
        return int(a.tokens), a.final_val_loss, b.final_val_loss
    tokens = min(a.tokens, b.tokens)
    return (int(tokens), val_loss_at(a.path, tokens) if a.path else None,
            val_loss_at(b.path, tokens) if b.path else None)


def gap_at_equal_tokens(run: RunRecord | None, ref: RunRecord | None) -> Gap | None:
    """`Gap` of `run` against `ref` at the tokens both reached. A run with a large batch may have no evaluation
    that early: its first evaluation after that point gives a lower bound on its gap (`Gap.bound`)."""
    if run is None or ref is None:
        return None
    eq = equal_tokens(run, ref)
    if eq is None or eq[2] is None:
        return None
    tokens, v, r = eq
    if v is not None:
        return Gap(tokens, v, r)
    later = first_evaluation_from(run.path, tokens) if run.path else None
    return None if later is None else Gap(tokens, later[1], r, bound=True)
