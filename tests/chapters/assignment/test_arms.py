"""Notebook 05's three arms (rev.chapters.assignment.arms): the stored twin measured on run 2's weights gives the
reversible trunk's loss and gradients, and the table holds each arm the effects are read from."""
from __future__ import annotations

import pytest

from rev.chapters.assignment import arms


def _bench(rev_act: float = 1.0) -> dict:
    rows = [{"trunk": "residual", "peak_bytes": 40 * 2**20, "activation_bytes": 30 * 2**20, "tokens_per_s": 1000,
             "step_times": [1.0, 1.1, 0.9, 1.0]},
            {"trunk": "midpoint", "peak_bytes": 41 * 2**20, "activation_bytes": 31 * 2**20, "tokens_per_s": 990,
             "step_times": [1.0, 1.1, 0.95, 1.0]},
            {"trunk": "midpoint_rev", "peak_bytes": 15 * 2**20, "activation_bytes": rev_act * 2**20,
             "tokens_per_s": 750, "step_times": [1.3, 1.4, 1.3, 1.35]}]
    return {"runs": rows}


def test_each_effect_comes_from_the_pair_that_isolates_it():
    run1 = {"trunk": "residual", "final_val_loss": 2.00}
    run2 = {"trunk": "midpoint_rev", "h": 0.5, "final_val_loss": 1.90}
    twin = {"trunk": "midpoint_rev", "twin": "midpoint", "val_loss_reversible": 1.90, "val_loss_stored": 1.90,
            "grad_rel_error": 2e-6, "grad_cosine": 1.0}
    table = arms.three_arms(run1, run2, _bench(), twin)
    assert list(table["backward"]) == ["stored", "stored", "rebuilt"]
    assert table["activations MiB"].iloc[2] == 1.0 and table["loss measured"].iloc[1] == "on run 2's weights"


def test_the_reversibility_effect_compares_the_twin_with_the_same_slicing():
    """Run 2 runs its batch in slices, the stored twin whole: with the reversible trunk also timed whole, the
    reversibility effect reads that row, so the slicing is not a second cause of the memory gap."""
    bench = _bench()
    sliced = dict(bench["runs"][2], batch_slice=4, activation_bytes=0.5 * 2**20)
    whole = dict(bench["runs"][2], batch_slice=0, activation_bytes=2 * 2**20, peak_bytes=16 * 2**20)
    bench["runs"][2:] = [sliced, whole]
    assert arms.bench_row(bench, "midpoint_rev") is sliced and arms.bench_row(bench, "midpoint_rev", whole=True) is whole
    run1 = {"trunk": "residual", "final_val_loss": 2.00}
    run2 = {"trunk": "midpoint_rev", "h": 0.5, "final_val_loss": 1.90}
    twin = {"trunk": "midpoint_rev", "twin": "midpoint", "val_loss_reversible": 1.90, "val_loss_stored": 1.90,
            "grad_rel_error": 2e-6, "grad_cosine": 1.0}
    table = arms.three_arms(run1, run2, bench, twin)
    assert list(table["activations MiB"]) == [30.0, 31.0, 0.5, 2.0]
    assert table.index[2].endswith("slices of 4") and table.index[3] == "reversible, whole batch"


@pytest.mark.slow
def test_the_stored_twin_on_trained_weights_matches_the_reversible_trunk(tmp_path, smoke_data):
    from rev.chapters.shared.runs import train_run

    run = train_run("run2_reversible_same_batch", "smoke", tmp_path, smoke_data, progress=False,
                    trunk="midpoint_rev", h=0.5, train_tokens=4096)
    twin = arms.paired_twin(run, smoke_data)
    assert twin["twin"] == "midpoint" and twin["grad_rel_error"] < arms.GRAD_AGREE
    assert twin["val_loss_stored"] == pytest.approx(twin["val_loss_reversible"], abs=1e-5)
    assert twin["val_loss_reversible"] == pytest.approx(run["final_val_loss"], abs=1e-5)   # the run's own evaluation
    assert twin["grad_cosine"] > 0.999999


def test_a_prediction_is_read_back_only_when_it_was_recorded():
    from rev.chapters.assignment import predictions_against

    text = predictions_against({"speed ratio": 0.8, "peak ratio": None}, {"speed ratio": 0.74, "peak ratio": 0.3})
    assert "you predicted 0.80, measured 0.74 (+8% of the measurement)" in text
    assert "peak ratio: measured 0.30; no prediction recorded" in text


def test_the_bench_is_kept_where_the_report_reads_it(tmp_path):
    from rev.chapters.report.headline import bench_speed
    from rev.chapters.shared.results import BENCH_FILE, load_runs

    bench = _bench() | {"batch": 8, "steps": 4}
    path = arms.save_bench("smoke", tmp_path, bench)
    assert path == tmp_path / "smoke" / BENCH_FILE
    kept = load_runs(tmp_path, "smoke").attrs["bench"]
    assert kept["batch"] == 8 and [r["trunk"] for r in kept["runs"]] == ["residual", "midpoint", "midpoint_rev"]
    s = bench_speed(kept, {"trunk": "midpoint_rev", "batch_size": 8})
    assert s.value == pytest.approx(1 / 1.3, rel=0.05) and s.hi < 1
