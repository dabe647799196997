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


def _arms(acc_gap, acc_noise, rank_c=3.0, rank_f=5, cos=0.99, loss_f=None):
    """Paired rows of 8 seeds: the controller's accuracy = fixed's + acc_gap + noise (alternating sign)."""
    rows = []
    for s in range(8):
        rows.append({"seed": s, "arm": "fixed", "rank": rank_f, "accuracy": 0.8, "grad_cos": 0.999,
                     "final_loss": (loss_f or [0.2] * 8)[s]})
        rows.append({"seed": s, "arm": "controller", "rank": rank_c, "grad_cos": cos, "final_loss": 0.2,
                     "accuracy": 0.8 + acc_gap + acc_noise * (-1) ** s})
    return pd.DataFrame(rows)


def test_success_needs_lower_rank_non_inferior_accuracy_and_good_cosines():
    from rev.chapters.lowrank import success_criterion, success_line

    assert success_criterion(_arms(-0.005, 0.002))["met"]           # a little worse, tightly: non-inferior
    wide = success_criterion(_arms(-0.005, 0.05))                    # same mean gap, seeds all over the place
    assert not wide["non_inferior"] and not wide["met"] and "not shown non-inferior" in success_line(wide)
    assert not success_criterion(_arms(-0.05, 0.002))["met"]         # clearly worse: fails the margin
    assert not success_criterion(_arms(0.0, 0.002, rank_c=5.0))["met"]  # no lower rank, no win
    low_cos = success_criterion(_arms(0.0, 0.002, cos=0.97))
    assert not low_cos["cosine_ok"] and "not above 0.98" in success_line(low_cos)


def test_the_seed_that_carries_a_spread_is_named():
    from rev.chapters.lowrank import outlier_line

    assert outlier_line(_arms(0.0, 0.0)) is None
    line = outlier_line(_arms(0.0, 0.0, loss_f=[0.2] * 7 + [5.9]))
    assert "fixed arm's seed 7 ended at loss 5.900" in line and "median of 0.200" in line
