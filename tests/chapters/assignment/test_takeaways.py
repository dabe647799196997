"""Notebooks 05 and 06 say what their outputs show: their takeaway and finding builders, run on results that
contradict each other's usual story (a slower or faster reversible step, a gap inside the timing's spread, a deep
run that loses, a loss spike, a larger batch that loses), must say something different each time.

Run folders are written as `rev.training.loop` leaves them (summary.json, log.csv with the 0-based step index),
without training.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from rev.chapters.assignment import takeaways as T
from rev.chapters.report.writer import stalled_start
from rev.chapters.screening.takeaways import screening_takeaways
from rev.chapters.shared.results import load_runs, max_batch_views, view_gaps
from rev.chapters.shared.run_log import val_loss_after_steps
from rev.chapters.shared.runs import loss_spikes, run_dir_of, run_speed, speed_ratio_between, summary_table
from rev.chapters.shared.tables import tidy
from rev.chapters.shared.verdicts import TIMED_APART, TOO_NOISY, speed_verdict, speed_words
from rev.core.model import GPTConfig
from rev.measure.maxbatch import MaxDepth

SEQ = 64


def make_run(root: Path, name: str, trunk: str = "reveuler_rev", batch: int = 8, n_layer: int = 2,
             val: float = 5.0, tps: float | list[float] = 1000.0, steps: int = 40, losses: list[float] | None = None,
             recon: float | None = 1e-6, lr: float = 1e-3, eval_every: int = 10, peak_mib: float = 8.0) -> dict:
    """A finished run folder and its summary: validation loss falls linearly from 6.0 to `val`, evaluated every
    `eval_every` steps and at the last; `tps` one tokens/s for every step or one per step."""
    folder = root / "smoke" / name
    folder.mkdir(parents=True)
    per = batch * SEQ
    tps = tps if isinstance(tps, list) else [tps] * steps
    losses = losses or [6.0 - 1.0 * s / steps for s in range(steps)]
    with open(folder / "log.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "tokens", "loss", "lr", "grad_norm", "tokens_per_s", "val_loss"])
        for s in range(steps):
            last = s == steps - 1
            v = 6.0 + (val - 6.0) * (s + 1) / steps if (s + 1) % eval_every == 0 or last else ""
            w.writerow([s, (s + 1) * per, losses[s], lr, 1.0, tps[s], v])
    mc = GPTConfig(vocab_size=512, seq_len=SEQ, n_layer=n_layer, n_head=2, d_model=64, trunk=trunk).to_dict()
    summary = {"run": name, "trunk": trunk, "h": 1.0, "stream": "fp32", "n_layer": n_layer, "batch_size": batch,
               "steps": steps, "tokens": steps * per, "lr": lr, "lr_scaling": "sqrt", "final_val_loss": val,
               "final_train_loss": val, "unigram_val_loss": 5.5, "tokens_per_s": sorted(tps)[len(tps) // 2],
               "peak_memory_bytes": int(peak_mib * 2**20),
               "reconstruction_error": None if trunk == "residual" else recon,
               "model_config": mc, "config": {"out_dir": str(folder)}, "device": "CPU"}
    (folder / "summary.json").write_text(json.dumps(summary))
    return summary


def bench(base_times: list[float], rev_times: list[float], twin_times: list[float] | None = None) -> dict:
    """An interleaved bench: residual, the reversible trunk and (where given) its stored twin, round by round."""
    twin = [] if twin_times is None else [{"trunk": "reveuler", "head": "fused", "step_times": twin_times}]
    return {"runs": [{"trunk": "residual", "head": "fused", "step_times": base_times},
                     {"trunk": "reveuler_rev", "head": "fused", "step_times": rev_times}] + twin}


# --- notebook 05 ------------------------------------------------------------------------------------------

def test_the_speed_verdict_follows_the_bench_and_its_spread(tmp_path):
    run1 = make_run(tmp_path, "run1_baseline", "residual", val=5.0, tps=1000.0, peak_mib=8)
    run2 = make_run(tmp_path, "run2_reversible_same_batch", val=5.0, tps=460.0, peak_mib=5)
    slower = T.same_batch_speed(0.8, bench([1.0] * 9, [1.2, 1.25, 1.3] * 3), "reveuler_rev", run1, run2)
    faster = T.same_batch_speed(0.8, bench([1.0] * 9, [0.4] * 9), "reveuler_rev", run1, run2)
    noisy = T.same_batch_speed(0.8, bench([1.0] * 9, [0.5, 2.0] * 4 + [1.0]), "reveuler_rev", run1, run2)
    texts = {k: T.speed_finding(v) for k, v in (("slower", slower), ("faster", faster), ("noisy", noisy))}
    assert "the reversible step was slower than the residual one" in texts["slower"]
    # no twin timed: the prediction is read against the residual, and the text says what that mixes in
    assert "lies inside the interval: the cost model holds" in texts["slower"]       # rounds 0.77-0.83 hold 0.8
    assert "mixes the architecture into the prediction's test" in texts["slower"]
    assert "was faster than the residual one" in texts["faster"] and "above 1" in texts["faster"]
    assert TOO_NOISY in texts["noisy"] and "slower than" not in texts["noisy"]
    # the training runs (0.46) are shown, never judged: timed apart
    for text in texts.values():
        assert f"The training runs: 0.46 (ratio of median steps, timed apart): {TIMED_APART}" in text
    assert len(set(texts.values())) == 3
    assert "converts" not in texts["slower"]           # an fp32 stream converts nothing


def test_the_prediction_is_read_against_the_stored_twin_not_the_residual(tmp_path):
    """The cost model predicts reversible / stored twin. A bench where the twin is itself slower than the
    residual (the architecture's cost) puts reversible / residual at 0.6 and reversible / twin at 0.8: the
    prediction 0.8 holds against the twin and would fail against the residual."""
    run1 = make_run(tmp_path, "run1_baseline", "residual", val=5.0, tps=1000.0, peak_mib=8)
    run2 = make_run(tmp_path, "run2_reversible_same_batch", val=5.0, tps=460.0, peak_mib=5)
    rounds = bench([1.0, 1.01, 0.99] * 3, [1 / 0.6, 1.01 / 0.6, 0.99 / 0.6] * 3, [0.8 / 0.6] * 9)
    speed = T.same_batch_speed(0.8, rounds, "reveuler_rev", run1, run2)
    assert speed.twin.value == pytest.approx(0.8) and speed.bench.value == pytest.approx(0.6)
    text = T.speed_finding(speed)
    twin_line, residual_line = (line for line in text.splitlines() if line.startswith("- Interleaved bench"))
    assert "against its stored twin" in twin_line and "the cost model holds" in twin_line
    assert "prediction" not in residual_line and "was slower than the residual one" in residual_line
    table = T.speed_table(speed)
    assert table.loc["bench: reversible / stored twin", "verdict"] == "slower"
    assert table.loc["training runs: run 2 / run 1", "verdict"] == TIMED_APART
    on_fixed = T.SameBatchSpeed(0.95, speed.bench, speed.runs, "fixed", speed.twin)   # 0.8 lies below 0.95
    assert "converts each block's input from its fixed stream" in T.speed_finding(on_fixed)


def test_same_batch_takeaways_change_with_speed_and_loss(tmp_path):
    run1 = make_run(tmp_path, "run1_baseline", "residual", val=5.0, tps=1000.0, peak_mib=8)
    lost = make_run(tmp_path / "a", "run2_reversible_same_batch", val=5.2, tps=460.0, peak_mib=5)
    won = make_run(tmp_path / "b", "run2_reversible_same_batch", val=4.8, tps=1500.0, peak_mib=5)
    slow = T.same_batch_speed(0.8, bench([1.0] * 9, [1.3] * 9), "reveuler_rev", run1, lost)
    text_lost = T.same_batch_takeaways(run1, lost, slow)
    text_won = T.same_batch_takeaways(run1, won, T.same_batch_speed(0.8, bench([1.0] * 9, [0.7] * 9),
                                                                   "reveuler_rev", run1, won))
    assert "the reversible trunk lost by 0.200 nats" in text_lost and "won by 0.200 nats" in text_won
    assert "was slower than" in text_lost and "was faster than" in text_won
    assert f"The training runs' own ratio is {TIMED_APART}" in text_lost
    # the loss gap is attributed to the architecture, with the stored twin named; slicing is said when it ran
    assert "one seed each" in text_lost and "not the memory-free backward's" in text_lost
    assert "the stored reveuler would train to the same loss" in text_lost and "slices" not in text_lost
    # over seeds, the interval decides, not the single-seed gap against the fixed tie
    spread = {"seeds": 3, "level": 0.95, "diff_mean": 0.05, "verdict_mean": 0.04, "verdict_seeds": 2,
              "selected_seed": 0, "diff_lo": -0.02, "diff_hi": 0.12}
    seeded = T.same_batch_takeaways(run1, lost, slow, spread=spread)
    assert "lost by" not in seeded and "on seed 0; over the 2 seeds other than seed 0" in seeded
    assert "the interval holds 0" in seeded
    assert "no gap to attribute" in seeded and "This gap is the architecture's" not in seeded
    sliced = T.same_batch_takeaways(run1, lost | {"batch_slicing": {"slices": 2, "described": "2 slices of 4 sequences"}})
    assert "ran the batch as 2 slices of 4 sequences" in sliced and "below 1/2" in sliced
    # no bench: no speed verdict at all, the runs being timed apart
    alone = T.same_batch_takeaways(run1, lost, T.same_batch_speed(0.8, None, "reveuler_rev", run1, lost))
    assert f"the training runs are {TIMED_APART}: no speed verdict" in alone and "slower" not in alone
    tie = make_run(tmp_path / "c", "run2_reversible_same_batch", val=5.01, tps=[300.0, 3000.0] * 20)
    assert "a tie" in T.same_batch_takeaways(run1, tie)


# --- notebook 06 ------------------------------------------------------------------------------------------

def _deep(n_layer: int = 6) -> MaxDepth:
    return MaxDepth(trunk="reveuler_rev", n_layer=n_layer, batch=8, budget_bytes=8 * 2**20, max_layers=12)


def test_a_loss_spike_is_found_where_it_happens_and_commented(tmp_path):
    calm = [6.0 - 0.01 * s + 0.02 * (s % 3) for s in range(80)]
    spiky = list(calm)
    spiky[50:53] = [calm[50] + 1.5, calm[51] + 0.9, calm[52] + 0.4]
    run_calm = make_run(tmp_path, "run1b_baseline_maxbatch", "residual", steps=80, losses=calm, lr=1e-3)
    run_spiky = make_run(tmp_path, "run3_reversible_max_batch", batch=32, steps=80, losses=spiky, lr=2e-3)
    assert loss_spikes(Path(run_calm["config"]["out_dir"])) == []
    [spike] = loss_spikes(Path(run_spiky["config"]["out_dir"]))
    assert spike.step == 50 and spike.tokens == 51 * 32 * SEQ and spike.recovered_after is not None


def test_a_gradual_bump_in_the_plotted_curve_is_a_spike_and_noise_is_not(tmp_path):
    import numpy as np

    rng = np.random.default_rng(0)
    steps = np.arange(400)
    falling = 2.0 + 3.0 * np.exp(-steps / 60) + rng.normal(0, 0.05, len(steps))
    bump = 0.25 * np.exp(-0.5 * ((steps - 300) / 5) ** 2)    # no single step far out: the curve rises
    calm = make_run(tmp_path, "calm", steps=400, losses=falling.tolist())
    bumpy = make_run(tmp_path, "bumpy", steps=400, losses=(falling + bump).tolist())
    assert loss_spikes(Path(calm["config"]["out_dir"])) == []
    [spike] = loss_spikes(Path(bumpy["config"]["out_dir"]))
    assert 285 <= spike.step <= 315 and spike.recovered_after is not None


def test_a_spike_in_the_first_steps_is_found_and_a_fast_fall_is_not(tmp_path):
    """The first steps have no window of past: run 3b's 9.72 at step 9 (111x its median gradient norm) sat in them."""
    import numpy as np

    rng = np.random.default_rng(1)
    steps = np.arange(120)
    falling = 3.0 + 4.6 * np.exp(-steps / 8) + rng.normal(0, 0.03, len(steps))   # 7.6 -> 3: steep at first
    early = falling.copy()
    early[9] = 9.72
    calm = make_run(tmp_path, "calm", steps=120, losses=falling.tolist())
    spiky = make_run(tmp_path, "spiky", steps=120, losses=early.tolist())
    assert loss_spikes(Path(calm["config"]["out_dir"])) == []
    [spike] = loss_spikes(Path(spiky["config"]["out_dir"]))
    assert spike.step == 9 and spike.loss == pytest.approx(9.72)


def _views_frame(root: Path):
    df = load_runs(root, "smoke")
    return df, max_batch_views(df)


def test_equal_steps_reads_the_run_with_fewest_steps_at_its_last_evaluation(tmp_path):
    # train logs the 0-based step index: the 10-step run's last evaluation is at index 9, after 10 steps
    make_run(tmp_path, "run1b_baseline_maxbatch", "residual", batch=8, steps=40, val=4.6)
    r3 = make_run(tmp_path, "run3_reversible_max_batch", batch=32, steps=10, val=4.8, eval_every=100)
    assert val_loss_after_steps(r3["config"]["out_dir"], 10) == pytest.approx(4.8)
    df, v = _views_frame(tmp_path)
    v = v.set_index("run")
    assert v.loc["run3_reversible_max_batch", "val_loss_at_equal_steps"] == pytest.approx(4.8)
    assert v.loc["run1b_baseline_maxbatch", "val_loss_at_equal_steps"] == pytest.approx(6.0 - 1.4 / 4)
    # a run evaluated only at its end has no value before it: the note says why instead of a bare dash
    make_run(tmp_path, "run3b_reversible_max_batch_stream", batch=16, steps=30, val=4.7, eval_every=100)
    df, v = _views_frame(tmp_path)
    notes = view_gaps(v, df).set_index("run")["note"]
    assert "first evaluation came after 30 steps" in notes["run3b_reversible_max_batch_stream"]
    assert notes["run3_reversible_max_batch"] == ""


def test_tables_print_whole_numbers_as_integers(tmp_path):
    runs = [make_run(tmp_path, "run1_baseline", "residual", batch=7), make_run(tmp_path, "run3_reversible_max_batch",
                                                                             batch=29)]
    shown = tidy(summary_table(runs).T)
    assert shown.loc["batch_size"].tolist() == ["7", "29"] and "7.0" not in shown.to_string()
    assert run_speed(runs[0]).n == 38   # the warm-up steps train leaves out are left out here too


def _screening(losses: dict[str, float]) -> dict:
    rows = [{"name": n, "trunk": "residual" if n == "base" else "reveuler_rev", "h": 1.0, "stream": "fp32",
             "val_loss": v, "tokens_per_s": 1.0, "reconstruction_error": None if n == "base" else 1e-6}
            for n, v in losses.items()]
    return {"runs": rows, "chosen": {"trunk": "reveuler_rev", "h": 1.0, "stream": "fp32"}, "tokens": 1000}


def test_screening_takeaways_call_a_difference_inside_the_tie_a_tie():
    tied = screening_takeaways(_screening({"base": 5.000, "a": 5.001, "b": 5.010}))
    assert "tied (within 0.02 nats) with 1 other" in tied and "a tie (+0.001 nats)." in tied
    clear = screening_takeaways(_screening({"base": 5.000, "a": 5.200, "b": 5.500}))
    assert "ahead of every other candidate" in clear and "4.999, 0.200 nats behind." not in clear and "0.200 nats behind." in clear
    ahead = screening_takeaways(_screening({"base": 5.300, "a": 5.200, "b": 5.210}))
    assert "0.100 nats ahead." in ahead


def test_a_screening_row_quotes_its_median_step_inside_its_quartiles(tmp_path, monkeypatch):
    """A few slow steps (a busy machine) pull a run's mean tokens/s below its own lower quartile; the screening's
    speed is the median step, which lies inside the quartiles drawn beside it."""
    from rev.chapters.screening import rule as screening

    def fake_train(name, profile, results, data_dir, **kw):
        slow = [1000.0] * 30 + [20.0] * 6
        s = make_run(tmp_path, name.replace("/", "_"), trunk=kw["trunk"], tps=slow, steps=len(slow))
        return {**s, "tokens_per_s": len(slow) / sum(1 / v for v in slow)}   # the whole run: ~146 tokens/s

    monkeypatch.setattr(screening, "train_run", fake_train)
    monkeypatch.setattr(screening, "write_json", lambda path, obj: None)
    cands = [screening.Candidate("residual", 1.0, "fp32"), screening.Candidate("reveuler_rev", 1.0, "fp32")]
    for row in screening.screen("smoke", tmp_path, tmp_path, cands, progress=False)["runs"]:
        assert row["tokens_per_s_q1"] <= row["tokens_per_s"] <= row["tokens_per_s_q3"] and row["tokens_per_s"] == 1000


def test_a_run_that_sat_on_the_context_free_line_is_called_stalled_and_a_learning_one_is_not(tmp_path):
    flat = [6.0] * 3 + [5.5] * 25 + [5.0 - 0.05 * i for i in range(12)]       # 25 steps on the 5.5 line
    stalled = make_run(tmp_path, "run3_reversible_max_batch", losses=flat, steps=40)
    baseline = make_run(tmp_path, "run1b_baseline_maxbatch", "residual")
    text = stalled_start(run_dir_of(stalled), stalled["unigram_val_loss"], run_dir_of(baseline), label="Run 3")
    assert text.startswith("Run 3 stalled") and "(5.50) for 2" in text and "consecutive steps of its 40" in text
    learning = make_run(tmp_path / "b", "run3_reversible_max_batch")            # falls from 6.0 to 5.0 steadily
    assert stalled_start(run_dir_of(learning), 5.5) is None


def test_runs_timed_apart_get_no_speed_verdict_however_plain_their_gap(tmp_path):
    """Two runs of 300 steps, 1000 vs 500 tokens/s with a spread of 30: a bootstrap over their steps would call it
    beyond doubt, yet the runs ran minutes apart, so a change of load between them is in the gap: no verdict."""
    import numpy as np

    rng = np.random.default_rng(3)
    fast = make_run(tmp_path, "run1b_baseline_maxbatch", "residual", steps=300,
                    tps=(1000 + 30 * rng.standard_normal(300)).tolist())
    slow = make_run(tmp_path, "run3_reversible_max_batch", steps=300, tps=(500 + 30 * rng.standard_normal(300)).tolist())
    ratio = speed_ratio_between(slow, fast)
    assert ratio.value == pytest.approx(0.5, rel=0.05) and not ratio.interleaved
    assert speed_verdict(ratio) == TIMED_APART
    assert speed_words(ratio, "run 3", "run 1b").startswith(f"run 3 against run 1b: {TIMED_APART}")
