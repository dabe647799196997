"""Which rule set 09b's tau_rank (rev.chapters.lowrank.comparison.calibration_rule)."""
import pandas as pd

from rev.chapters.lowrank import COS_SLACK, calibration_rule


def _cal(best_cosines):
    rows = [{"seed": s, "rank": r, "grad_cos": c * r / 4} for s, c in enumerate(best_cosines) for r in (1, 2, 3, 4)]
    cal = pd.DataFrame(rows)
    cal.attrs.update(cos_target=0.99, seeds=len(best_cosines),
                     seeds_reaching_target=sum(c >= 0.99 for c in best_cosines))
    return cal


def test_the_rule_that_set_tau_rank_is_named():
    assert "the note's rule on all 2 calibration seeds" in calibration_rule(_cal([0.995, 0.999]))
    text = calibration_rule(_cal([0.97, 0.95]))
    assert "applies on 0 of 2" in text and f"COS_SLACK = {COS_SLACK:g}" in text and "0.9500 to 0.9700" in text
