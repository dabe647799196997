"""Notebook 03 (screening): the check of its exercise 03.2 (conventions: `rev.chapters.shared.exercises`).

`check_screening_rule` runs the learner's `pick(rows)` on hand-made screening tables, each built to catch one
usual mistake, and compares it with the rule the workbook uses (`rule.choose`).
"""
from __future__ import annotations

from typing import Callable

from ...core.reversible import RECON_LIMIT
from .rule import choose


def _row(name: str, trunk: str, stream: str, val: float, recon: float | None) -> dict:
    return {"name": name, "trunk": trunk, "h": 1.0, "stream": stream, "val_loss": val, "reconstruction_error": recon}


SCREENING_CASES = [  # (what the case tests, rows, a hint when the learner's pick differs)
    ("lower loss, bad rebuild", [
        _row("rev_a", "midpoint_rev", "fp32", 2.30, 1e-6), _row("rev_b", "reveuler_rev", "fp32", 2.10, 1e-6),
        _row("rev_c", "reveuler_rev", "fp32", 1.50, 10 * RECON_LIMIT)],
     "RECON_LIMIT filters first"),
    ("baseline never chosen", [
        _row("base", "residual", "fp32", 1.00, None), _row("rev_a", "reveuler_rev", "fp32", 2.00, 1e-6)],
     "only _rev trunks"),
    ("error not measured", [
        _row("rev_a", "reveuler_rev", "fp32", 1.90, None), _row("rev_b", "midpoint_rev", "fp32", 2.00, 1e-6)],
     "None fails it"),
    ("fp64 barely ahead", [
        _row("rev_x", "reveuler_rev", "fp64", 2.000, 0.0), _row("rev_y", "reveuler_rev", "fp32", 2.010, 1e-6)],
     "tie: fp32 first"),
    ("fp64, fixed tied", [
        _row("rev_f", "reveuler_rev", "fixed", 2.000, 0.0), _row("rev_x", "midpoint_rev", "fp64", 2.015, 0.0)],
     "tie: STREAM_COST order"),
    ("two fp32 tied", [
        _row("rev_x", "reveuler_rev", "fp64", 2.000, 0.0), _row("rev_y", "reveuler_rev", "fp32", 2.010, 1e-6),
        _row("rev_z", "midpoint_rev", "fp32", 2.005, 1e-6)],
     "then lower loss"),
    ("fixed clearly ahead", [
        _row("rev_f", "reveuler_rev", "fixed", 1.900, 0.0), _row("rev_y", "reveuler_rev", "fp32", 2.000, 1e-6)],
     "tie: within LOSS_TIE"),
]


def check_screening_rule(pick: Callable[[list[dict]], str]) -> str:
    """03.2: `pick(rows)` must name the candidate `rev.chapters.screening.rule.choose` picks, on every case."""
    for what, rows, hint in SCREENING_CASES:
        chosen, _ = choose(rows)
        expected = next(r["name"] for r in rows if all(r[k] == chosen[k] for k in ("trunk", "h", "stream")))
        got = pick([dict(r) for r in rows])
        assert got == expected, f"case '{what}': you picked {got!r}, the rule picks {expected!r}. Hint: {hint}."
    return f"agrees with choose on {len(SCREENING_CASES)} cases"
