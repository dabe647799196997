"""`python -m rev gpucheck`: refuses on a machine without CUDA unless asked for its CPU doubles; every row that
can run on a CPU runs on every available device here, passes, and fails when the promise it checks is broken."""
import contextlib
import os
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from rev.__main__ import main
from rev.training import device_checks, gpucheck
from rev.base.files import read_json, write_json
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
    gap = device_checks.twin_gap("reveuler", torch.device(device), dtype, scaler)
    tol = device_checks.GRAD_TOL[dtype]
    assert gap["grad"] <= tol, gap
    if scaler:
        assert gap["step_taken"] and gap["step"] <= tol, gap


def test_twin_gap_catches_a_backward_without_autocast_replay(monkeypatch):
    from rev.core.reversible import AutocastState

    monkeypatch.setattr(AutocastState, "context", lambda self: contextlib.nullcontext())
    gap = device_checks.twin_gap("midpoint", torch.device("cpu"), torch.bfloat16)
    assert gap["grad"] > device_checks.GRAD_TOL[torch.bfloat16], gap


def test_training_rows_fall_back_to_a_named_synthetic_corpus(tmp_path):
    assert gpucheck.check_profile(tmp_path, "smoke") == ("smoke", "synthetic-smoke")   # training prepares it
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

CPU, CUDA = torch.device("cpu"), torch.device("cuda")   # CUDA: the double's, in tests that take `fake_cuda`
TINY = gpucheck.Sizes.tiny()


def _dtype(device: str) -> torch.dtype:
    """The half type training uses there: a T4's fp16 on a CPU (the double), the GPU's own otherwise."""
    from rev.base.device import amp_dtype

    return amp_dtype(torch.device(device)) if device == "cuda" else torch.float16


@pytest.mark.parametrize("device", DEVICES)
def test_layout_twins_pass_and_a_dropped_chunk_fails(device, monkeypatch):
    dev = torch.device(device)
    row = gpucheck.layout_row(dev, _dtype(device))
    assert row.verdict == "pass" and "chunks 64/256" in row.check, row
    import rev.core.pieces as R

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


def test_the_leak_row_fails_on_a_pack_hook_that_keeps_the_tensor(fake_cuda, monkeypatch, quick_collections):
    """The measurement as it was before the fix (its saved-tensor hook stored the tensor itself): the stored trunk's
    probes leak in forward and in backward, the reversible one's in backward (the row passes on the fixed code in
    the whole table below). Two trunks here, to keep it short."""
    import rev.measure.memory as M

    monkeypatch.setattr(gpucheck, "LEAK_TRUNKS", ("residual", "midpoint_rev"))
    monkeypatch.setattr(M, "saved_tensors_seen",
                        lambda on_pack=None, on_unpack=lambda t: None: torch.autograd.graph.saved_tensors_hooks(
                            lambda t: t, lambda t: on_unpack(t) or t))
    row = gpucheck.probe_leak_row(CUDA, TINY)
    assert row.verdict == "FAIL", row
    assert row.figure.split("failed: ")[1].split(";")[0] == "residual forward, residual backward, midpoint_rev backward"
    assert fake_cuda.ooms == 4     # each probe really ran out: an allocation larger than the double's device


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
    stub = lambda *a, _n, **k: ran.append(_n) or gpucheck.Row(_n, "pass", "", 1.0)  # noqa: E731
    for name in ("grad_rows", "layout_row", "head_row", "scaler_skip_row", "fixed_recon_row", "flat_memory_row",
                 "relative_memory_row", "probe_leak_row", "oom_row", "resume_row", "bench_rows", "train_rows"):
        monkeypatch.setattr(gpucheck, name, lambda *a, _n=name, **k: stub(_n=_n))
    for name in ("max_batch_row", "train_row", "speed_row"):
        monkeypatch.setattr(gpucheck.T4Emulation, name, lambda self, *a, _n=name: stub(_n=_n))
    rows = gpucheck.gpucheck(CPU, Path("data"))
    gpu_only = {"oom_row", "bench_rows", "max_batch_row", "train_row", "speed_row", "train_rows"}
    assert len(rows) == 20 and set(ran).isdisjoint(gpu_only) and "probe_leak_row" in ran
    assert [r.verdict for r in rows].count("skip") == 11
    assert all("needs a CUDA GPU" in r.figure for r in rows if r.verdict == "skip")
    assert all(r.left_mib is None for r in rows)          # a CPU's allocator keeps no such count


def test_speed_figures_compare_each_trunk_to_residual_round_by_round():
    """Made-up step times: midpoint_rev's batch is 10x residual's and its steps 5x as long, so 2x the tokens/s in
    every round; reveuler_rev's rounds swing with the load residual also saw, so its ratio stays 1x exactly."""
    times = {"residual": [1.0, 2.0, 1.0, 4.0], "midpoint_rev": [5.0, 10.0, 5.0, 20.0],
             "reveuler_rev": [2.0, 4.0, 2.0, 8.0]}
    text = gpucheck.speed_figures(times, {"residual": 10, "midpoint_rev": 100, "reveuler_rev": 20}, 512)
    assert text.startswith("median [quartiles] of 4 interleaved rounds: residual 3,840 [2,240-5,120] at 10;")
    assert "midpoint_rev 7,680 [4,480-10,240] at 100: 2.00x residual (95% interval 2.00-2.00)" in text
    assert "reveuler_rev 3,840 [2,240-5,120] at 20: 1.00x residual (95% interval 1.00-1.00)" in text


def test_the_oom_row_caps_the_allocator_by_index_and_always_lifts_the_cap(fake_cuda, monkeypatch):
    """On a real H200 `torch.device("cuda")` was refused by the cap (no index) and the cap stayed on, so every later
    row ran out of memory: the row must pass an index and lift the cap whatever the search does."""
    from rev.training import gpucheck

    def failing_search(*args, **kwargs):
        assert fake_cuda.memory_fraction < 1.0          # the search runs under the cap
        raise RuntimeError("the search broke")

    monkeypatch.setattr(gpucheck, "find_max_batch", failing_search)
    with pytest.raises(RuntimeError, match="the search broke"):
        gpucheck.oom_row(torch.device("cuda"), TINY)
    assert fake_cuda.memory_fraction == 1.0             # lifted: later rows see the whole device


# --- every row on the CUDA double (tests/fake_cuda.py): "cuda" tensors on the CPU, its allocator's counters ---------


@pytest.mark.slow
def test_every_row_runs_on_the_cuda_double_and_gives_its_memory_back(fake_cuda, smoke_data, quick_collections):
    rows = gpucheck.gpucheck(CUDA, smoke_data, sizes=TINY)
    by_check = {r.check: r for r in rows}
    skipped = {r.check for r in rows if r.verdict == "skip"}
    assert skipped == {"gradients bf16 autocast", "notebooks 04-06 (smoke) under a capped budget"}, skipped
    assert "capability 7.5" in by_check["gradients bf16 autocast"].figure       # the double is a T4
    for r in rows:
        if r.verdict == "skip":
            continue
        assert r.left_mib is not None and r.left_mib * 2**20 <= TINY.left_limit, r
        if r.check.startswith("train ") and " steps" in r.check:   # 20 smoke steps: the verdict follows the rule
            val, unigram = (float(r.figure.split(k)[1].split()[0].strip("(),;")) for k in ("val", "unigram"))
            assert r.verdict == ("pass" if val < unigram - gpucheck.UNIGRAM_MARGIN else "FAIL"), r
        else:
            assert r.verdict in ("pass", "info"), r
    for trunk in gpucheck.T4_TRUNKS:
        found = by_check[f"T4 max batch {trunk}"]
        assert "cap" in found.figure and "probes" in found.figure
        trained = next(r for r in rows if r.check.startswith(f"T4 train {trunk} at batch "))
        assert "fp16 steps" in trained.figure and "scale 2^" in trained.figure
    assert by_check["T4 tokens/s at each max batch"].figure.count("x residual (95% interval") == 2
    assert fake_cuda.memory_fraction == 1.0                    # every cap lifted


def test_a_row_that_leaves_memory_allocated_fails(fake_cuda):
    kept = []

    def keeps(mib: float):
        def row() -> gpucheck.Row:
            kept.append(torch.empty(int(mib * 2**20), dtype=torch.uint8, device="cuda"))
            return gpucheck.Row("keeps", "pass", "measured", 0.0)
        return row

    [small] = gpucheck._timed(keeps(12), "keeps", CUDA)                 # under the 16 MiB limit
    [large] = gpucheck._timed(keeps(20), "keeps", CUDA)
    assert small.verdict == "pass" and 11.9 < small.left_mib < 12.1, small
    assert large.verdict == "FAIL" and "20.0 MiB left allocated (limit 16.0 MiB)" in large.figure, large
    [broken] = gpucheck._timed(lambda: 1 / 0, "broken", CUDA)          # an error is a row, memory still counted
    assert broken.verdict == "FAIL" and "ZeroDivisionError" in broken.figure and broken.left_mib is not None


def test_the_t4_rows_run_in_fp16_only_and_a_step_over_the_budget_fails(fake_cuda, smoke_data, monkeypatch,
                                                                      quick_collections):
    """No false failures: on a GPU whose own precision is bf16 (the double made an H100) every T4 row measures in
    fp16, the precision its batch was found in (nothing in fp32 or bf16 at a batch found under fp16); and the
    training row holds the step to the search's budget. Two of the trunks, to keep it short."""
    from rev.measure import bench

    fake_cuda.capability, fake_cuda.name = (9, 0), "NVIDIA H100"
    monkeypatch.setattr(gpucheck, "T4_TRUNKS", ("residual", "reveuler_rev"))
    dtypes, precisions = [], []
    for module in (bench, gpucheck):
        real = module.make_training_step
        monkeypatch.setattr(module, "make_training_step",
                            lambda cfg, batch, device, dtype, *a, _real=real, **k:
                            dtypes.append(dtype) or _real(cfg, batch, device, dtype, *a, **k))
    real_train = gpucheck.train
    monkeypatch.setattr(gpucheck, "train", lambda cfg: precisions.append(cfg.precision) or real_train(cfg))
    t4 = gpucheck.T4Emulation(CUDA, smoke_data, TINY)
    rows = [t4.max_batch_row(t) for t in gpucheck.T4_TRUNKS] + [t4.train_row("residual"), t4.speed_row()]
    assert all(r.verdict in ("pass", "info") for r in rows), rows
    assert dtypes and set(dtypes) == {torch.float16} and precisions == ["fp16"]
    t4.found["residual"] = replace(t4.found["residual"], budget_bytes=t4.found["residual"].budget_bytes // 2)
    over = t4.train_row("residual")
    assert over.verdict == "FAIL" and "peak over the budget" in over.figure, over


def _workbook_stand_in(device: str, budget: int, seen: dict):
    """What `run_workbook` leaves behind for notebooks 04-06: one run summary per run, notebook 06's searches."""
    def run(profile, out, results, data_dir, only, progress):
        from rev.base.device import pick_device

        seen["env"], seen["notebooks"] = os.environ.get("REV_GPU_MEMORY_GIB"), list(only)
        pick_device("cuda")                       # what a kernel does first: the cap comes from the environment
        seen["fraction"] = torch.cuda.get_per_process_memory_fraction(0)
        for name in ("baseline", "reversible"):
            write_json(Path(results) / profile / name / "summary.json", {"device": device})
        write_json(Path(results) / profile / "maxbatch.json",
                   {"budget_bytes": budget, "residual": {"budget_bytes": budget, "batch": 9}})
        return [Path(out) / f"{n}.ipynb" for n in only]
    return run


def test_the_notebooks_row_runs_04_to_06_capped_on_cuda(fake_cuda):
    seen: dict = {}
    row = gpucheck.notebooks_row(CUDA, 2, _workbook_stand_in("Tesla T4 (cuda), float16 compute", 2**30, seen))
    assert row.verdict == "pass" and "3 of 3 notebooks ran; 2 of 2 runs on CUDA" in row.figure, row
    assert seen["env"] == "2" and seen["notebooks"] == list(gpucheck.NOTEBOOKS)
    assert seen["fraction"] == pytest.approx(2 / 16)              # 2 GiB of the double's 16
    assert "REV_GPU_MEMORY_GIB" not in os.environ
    for device, budget in (("CPU (cpu), fp32 compute", 2**30), ("Tesla T4 (cuda), float16 compute", 3 * 2**30)):
        assert gpucheck.notebooks_row(CUDA, 2, _workbook_stand_in(device, budget, {})).verdict == "FAIL"


def test_the_command_refuses_a_memory_cap_of_its_own_and_writes_left_memory_to_json(tmp_path, monkeypatch):
    monkeypatch.setenv("REV_GPU_MEMORY_GIB", "15")
    with pytest.raises(SystemExit, match="REV_GPU_MEMORY_GIB is set"):
        main(["gpucheck", "--device", "cpu"])
    monkeypatch.delenv("REV_GPU_MEMORY_GIB")
    asked = {}
    monkeypatch.setattr(gpucheck, "gpucheck", lambda device, data_dir, reversible, steps, notebooks: asked.update(
        notebooks=notebooks) or [gpucheck.Row("a", "pass", "x", 1.0, 0.25)])
    assert main(["gpucheck", "--device", "cpu", "--notebooks", "--json", str(tmp_path / "g.json")]) == 0
    assert asked == {"notebooks": True}
    assert read_json(tmp_path / "g.json")["rows"] == [{"check": "a", "verdict": "pass", "figure": "x", "seconds": 1.0,
                                                      "left_mib": 0.25}]
