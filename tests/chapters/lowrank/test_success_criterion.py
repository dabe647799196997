"""The idea's success criterion on one comparison (rev.chapters.lowrank.comparison.success_criterion)."""
import pandas as pd

from rev.chapters.lowrank import ACC_MARGIN, COS_GOOD, success_criterion


def _arms(acc_gap, acc_noise, rank_c=3.0, rank_f=5, cos=0.99, cos_f=0.999):
    """Paired rows of 8 seeds: the controller's accuracy = fixed's + acc_gap + noise (alternating sign)."""
    rows = []
    for s in range(8):
        rows.append({"seed": s, "arm": "fixed", "rank": rank_f, "accuracy": 0.8, "grad_cos": cos_f})
        rows.append({"seed": s, "arm": "controller", "rank": rank_c, "grad_cos": cos,
                     "accuracy": 0.8 + acc_gap + acc_noise * (-1) ** s})
    return pd.DataFrame(rows)


def test_success_needs_lower_rank_non_inferior_accuracy_and_good_cosines():
    assert success_criterion(_arms(-0.005, 0.002))["met"]           # a little worse, tightly: non-inferior
    wide = success_criterion(_arms(-0.005, 0.05))                    # same mean gap, seeds all over the place
    assert not wide["non_inferior"] and not wide["met"]
    assert not success_criterion(_arms(-0.05, 0.002))["met"]         # clearly worse: fails the margin
    assert not success_criterion(_arms(0.0, 0.002, rank_c=5.0))["met"]  # no lower rank, no win
    low_cos = success_criterion(_arms(0.0, 0.002, cos=0.97))
    assert not low_cos["cosine_ok"] and not low_cos["met"]


def test_the_margin_is_the_boundary_and_the_fixed_arm_cosine_is_reported():
    # an interval whose lower end sits just above / just below -ACC_MARGIN (a plain "interval excludes 0" rule
    # would call both inferior: neither includes 0 here... both lie below 0)
    above = success_criterion(_arms(-ACC_MARGIN + 0.004, 0.001))
    below = success_criterion(_arms(-ACC_MARGIN - 0.004, 0.001))
    assert above["acc_hi"] < 0 and above["non_inferior"] and not below["non_inferior"]
    s = success_criterion(_arms(0.0, 0.002, cos_f=0.915))
    assert s["cos_min_f"] == 0.915 and s["cos_min_f"] < COS_GOOD and s["cosine_ok"]   # the controller's own bound
