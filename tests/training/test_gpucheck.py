"""`python -m rev gpucheck`: refuses on a machine without CUDA unless asked for its CPU doubles; every row that
can run on a CPU runs on every available device here, passes, and fails when the promise it checks is broken."""
import contextlib
from pathlib import Path

import pytest
import torch

from rev.__main__ import main
from rev.training import gpucheck
from rev.base.profiles import PROFILES

pytestmark = pytest.mark.cuda  # the CUDA path (or its double): in the GPU selection
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def test_refuses_without_a_gpu(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as e:
        main(["gpucheck"])
    assert e.value.code not in (0, None)  # a message: the exit status is 1
    assert "needs a CUDA GPU" in str(e.value.code)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype, scaler", [(None, False), (torch.bfloat16, False), (torch.float16, True)])
def test_twin_gap_within_tolerance_on_every_device(device, dtype, scaler):
    gap = gpucheck.twin_gap("reveuler", torch.device(device), dtype, scaler)
    tol = gpucheck.GRAD_TOL[dtype]
    assert gap["grad"] <= tol, gap
    if scaler:
        assert gap["step_taken"] and gap["step"] <= tol, gap


def test_twin_gap_catches_a_backward_without_autocast_replay(monkeypatch):
    from rev.core.reversible import AutocastState

    monkeypatch.setattr(AutocastState, "context", lambda self: contextlib.nullcontext())
    gap = gpucheck.twin_gap("midpoint", torch.device("cpu"), torch.bfloat16)
    assert gap["grad"] > gpucheck.GRAD_TOL[torch.bfloat16], gap


def test_training_rows_fall_back_to_a_named_synthetic_corpus(tmp_path):
    name, corpus = gpucheck.check_profile(tmp_path)
    try:
        assert name == "t4-synthetic" and "synthetic" in corpus
        assert PROFILES[name].data_source == "synthetic" and PROFILES[name].data_name != PROFILES["t4"].data_name
        assert PROFILES[name].n_layer == PROFILES["t4"].n_layer  # same geometry, other corpus
    finally:
        PROFILES.pop(name, None)
    (tmp_path / "tinystories").mkdir()
    (tmp_path / "tinystories" / "meta.json").write_text("{}")
    assert gpucheck.check_profile(tmp_path) == ("t4", "tinystories")


def test_table_lists_every_row():
    rows = [gpucheck.Row("gradients fp32", "pass", "max rel. gap 0.0e+00", 1.2),
            gpucheck.Row("max batch residual", "info", "40", 30.0)]
    table = gpucheck.format_table(rows, "gpucheck on X")
    assert table.splitlines()[0] == "gpucheck on X" and len(table.splitlines()) == 4
    assert "max batch residual" in table and "pass" in table


# --- the rows that also run on a CPU (each once per available device) ------------------------------------------

CPU = torch.device("cpu")


def _dtype(device: str) -> torch.dtype:
    """The half type training uses there: a T4's fp16 on a CPU (the double), the GPU's own otherwise."""
    from rev.base.device import amp_dtype

    return amp_dtype(torch.device(device)) if device == "cuda" else torch.float16


@pytest.mark.parametrize("device", DEVICES)
def test_layout_twins_pass_and_a_dropped_chunk_fails(device, monkeypatch):
    dev = torch.device(device)
    row = gpucheck.layout_row(dev, _dtype(device))
    assert row.verdict == "pass" and "chunks 64/256" in row.check, row
    import rev.core.reversible as R

    chunks = R.position_chunks
    monkeypatch.setattr(R, "position_chunks", lambda *a: (lambda c: c[:-1] if len(c) > 1 else c)(chunks(*a)))
    assert gpucheck.layout_row(dev, _dtype(device)).verdict == "FAIL"


@pytest.mark.parametrize("device", DEVICES)
def test_fused_head_row_under_fp16(device):
    row = gpucheck.head_row(torch.device(device), *(() if device == "cuda" else (1024, 2048, 64)))
    assert row.verdict == "pass", row


@pytest.mark.parametrize("device", DEVICES)
def test_scaler_skip_row_and_a_scaler_that_never_skips(device, monkeypatch):
    dev = torch.device(device)
    row = gpucheck.scaler_skip_row(dev)
    assert row.verdict == "pass" and "skipped with weights unchanged" in row.figure, row
    monkeypatch.setattr(torch.amp.GradScaler, "_maybe_opt_step",
                        lambda self, optimizer, state, *a, **k: optimizer.step())   # steps on inf gradients too
    assert gpucheck.scaler_skip_row(dev).verdict == "FAIL"


@pytest.mark.parametrize("device", DEVICES)
def test_fixed_stream_row_is_bit_exact(device):
    row = gpucheck.fixed_recon_row(torch.device(device), _dtype(device))
    assert row.verdict == "pass" and row.figure.count("0.0e+00") == 2, row


@pytest.mark.parametrize("device", DEVICES)
def test_oom_inside_the_reversible_backward_is_a_miss(device):
    def run_out() -> None:   # cuBLAS's kind: a plain RuntimeError (on CUDA the row allocates for real)
        raise RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasSgemm( handle, ...)`")

    row = gpucheck.oom_backward_row(torch.device(device), None if device == "cuda" else run_out)
    assert row.verdict == "pass" and "ran out in backward" in row.figure and "freed" in row.figure, row


@pytest.mark.parametrize("device", DEVICES)
def test_relative_memory_row(device):
    row = gpucheck.relative_memory_row(torch.device(device), 64 * 2**20)
    assert row.verdict == "pass", row


@pytest.mark.parametrize("device", DEVICES)
def test_resume_row_and_a_resume_that_forgets_the_optimizer(device, smoke_data, monkeypatch):
    dev = torch.device(device)
    row = gpucheck.resume_row(dev, smoke_data, steps=12)
    assert row.verdict == "pass" and (device == "cuda" or "bit-exact" in row.figure), row
    monkeypatch.setattr(torch.optim.AdamW, "load_state_dict", lambda self, state: None)
    assert gpucheck.resume_row(dev, smoke_data, steps=12).verdict == "FAIL"


def test_training_verdict_asks_for_more_than_ln_v(smoke_data):
    """20 smoke steps end below ln V (a model that only learnt token counts) but not below the unigram loss."""
    rows = gpucheck.train_rows(CPU, smoke_data, "reveuler_rev", 20, profile="smoke")
    for r in rows:
        val, unigram, ln_v = (float(r.figure.split(k)[1].split()[0].strip("(),;"))
                              for k in ("val", "unigram", "ln V"))
        assert val < ln_v and r.verdict == ("pass" if val < unigram - gpucheck.UNIGRAM_MARGIN else "FAIL"), r
    assert any(r.verdict == "FAIL" for r in rows)


def test_without_cuda_the_gpu_rows_skip_and_the_doubles_run(monkeypatch):
    ran = []
    for name in ("grad_rows", "layout_row", "head_row", "scaler_skip_row", "fixed_recon_row", "flat_memory_row",
                 "relative_memory_row", "oom_row", "oom_backward_row", "resume_row", "bench_rows",
                 "max_batch_rows", "slicing_rows", "train_rows"):
        monkeypatch.setattr(gpucheck, name, lambda *a, _n=name, **k: ran.append(_n) or gpucheck.Row(_n, "pass", "", 1.0))
    rows = gpucheck.gpucheck(CPU, Path("data"))
    gpu_only = {"oom_row", "bench_rows", "max_batch_rows", "slicing_rows", "train_rows"}
    assert len(rows) == 14 and set(ran).isdisjoint(gpu_only)
    assert [r.verdict for r in rows].count("skip") == 5
    assert all("needs a CUDA GPU" in r.figure for r in rows if r.verdict == "skip")
    assert any("1,024-row slices" in r.figure for r in rows if r.verdict == "skip")


def test_the_slicing_rows_set_the_planned_step_beside_forced_slices_and_the_budget(monkeypatch):
    """The rows' arithmetic on made-up searches and timings (the figures themselves need a GPU)."""
    from rev.measure.maxbatch import MaxBatch
    from rev.measure.slicing import SlicePlan

    found = {"residual": MaxBatch("residual", 20, 10 * 2**30),
             "midpoint_rev": MaxBatch("midpoint_rev", 400, 10 * 2**30, slicing=SlicePlan(400, 100, 4, "fits"))}
    monkeypatch.setattr(gpucheck, "_assignment_max_batches", lambda device: found)
    speed = {(400, 100): 40_000.0, (400, 2): 10_000.0, (20, "auto"): 20_000.0, (16, "auto"): 8_000.0}

    def bench_trunks(geometry, batch, trunks, batch_slices, **kw):
        return {"runs": [{"trunk": trunks[0], "tokens_per_s": speed[(batch, s)], "peak_bytes": 9 * 2**30}
                         for s in batch_slices]}

    monkeypatch.setattr(gpucheck, "bench_trunks", bench_trunks)
    rows = {r.check: r for r in gpucheck.slicing_rows(CPU)}
    assert rows["midpoint_rev at max batch 400: planned vs 2-sequence slices"].figure.endswith(": 4.00x")
    assert "4 slices of 100 sequences" in rows["midpoint_rev at max batch 400: planned vs 2-sequence slices"].figure
    assert rows["midpoint_rev at max batch vs residual at its own"].figure.endswith(": 2.00x")
    assert rows["midpoint_rev time per token, batch 400 vs 16"].figure.endswith(": 0.20x")
    assert rows["midpoint_rev planned step within the budget"].verdict == "pass"
    speed_over = dict(found)
    speed_over["midpoint_rev"] = MaxBatch("midpoint_rev", 400, 8 * 2**30, slicing=SlicePlan(400, 100, 4, "fits"))
    monkeypatch.setattr(gpucheck, "_assignment_max_batches", lambda device: speed_over)
    assert {r.check: r for r in gpucheck.slicing_rows(CPU)}[
        "midpoint_rev planned step within the budget"].verdict == "FAIL"


def test_the_oom_row_caps_the_allocator_by_index_and_always_lifts_the_cap(fake_cuda, monkeypatch):
    """On a real H200 `torch.device("cuda")` was refused by the cap (no index) and the cap stayed on, so every later
    row ran out of memory: the row must pass an index and lift the cap whatever the search does."""
    from rev.training import gpucheck

    def failing_search(*args, **kwargs):
        assert fake_cuda.memory_fraction < 1.0          # the search runs under the cap
        raise RuntimeError("the search broke")

    monkeypatch.setattr(gpucheck, "find_max_batch", failing_search)
    with pytest.raises(RuntimeError, match="the search broke"):
        gpucheck.oom_row(torch.device("cuda"))
    assert fake_cuda.memory_fraction == 1.0             # lifted: later rows see the whole device
