"""Notebook 05's seed spread (rev.chapters.assignment.seeds): the paired interval, the pooled spread, the tie it
implies, and words that turn with them."""
import math

import pytest

from rev.chapters.assignment.seeds import replica_name, seed_spread, seed_tie, spread_finding
from rev.chapters.screening.rule import LOSS_TIE


def _runs(base, rev):
    return {"run1_baseline": [{"final_val_loss": v} for v in base],
            "run2_reversible_same_batch": [{"final_val_loss": v} for v in rev]}


def test_a_steady_gap_is_resolved_and_the_tie_comes_from_the_pooled_spread():
    s = seed_spread(_runs([3.0, 3.1, 2.9], [2.88, 2.97, 2.79]))
    assert s["diff"] == pytest.approx([-0.12, -0.13, -0.11]) and s["diff_hi"] < 0 and s["same_sign"]
    assert s["sd"] == pytest.approx(math.sqrt((0.01 + 0.0081) / 2))
    assert s["tie"] == pytest.approx(2.776 * math.sqrt(2) * s["sd"], rel=1e-3)   # t(0.975, 4 df) = 2.776
    text = spread_finding(s)
    assert "the reversible run is lower beyond the seeds' spread" in text and "narrower than this" in text
    assert seed_tie(s) == (s["tie"], "the seed tie measured on runs 1 and 2 over 3 seeds")


def test_a_gap_whose_sign_changes_with_the_seed_is_not_resolved():
    s = seed_spread(_runs([3.0, 3.0, 3.0], [2.9, 3.1, 2.95]))
    assert s["diff_lo"] < 0 < s["diff_hi"] and not s["same_sign"]
    assert "do not separate the two runs" in spread_finding(s) and "the sign changes from seed to seed" in \
        spread_finding(s)


def test_one_seed_gives_no_interval_and_the_fixed_tie_says_so():
    s = seed_spread(_runs([3.0], [2.9]))
    assert "diff_lo" not in s and "single-seed difference" in spread_finding(s)
    assert seed_tie(s) == (LOSS_TIE, "the screening's fixed tie (no seed spread was measured)")


def test_unpaired_seeds_are_refused_and_replicas_have_their_own_folder():
    with pytest.raises(ValueError, match="pair them by seed"):
        seed_spread(_runs([3.0, 3.1], [2.9]))
    assert replica_name("run1_baseline", 0) == "run1_baseline"
    assert replica_name("run1_baseline", 2) == "seeds/run1_baseline_seed2"
