"""The assignment's later pieces: run 3b's reliability flag, the max-batch runs' two views, the loss-head
ablation's table and finding, the screening's runner-up, and the cpu profile's max-batch sizing rule."""
import csv
import json
from pathlib import Path

import pytest

from rev.chapters.screening import distinct_runner_up
from rev.chapters.shared.results import (load_runs, loss_head_table, max_batch_views, screening_check,
                              stream_reliability, stream_runs)
from rev.chapters.screening.rule import ASSIGNMENT_FINAL, screening_candidates
from rev.chapters.assignment.searches import loss_head_ablation, other_stream
from rev.core.loss import LOSS_HEADS
from rev.core.reversible import RECON_LIMIT
from rev.base.profiles import get_profile
from rev.chapters.assignment.sizes import chapter_sizes, max_batch_tokens

UNIGRAM = 5.0


def _run(folder: Path, trunk: str, stream: str, batch: int, steps: int, recon, val_end: float, h: float = 1.0,
         tokens_per_step: int | None = None) -> None:
    """A finished run folder as `train` leaves it (summary.json, log.csv), without training: validation loss
    falls linearly from 6.0 to `val_end`, evaluated every step."""
    folder.mkdir(parents=True)
    per = tokens_per_step or batch * 64
    with open(folder / "log.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "tokens", "loss", "lr", "grad_norm", "tokens_per_s", "val_loss"])
        for s in range(1, steps + 1):
            w.writerow([s, s * per, 6.0, 1e-3, 1.0, 1000, 6.0 + (val_end - 6.0) * s / steps])
    (folder / "summary.json").write_text(json.dumps({
        "trunk": trunk, "h": h, "stream": stream, "n_layer": 2, "batch_size": batch, "steps": steps,
        "tokens": steps * per, "final_val_loss": val_end, "final_train_loss": val_end, "tokens_per_s": 1000 * batch,
        "reconstruction_error": recon, "unigram_val_loss": UNIGRAM, "peak_memory_bytes": 2**20 * batch,
        "device": "CPU"}))


@pytest.fixture
def results(tmp_path) -> Path:
    prof = tmp_path / "smoke"
    _run(prof / "run1b_baseline_maxbatch", "residual", "fp32", 8, 40, None, 4.6)
    _run(prof / "run3_reversible_max_batch", "reveuler_rev", "fp32", 32, 10, 10 * RECON_LIMIT, 4.8)
    _run(prof / "run3b_reversible_max_batch_stream", "reveuler_rev", "fp64", 20, 16, 1e-13, 4.7)
    _run(prof / "run2_reversible_same_batch", "reveuler_rev", "fp32", 8, 40, 1e-6, 4.5)
    _run(prof / "run2b_screening_runner_up", "midpoint_rev", "fp32", 8, 40, 1e-6, 4.4, h=0.5)
    (prof / "screening.json").write_text(json.dumps({
        "runs": [{"name": "reveuler_rev_h1_fp32", "val_loss": 5.1}, {"name": "midpoint_rev_h0.5_fp32", "val_loss": 5.2}],
        "chosen": {"trunk": "reveuler_rev", "h": 1.0, "stream": "fp32"}, "reason": "test"}))
    return tmp_path


def test_run3b_flags_an_fp32_run_above_the_limit_as_unreliable_with_its_error(results):
    df = load_runs(results, "smoke")
    t = stream_runs(df).set_index("stream")
    assert list(t["run"]) == ["run3_reversible_max_batch", "run3b_reversible_max_batch_stream"]
    assert not t.loc["fp32", "reliable"] and t.loc["fp64", "reliable"]
    assert t.loc["fp32", "why"].startswith("unreliable: error") and f"> {RECON_LIMIT:g}" in t.loc["fp32", "why"]
    # exactly at the limit still counts as reliable; no measurement is no verdict
    assert stream_reliability("fp32", RECON_LIMIT)[0] is True and stream_reliability("fp32", None)[0] is None


def test_max_batch_views_compare_at_equal_tokens_and_at_equal_steps(results):
    v = max_batch_views(load_runs(results, "smoke")).set_index("run")
    assert set(v["equal_steps"]) == {10} and set(v["equal_tokens"]) == {8 * 64 * 40}  # the smallest of each
    # linear validation curves: at step 10 the 40-step run is a quarter of the way down
    assert v.loc["run1b_baseline_maxbatch", "val_loss_at_equal_steps"] == pytest.approx(6.0 - 1.4 / 4)
    assert v.loc["run3_reversible_max_batch", "val_loss_at_equal_steps"] == pytest.approx(4.8)
    assert v.loc["run1b_baseline_maxbatch", "below_context_free"] == pytest.approx(UNIGRAM - 4.6)
    assert set(v["steps"]) == {10, 16, 40}


def test_screening_check_puts_the_pick_beside_the_runner_up(results):
    df = load_runs(results, "smoke")
    t = screening_check(df).set_index("role")
    assert t.loc["screening's pick", "screening_val_loss"] == 5.1 and t.loc["runner-up", "final_val_loss"] == 4.4
    rows = [{"name": n, "trunk": t, "h": 1.0, "stream": s, "val_loss": v, "tokens_per_s": 1, "reconstruction_error": e}
            for n, t, s, v, e in (("base", "residual", "fp32", 1.0, None), ("a", "reveuler_rev", "fp32", 2.0, 1e-6),
                                  ("b", "midpoint_rev", "fp32", 2.1, 1e-6), ("c", "reveuler_rev", "fp64", 1.5, 1.0))]
    chosen = {"trunk": "reveuler_rev", "h": 1.0, "stream": "fp32"}
    assert distinct_runner_up({"runs": rows, "chosen": chosen})["name"] == "b"   # c fails the limit, a is the pick
    assert distinct_runner_up({"runs": rows[:2], "chosen": chosen}) is None


@pytest.mark.slow  # six measured max-batch searches (a few seconds on an idle CPU)
def test_loss_head_table_and_finding_on_a_tiny_geometry(tmp_path):
    budget = 6 * 2**20
    out = loss_head_ablation("smoke", [{"trunk": "residual"}, {"trunk": "reveuler_rev", "h": 1.0, "stream": "fp32"}],
                             tmp_path, device="cpu", budget_bytes=budget, progress=False)
    assert json.loads((tmp_path / "smoke" / "loss_heads.json").read_text()) == out
    t = loss_head_table(out).set_index("loss_head")
    assert list(t.index) == ["plain", "chunked", "fused"] and list(t.columns) == ["residual", "reveuler_rev",
                                                                                 "reversible / residual"]
    assert len(out["rows"]) == 2 * len(LOSS_HEADS) and (t[["residual", "reveuler_rev"]] >= 1).all().all()
    assert t.loc["plain", "reveuler_rev"] < t.loc["fused", "reveuler_rev"]      # logits at once cost batch
    assert t.loc["fused", "reversible / residual"] == pytest.approx(t.loc["fused", "reveuler_rev"]
                                                                    / t.loc["fused", "residual"])


def test_cpu_max_batch_runs_get_at_least_120_steps():
    prof = get_profile("cpu")
    assert chapter_sizes(prof).max_batch_min_steps >= 120
    for batch in (7, 28, 42, 60, 250):
        tokens = max_batch_tokens("cpu", [7, batch])
        assert tokens >= prof.train_tokens and tokens // (batch * prof.seq_len) >= chapter_sizes(prof).max_batch_min_steps
    assert max_batch_tokens("cpu", [7, 250]) // (250 * prof.seq_len) == chapter_sizes(prof).max_batch_min_steps
    # at the budget's max batches (about 42 for reveuler_rev) the profile's own token budget suffices
    assert max_batch_tokens("cpu", [7, 41]) == prof.train_tokens


def test_screening_tries_the_assignment_final_configuration():
    assert ASSIGNMENT_FINAL in screening_candidates("cpu") and ASSIGNMENT_FINAL in screening_candidates("smoke")
    assert other_stream({"trunk": "reveuler_rev", "h": 0.5, "stream": "fp64"})["stream"] == "fp32"
    assert other_stream({"trunk": "reveuler_rev", "h": 1.0, "stream": "fp32"})["key"] == "reveuler_rev_fp64"


def test_the_gpu_budget_is_the_profiles_unless_the_gpu_can_give_less(fake_cuda):
    from rev.chapters.assignment.searches import memory_budget

    t4 = get_profile("t4")
    assert t4.gpu_mem_budget > 0
    assert memory_budget(t4, "cuda") == t4.gpu_mem_budget          # a 16 GiB T4 gives more than the budget
    fake_cuda.other_processes_bytes = fake_cuda.total_bytes - t4.gpu_mem_budget // 2   # the GPU has less to give
    assert 0 < memory_budget(t4, "cuda") < t4.gpu_mem_budget // 2
    assert memory_budget(t4.replace(gpu_mem_budget=0), "cuda") == memory_budget(t4, "cuda")   # none set: all of it
    assert memory_budget(t4, "cpu") == t4.cpu_mem_budget
