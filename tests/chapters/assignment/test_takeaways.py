"""Notebook 06 says what its outputs show: its takeaway and finding builders, run on results that contradict
each other's usual story (a gap inside the timing's spread, a deep run that loses, a loss spike, a larger batch
that loses), must say something different each time.

Run folders are written as `rev.training.loop` leaves them (summary.json, log.csv with the 0-based step index),
without training.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from rev.chapters.assignment import takeaways as T
from rev.chapters.shared.results import load_runs, max_batch_views, view_gaps
from rev.chapters.shared.run_log import val_loss_after_steps
from rev.chapters.shared.runs import loss_spikes, run_dir_of, run_speed, speed_ratio_between, summary_table
from rev.chapters.shared.tables import tidy
from rev.chapters.shared.verdicts import FALLBACK_TIE, TIMED_APART, Tie, speed_verdict, speed_words
from rev.core.model import GPTConfig
from rev.core.reversible import RECON_LIMIT
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


# --- notebook 06 ------------------------------------------------------------------------------------------

def _deep(n_layer: int = 6) -> MaxDepth:
    return MaxDepth(trunk="reveuler_rev", n_layer=n_layer, batch=8, budget_bytes=8 * 2**20, max_layers=12)


def test_the_depth_finding_says_when_the_deeper_model_lost(tmp_path):
    run1 = make_run(tmp_path, "run1_baseline", "residual", val=5.0)
    run2 = make_run(tmp_path, "run2_reversible_same_batch", val=4.9, tps=1000.0)
    lost = make_run(tmp_path / "a", "run4_reversible_deep", n_layer=6, val=5.1, tps=400.0)
    won = make_run(tmp_path / "b", "run4_reversible_deep", n_layer=6, val=4.6, tps=400.0)
    tie = make_run(tmp_path / "c", "run4_reversible_deep", n_layer=6, val=4.91, tps=[200.0, 2000.0] * 20)
    t_lost, t_won, t_tie = (T.depth_finding(run1, run2, r, _deep()) for r in (lost, won, tie))
    assert "the deeper model lost by 0.200 nats" in t_lost and "the deep run lost by 0.100 nats" in t_lost
    assert "the deeper model won by 0.300 nats" in t_won and "the deep run won by 0.400 nats" in t_won
    assert "a tie" in t_tie
    # 400 against 1000 tokens/s, timed apart: no speed verdict (the 2.5x gap could be the machine's)
    assert f"the two runs' speeds are {TIMED_APART}" in t_lost and "slower" not in t_lost
    # against a measured seed tie of 0.25 nats, the 0.2-nat loss is a tie (one seed each cannot call it)
    seeded = T.depth_finding(run1, run2, lost, _deep(), tie=Tie(0.25, "measured", True))
    assert "the deeper model lost" not in seeded and "a tie, within 0.25 nats" in seeded
    # a gap of exactly the tie is a tie: 5.0 - 4.5 = 0.5 exactly, against a 0.5-nat tie
    edge = make_run(tmp_path / "e", "run4_reversible_deep", n_layer=6, val=5.0)
    low = make_run(tmp_path / "e", "run2_reversible_same_batch", val=4.5)
    assert "a tie, within 0.5 nats" in T.depth_finding(run1, low, edge, _deep(), tie=Tie(0.5, "measured", True))
    assert "not in the results" in T.depth_finding(run1, None, lost, _deep())
    # run 4 at 6 layers with run 2's h: the horizon grew with the depth, and the finding says so
    assert "horizon L h grew with its depth (2 x 1 = 2 to 6 x 1 = 6)" in t_lost
    assert "horizon" not in T.depth_finding(run1, run2, make_run(tmp_path / "d", "run4_reversible_deep", val=5.1), _deep())


def test_where_the_memory_went_reads_batch_and_depth_against_run_2_at_equal_tokens(tmp_path):
    run1 = make_run(tmp_path, "run1_baseline", "residual", val=5.0)
    run2 = make_run(tmp_path, "run2_reversible_same_batch", val=4.9)
    same = {"budget_bytes": 8 * 2**20}            # the max-batch budget equals the depth search's (`_deep`)
    # run 3: batch 64 on run 2's tokens in 5 steps; B_simple 16 puts it above: a step worth 2.40 of one at batch
    # 8, 3.33x the tokens for the same loss
    runs = {}
    for case, (v3, v4) in {"depth": (5.2, 4.6), "batch": (4.5, 5.0), "tie": (4.9, 4.91)}.items():
        root = tmp_path / case
        runs[case] = (make_run(root, "run3_reversible_max_batch", batch=64, steps=5, eval_every=1, val=v3),
                      make_run(root, "run4_reversible_deep", n_layer=6, val=v4))
    depth, batch, tie = (T.memory_spend_finding(16.0, run1, run2, *runs[c], _deep(), maxbatch=same)
                         for c in ("depth", "batch", "tie"))
    assert "B_simple is 16 sequences" in depth and "worth 2.40 of a step at batch 8" in depth
    assert "3.33x the tokens" in depth
    assert "the same memory, the memory was better spent on depth, by 0.600 nats" in depth
    assert "run 3 lost by 0.300 nats" in depth and "run 4 won by 0.300 nats" in depth
    assert "better spent on batch, by 0.500 nats" in batch
    assert "Neither spending beat the other" in tie
    # budgets that differ (the max-batch budget against the baseline's own peak): no head-to-head verdict
    apart = T.memory_spend_finding(16.0, run1, run2, *runs["depth"], _deep(), maxbatch={"budget_bytes": 4 * 2**20})
    assert "better spent" not in apart and "spent different memory (batch: 4.0 MiB; depth: 8.0 MiB)" in apart
    assert "better spent" not in T.memory_spend_finding(16.0, run1, run2, *runs["depth"], _deep())   # unknown budget
    alone = T.memory_spend_finding(16.0, run1, None, *runs["depth"], _deep(), maxbatch=same)
    assert "against run 1 (a different trunk as well)" in alone
    # run 3 on 4x run 2's tokens, evaluated every 10 steps: none by run 2's 20,480 tokens (step 5); its first, at
    # step 10, bounds its gap from below
    late = make_run(tmp_path / "late", "run3_reversible_max_batch", batch=64, steps=20, eval_every=10, val=4.0)
    deep = make_run(tmp_path / "late", "run4_reversible_deep", n_layer=6, val=4.6)
    text = T.memory_spend_finding(16.0, run1, run2, late, deep, _deep(), maxbatch=same)
    assert "at least +0.100 nats (it had no evaluation by 20,480 tokens" in text   # 5.0 at step 10 vs 4.9
    assert "The bound cannot say which spending was better" in text


def test_a_loss_spike_is_found_where_it_happens_and_commented(tmp_path):
    calm = [6.0 - 0.01 * s + 0.02 * (s % 3) for s in range(80)]
    spiky = list(calm)
    spiky[50:53] = [calm[50] + 1.5, calm[51] + 0.9, calm[52] + 0.4]
    run_calm = make_run(tmp_path, "run1b_baseline_maxbatch", "residual", steps=80, losses=calm, lr=1e-3)
    run_spiky = make_run(tmp_path, "run3_reversible_max_batch", batch=32, steps=80, losses=spiky, lr=2e-3)
    assert loss_spikes(Path(run_calm["config"]["out_dir"])) == []
    [spike] = loss_spikes(Path(run_spiky["config"]["out_dir"]))
    assert spike.step == 50 and spike.tokens == 51 * 32 * SEQ and spike.recovered_after is not None
    text = T.spike_finding({"run1b": run_calm, "run3": run_spiky})
    assert "**run3**" in text and f"{51 * 32 * SEQ:,} tokens (step 50)" in text and "run1b**" not in text
    assert "the largest learning rate of these runs" in text and "not the memory-free backward" in text
    assert "No loss spike" in T.spike_finding({"run1b": run_calm})
    broken = make_run(tmp_path / "x", "run3_reversible_max_batch", steps=80, losses=spiky, recon=10 * RECON_LIMIT)
    assert "suspect its rebuilt gradients" in T.spike_finding({"run3": broken})


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


def test_run_3s_lesson_changes_with_what_a_step_bought(tmp_path):
    run1b = make_run(tmp_path, "run1b_baseline_maxbatch", "residual", batch=8, steps=40, val=4.6, tps=1000.0)
    # run 3 loses at equal tokens; at equal steps (10) run 1b is at 5.65, run 3 at 4.8: ahead step for step
    run3 = make_run(tmp_path, "run3_reversible_max_batch", batch=32, steps=10, val=4.8, eval_every=5, tps=3000.0)
    df, views = _views_frame(tmp_path)
    text = T.batch_lesson(run1b, run3, views)
    assert "run 3 at batch 32 took 10 optimizer steps, run 1b at batch 8 took 40 (4.0x as many)" in text
    assert "the larger batch lost by 0.200 nats" in text and "for lack of steps, not of data" in text
    assert "**On a GPU (a statement about GPUs, not a measurement of this workbook):**" in text
    assert "time per token then falls about 4.0x" in text
    assert f"their speeds are {TIMED_APART}" in text and "was faster" not in text   # 3000 vs 1000: timed apart
    # a larger batch that is behind even step for step reads otherwise
    other = tmp_path / "b"
    run1b_b = make_run(other, "run1b_baseline_maxbatch", "residual", batch=8, steps=40, val=3.0, tps=1000.0)
    run3_b = make_run(other, "run3_reversible_max_batch", batch=32, steps=10, val=5.9, eval_every=5, tps=900.0)
    text_b = T.batch_lesson(run1b_b, run3_b, _views_frame(other)[1])
    assert "even step for step the larger batch was behind" in text_b and "for lack of steps" not in text_b


def test_max_batch_takeaways_follow_the_runs(tmp_path):
    mb = {"budget_bytes": 16 * 2**20, "residual": {"batch": 8}, "reveuler_rev": {"batch": 32}}
    chosen = {"trunk": "reveuler_rev", "h": 1.0, "stream": "fp32"}

    def takeaways(root: Path, deep_val: float, spiky: bool, tie: Tie = FALLBACK_TIE) -> str:
        losses = [6.0 - 0.01 * s for s in range(40)]
        if spiky:
            losses[30] += 2.0
        runs = {"run1_baseline": make_run(root, "run1_baseline", "residual", val=5.0),
                "run2_reversible_same_batch": make_run(root, "run2_reversible_same_batch", val=5.0),
                "run1b_baseline_maxbatch": make_run(root, "run1b_baseline_maxbatch", "residual", val=4.6),
                "run3_reversible_max_batch": make_run(root, "run3_reversible_max_batch", batch=32, steps=10,
                                                      val=4.8, eval_every=5),
                "run4_reversible_deep": make_run(root, "run4_reversible_deep", n_layer=6, val=deep_val,
                                                 losses=losses)}
        return T.max_batch_takeaways(mb, chosen, runs, _deep(), tie=tie)

    a, b = takeaways(tmp_path / "a", 5.3, True), takeaways(tmp_path / "b", 4.7, False)
    assert "the deeper model lost" in a and "the deeper model won" in b
    # the seed tie reaches the depth finding inside these takeaways too: 0.3 nats either way is then a tie
    seeded = takeaways(tmp_path / "c", 4.7, False, tie=Tie(0.5, "measured", True))
    assert "the deeper model won" not in seeded and "a tie, within 0.5 nats" in seeded
    assert "Loss spikes (see the runs side by side): in run4_reversible_deep" in a and "No run's training loss" in b
    assert "run 3 lost by" in a and f"Their speeds are {TIMED_APART}" in a


def test_tables_print_whole_numbers_as_integers(tmp_path):
    runs = [make_run(tmp_path, "run1_baseline", "residual", batch=7), make_run(tmp_path, "run3_reversible_max_batch",
                                                                             batch=29)]
    shown = tidy(summary_table(runs).T)
    assert shown.loc["batch_size"].tolist() == ["7", "29"] and "7.0" not in shown.to_string()
    assert run_speed(runs[0]).n == 38   # the warm-up steps train leaves out are left out here too


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
    text = T.stalled_start(run_dir_of(stalled), stalled["unigram_val_loss"], run_dir_of(baseline))
    assert text.startswith("Run 3 stalled") and "(5.50) for 2" in text and "consecutive steps of its 40" in text
    lesson = T.batch_lesson(baseline, stalled)
    assert "Run 3 stalled" in lesson
    learning = make_run(tmp_path / "b", "run3_reversible_max_batch")            # falls from 6.0 to 5.0 steadily
    assert T.stalled_start(run_dir_of(learning), 5.5) is None and "stalled" not in T.batch_lesson(baseline, learning)


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
