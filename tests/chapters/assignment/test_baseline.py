"""Notebook 04's clock (rev.chapters.assignment.baseline): exercise 04.2's verdict respects the spread of the
timings, and the readings of a run's log say the opposite when the log does."""
from __future__ import annotations

import math
import statistics

import matplotlib
import pytest

matplotlib.use("Agg")

from rev.chapters.assignment import baseline  # noqa: E402
from rev.chapters.assignment.exercises import check_compare_speeds  # noqa: E402
from rev.chapters.shared.verdicts import Spread, machine_drift  # noqa: E402


def _run(tmp_path, speeds: list[float], final_val: float = 5.0, unigram: float = 5.2) -> dict:
    """A run summary whose folder holds a log.csv with these per-step tokens/s."""
    rows = ["step,tokens,loss,lr,grad_norm,tokens_per_s,val_loss"]
    rows += [f"{i},{64 * (i + 1)},{6 - i / 100},0.001,1.0,{s},{final_val if i == len(speeds) - 1 else ''}"
             for i, s in enumerate(speeds)]
    (tmp_path / "log.csv").write_text("\n".join(rows) + "\n")
    return {"config": {"out_dir": str(tmp_path)}, "final_val_loss": final_val, "unigram_val_loss": unigram,
            "tokens": 64 * len(speeds), "steps": len(speeds), "batch_size": 1, "model_config": {"seq_len": 64,
            "vocab_size": 512}, "peak_memory_bytes": 2 ** 20, "tokens_per_s": statistics.mean(speeds)}


def test_compare_speeds_and_its_check():
    assert baseline.compare_speeds([10, 11, 12, 13], [1, 2, 3, 4]) == baseline.FASTER
    assert baseline.compare_speeds([1, 2, 3, 4], [10, 11, 12, 13]) == baseline.SLOWER
    assert baseline.compare_speeds([1, 5, 9, 13], [2, 6, 10, 14]) == baseline.TOO_NOISY
    assert "agrees" in check_compare_speeds(baseline.compare_speeds)

    def by_median(a, b):
        return "faster" if statistics.median(a) > statistics.median(b) else "slower"

    def by_mean(a, b):
        qa, qb = statistics.mean(a), statistics.mean(b)
        return "faster" if qa > 1.2 * qb else "slower" if qb > 1.2 * qa else "too noisy to tell"

    def by_quartiles(a, b):     # the classic mistake: overlapping spreads read as "no difference"
        a_lo, _, a_hi = statistics.quantiles(a, n=4)
        b_lo, _, b_hi = statistics.quantiles(b, n=4)
        return "faster" if a_lo > b_hi else "slower" if a_hi < b_lo else "too noisy to tell"

    with pytest.raises(AssertionError, match="five steps this spread cannot pin a median down"):
        check_compare_speeds(by_median)
    with pytest.raises(AssertionError, match="a 3% shift over 200 steps"):
        check_compare_speeds(by_quartiles)
    with pytest.raises(AssertionError, match="one outlier"):
        check_compare_speeds(by_mean)
    with pytest.raises(AssertionError, match="return one of"):
        check_compare_speeds(lambda a, b: "same")


def test_the_clock_readings_tell_noise_from_a_drift(tmp_path):
    """What notebook 04's clock table reads from a log: noise from step to step moves neither the halves nor the
    windows; a machine that halves its speed half-way moves both."""
    steady = [1000, 1010, 990, 1005, 995, 1002, 998, 1001, 999, 1003, 997, 1000] * 2
    noisy = [500, 1500, 900, 1100, 700, 1300, 800, 1200, 1000, 600, 1400, 1000] * 2
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    run = _run(tmp_path / "a", noisy)
    assert baseline.compare_speeds(*baseline.speed_halves(run)) == baseline.TOO_NOISY
    assert not machine_drift(baseline.timed_steps(run)).changed
    drifting = _run(tmp_path / "b", steady[:12] + [s / 2 for s in steady[12:]])
    assert baseline.compare_speeds(*baseline.speed_halves(drifting)) == baseline.FASTER
    assert machine_drift(baseline.timed_steps(drifting)).changed


def test_spread_share_is_the_quartile_width_over_the_median():
    assert baseline.spread_share(Spread(1000.0, 900.0, 1100.0, 10, "quartiles")) == pytest.approx(0.2)
    assert math.isnan(baseline.spread_share(Spread(0.0, 0.0, 0.0, 10, "quartiles")))


def test_halves_leave_out_the_warm_up_steps(tmp_path):
    speeds = [10.0, 20.0] + [1000.0] * 38  # the first two steps, slow, are the warm-up `train` does not count
    run = _run(tmp_path, speeds)
    assert baseline.timed_steps(run) == [1000.0] * 38
    first, second = baseline.speed_halves(run)
    assert len(first) == len(second) == 19
    fig = baseline.plot_step_speeds(run)
    assert fig is not None and len(fig.axes) == 1
    matplotlib.pyplot.close(fig)
