"""Notebook 03 (screening): the check of its exercise 03.2 (conventions: `rev.chapters.shared.exercises`).

`check_screening_rule` runs the learner's `pick(rows)` on hand-made screening tables, each built to catch one
usual mistake, and compares it with the rule the workbook uses (`rule.choose`).
"""
from __future__ import annotations

from typing import Callable

from ...core.reversible import RECON_LIMIT
from .rule import LOSS_TIE, choose


def _row(name: str, trunk: str, stream: str, val: float, speed: float, recon: float | None) -> dict:
    return {"name": name, "trunk": trunk, "h": 1.0, "stream": stream, "val_loss": val, "tokens_per_s": speed,
            "reconstruction_error": recon}


SCREENING_CASES = [  # (what the case tests, rows, a hint when the learner's pick differs)
    ("a lower loss that does not reconstruct", [
        _row("rev_a", "midpoint_rev", "fp32", 2.30, 800, 1e-6), _row("rev_b", "reveuler_rev", "fp32", 2.10, 700, 1e-6),
        _row("rev_c", "reveuler_rev", "fp32", 1.50, 700, 10 * RECON_LIMIT)],
     "drop every candidate whose reconstruction_error exceeds RECON_LIMIT before comparing losses"),
    ("the baseline is not a candidate", [
        _row("base", "residual", "fp32", 1.00, 900, None), _row("rev_a", "reveuler_rev", "fp32", 2.00, 700, 1e-6)],
     "only trunks whose name ends in '_rev' are candidates; the residual baseline has no inverse"),
    ("a reversible run with no measured error", [
        _row("rev_a", "reveuler_rev", "fp32", 1.90, 700, None), _row("rev_b", "midpoint_rev", "fp32", 2.00, 600, 1e-6)],
     "a missing reconstruction_error (None) cannot be trusted: treat it as over the limit"),
    ("an fp64 stream barely ahead", [
        _row("rev_x", "reveuler_rev", "fp64", 2.000, 999, 0.0), _row("rev_y", "reveuler_rev", "fp32", 2.010, 500, 1e-6)],
     "losses within LOSS_TIE nats of the best are a tie; in a tie prefer the fp32 stream"),
    ("two fp32 streams in a tie", [
        _row("rev_x", "reveuler_rev", "fp64", 2.000, 999, 0.0), _row("rev_y", "reveuler_rev", "fp32", 2.010, 500, 1e-6),
        _row("rev_z", "midpoint_rev", "fp32", 2.005, 600, 1e-6)],
     "among tied fp32 streams take the one with the most tokens_per_s"),
    ("a fixed stream clearly ahead", [
        _row("rev_f", "reveuler_rev", "fixed", 1.900, 300, 0.0), _row("rev_y", "reveuler_rev", "fp32", 2.000, 900, 1e-6)],
     "the fp32 preference applies only within the tie: a loss better by more than LOSS_TIE wins"),
]


def check_screening_rule(pick: Callable[[list[dict]], str]) -> str:
    """03.2: `pick(rows)` must name the candidate `rev.chapters.screening.rule.choose` picks, on every case."""
    for what, rows, hint in SCREENING_CASES:
        chosen, _ = choose(rows)
        expected = next(r["name"] for r in rows if all(r[k] == chosen[k] for k in ("trunk", "h", "stream")))
        got = pick([dict(r) for r in rows])
        assert got == expected, f"case '{what}': you picked {got!r}, the rule picks {expected!r}. Hint: {hint}."
    return f"your rule agrees with rev.chapters.screening.rule.choose on {len(SCREENING_CASES)} cases (limit {RECON_LIMIT:g}, " \
           f"tie {LOSS_TIE} nats)."
