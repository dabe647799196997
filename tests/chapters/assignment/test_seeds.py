"""Notebook 05's seed spread (rev.chapters.assignment.seeds): the paired interval, the pooled spread, the tie it
implies, and the report's clause that turns with them."""
import math

import pytest

from rev.chapters.assignment.seeds import replica_name, seed_spread, seeds_reading, seeds_side
from rev.chapters.shared.verdicts import FALLBACK_TIE, Tie, seed_tie


def _runs(base, rev):
    return {"run1_baseline": [{"final_val_loss": v} for v in base],
            "run2_reversible_same_batch": [{"final_val_loss": v} for v in rev]}


def test_a_steady_gap_is_resolved_over_the_seeds_the_screening_did_not_pick_and_the_tie_is_pooled():
    s = seed_spread(_runs([3.0, 3.1, 2.9, 3.05], [2.88, 2.97, 2.79, 2.93]))
    assert s["diff"] == pytest.approx([-0.12, -0.13, -0.11, -0.12]) and s["diff_hi"] < 0 and s["same_sign"]
    assert s["verdict_seeds"] == 3 and s["verdict_mean"] == pytest.approx(-0.12)   # seed 0 (the screening's) left out
    base, rev = [3.0, 3.1, 2.9, 3.05], [2.88, 2.97, 2.79, 2.93]
    var = lambda v: sum((x - sum(v) / 4) ** 2 for x in v) / 3  # noqa: E731
    assert s["sd"] == pytest.approx(math.sqrt((var(base) + var(rev)) / 2))      # the spread pools every seed
    assert s["tie"] == pytest.approx(2.447 * math.sqrt(2) * s["sd"], rel=1e-3)   # t(0.975, 6 df) = 2.447
    assert "run 2 is lower beyond the seeds' spread" in seeds_reading(s) and seed_tie(s).wider_than(FALLBACK_TIE)
    assert seed_tie(s) == Tie(s["tie"], "the seed tie measured on runs 1 and 2 over 4 seeds", measured=True)
    assert seeds_side(s) == -1 and "over the 3 seeds other than seed 0" in seeds_reading(s)


def test_the_screening_seed_is_kept_out_of_the_verdict():
    """Seed 0 picked the trunk: its gap does not carry the verdict. Here the five seeds' interval excludes 0 and the
    four other seeds' holds it, so counting the selected draw would turn the verdict."""
    base, rev = [3.0] * 5, [2.94, 2.97, 2.95, 3.0, 2.96]            # differences -0.06, -0.03, -0.05, 0, -0.04
    s = seed_spread(_runs(base, rev))
    assert s["verdict_seeds"] == 4 and seeds_side(s) == 0
    assert seeds_side(seed_spread(_runs(base, rev), selected=None)) == -1
    only_one = seed_spread(_runs([3.0, 3.0], [2.5, 2.9]))            # two seeds: one left for a verdict, no interval
    assert seeds_side(only_one) is None and seeds_reading(only_one) is None and only_one["tie"] > 0


def test_a_gap_whose_sign_changes_with_the_seed_is_not_resolved():
    s = seed_spread(_runs([3.0, 3.0, 3.0, 3.0], [2.9, 3.1, 2.95, 3.02]))
    assert s["diff_lo"] < 0 < s["diff_hi"] and not s["same_sign"]
    assert seeds_side(s) == 0 and "do not separate the two runs" in seeds_reading(s)


def test_one_seed_gives_no_interval_and_the_fixed_tie_says_so():
    s = seed_spread(_runs([3.0], [2.9]))
    assert "diff_lo" not in s and "sd" not in s and seeds_reading(s) is None
    assert seed_tie(s) == FALLBACK_TIE and not seed_tie(s).measured and seed_tie(None) == FALLBACK_TIE


def test_unpaired_seeds_are_refused_and_replicas_have_their_own_folder():
    with pytest.raises(ValueError, match="pair them by seed"):
        seed_spread(_runs([3.0, 3.1], [2.9]))
    assert replica_name("run1_baseline", 0) == "run1_baseline"
    assert replica_name("run1_baseline", 2) == "seeds/run1_baseline_seed2"
