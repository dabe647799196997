"""What 04-06 read their runs with (rev.chapters.shared): a run's speed with its spread, a ratio of runs timed
apart (never a verdict), loss spikes, the summary table and the max-batch views, run on results that contradict
each other's usual story.

Run folders are written as `rev.training.loop` leaves them (summary.json, log.csv with the 0-based step index),
without training.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from rev.chapters.shared.results import load_runs, max_batch_views, view_gaps
from rev.chapters.shared.run_log import val_loss_after_steps
from rev.chapters.shared.runs import loss_spikes, run_speed, summary_table
from rev.chapters.shared.tables import tidy
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

