"""The batch-slice policy (`rev.measure.slicing`): the whole batch where it fits, else the fewest slices that fit,
measured; the CPU's fixed slices; a stored trunk unsliced; the plan the max-batch search and training report; and
a sliced step's gradients equal to the unsliced step's."""
import dataclasses

import pytest
import torch

from fake_cuda import MIB
from rev.core import reversible
from rev.core.model import GPT, GPTConfig, auto_batch_slice
from rev.measure import maxbatch, probe
from rev.measure.probe import step_peak
from rev.measure.slicing import GPU_MIN_ROWS, SliceError, plan_slices
from rev.measure import slicing

GEOMETRY = dict(vocab_size=64, seq_len=64, n_layer=2, n_head=2, d_model=32, pos_chunk=0)
REV = GPTConfig(trunk="reveuler_rev", **GEOMETRY)
CPU = torch.device("cpu")


def line_fits(static: int, per_sequence: int, per_slice_sequence: int, budget: int, batch: int):
    """fits(s) for a step whose peak is static + per_sequence * batch + per_slice_sequence * s."""
    return lambda s: static + per_sequence * batch + per_slice_sequence * s <= budget


def test_a_gpu_runs_the_whole_batch_when_it_fits_and_the_fewest_slices_when_not():
    whole = plan_slices(REV, 64, "cuda", line_fits(10, 1, 10, 10 + 64 + 640, 64))
    assert (whole.slices, whole.sequences, whole.batch_slice) == (1, 64, 64) and "whole batch fits" in whole.reason
    # room for slices of at most 21 sequences: 4 slices (3 would need 22), made equal: 16 each
    tight = plan_slices(REV, 64, "cuda", line_fits(10, 1, 10, 10 + 64 + 215, 64))
    assert (tight.slices, tight.sequences) == (4, 16) and tight.describe() == "4 slices of 16 sequences"
    assert "below" in tight.reason and 16 * REV.seq_len < GPU_MIN_ROWS
    with pytest.raises(SliceError, match="even in slices of one sequence.*maxbatch"):
        plan_slices(REV, 64, "cuda", line_fits(10, 1, 10, 10 + 64 + 9, 64))


def test_without_a_budget_or_on_a_cpu_nothing_is_measured():
    never = lambda s: pytest.fail("no probe should run")  # noqa: E731
    assert plan_slices(REV, 40, "cuda").slices == 1
    cpu = plan_slices(REV, 40, "cpu", never)
    assert cpu.sequences == auto_batch_slice(REV.seq_len) == 16 and cpu.slices == 3   # 16, 16, 8: as `sliced` cuts
    fixed = plan_slices(dataclasses.replace(REV, batch_slice=5), 12, "cuda", never)
    assert (fixed.slices, fixed.sequences, fixed.reason) == (3, 5, "set by batch_slice")
    stored = plan_slices(GPTConfig(trunk="residual", **GEOMETRY), 40, "cuda", never)
    assert stored.slices == 1 and "nothing to slice" in stored.reason


def test_the_planned_slicing_is_the_fewest_whose_measured_peak_fits():
    """Real steps measured on the CPU stand in for the GPU's probes: the plan's step fits, one slice fewer does
    not."""
    batch = 16
    peak = lambda s: step_peak(dataclasses.replace(REV, batch_slice=s), batch, CPU, None)  # noqa: E731
    budget = peak(4) + 1024
    plan = plan_slices(REV, batch, "cuda", lambda s: peak(s) <= budget)
    assert (plan.slices, plan.sequences) == (4, 4)
    assert peak(plan.batch_slice) <= budget < peak(-(-batch // (plan.slices - 1)))
    roomy = plan_slices(REV, batch, "cuda", lambda s: peak(s) <= peak(batch))
    assert roomy.slices == 1


def test_a_step_planned_whole_makes_one_memory_free_call_per_trunk_call(monkeypatch):
    calls = []
    apply = reversible.ReversibleFunction.apply
    monkeypatch.setattr(reversible.ReversibleFunction, "apply", lambda *a: calls.append(1) or apply(*a))
    x = torch.randint(0, 64, (12, REV.seq_len))
    for s, expected in ((plan_slices(REV, 12, "cuda", lambda s: True).batch_slice, 1), (5, 3)):
        calls.clear()
        GPT(dataclasses.replace(REV, batch_slice=s))(x, x).backward()
        assert len(calls) == expected


def test_sliced_gradients_equal_the_unsliced_ones_in_fp64():
    torch.manual_seed(0)
    x = torch.randint(0, 64, (7, REV.seq_len))
    grads = []
    for s in (0, 3):
        torch.manual_seed(1)
        model = GPT(dataclasses.replace(REV, batch_slice=s)).double()
        model(x, x).backward()
        grads.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]))
    assert (grads[0] - grads[1]).abs().max() <= 1e-12 * grads[0].abs().max()


def test_the_max_batch_search_on_a_gpu_reports_the_slicing_its_batch_needs(fake_cuda, monkeypatch):
    """Peaks from a line in the batch and the slice: batch b in slices of s costs 1 MiB + b x 64 KiB + s x 1 MiB.
    Under 20 MiB the thinnest slicing fits batch 288 (slices of 1); at that batch nothing thicker fits."""
    def fake_peak(cfg, batch, device, dtype) -> int:
        s = min(cfg.sequences_per_slice or batch, batch)
        return MIB + batch * 64 * 1024 + s * MIB

    monkeypatch.setattr(probe, "step_peak", fake_peak)
    res = maxbatch.find_max_batch(REV, 20 * MIB, device="cuda", limit=4096, progress=False)
    assert res.batch == 288 and res.slicing.slices == 288 and res.slicing.sequences == 1
    at_16 = slicing.measured_slices(REV, 16, torch.device("cuda"), None, 20 * MIB)
    assert at_16.slices == 1 and at_16.batch == 16
    at_200 = slicing.measured_slices(REV, 200, torch.device("cuda"), None, 20 * MIB)
    # 1 + 200/16 + s <= 20 -> s <= 6.5: slices of 6, 34 of them, made equal (200 / 34 -> 6)
    assert (at_200.slices, at_200.sequences) == (34, 6)
    assert res.to_dict()["slicing"]["described"] == "288 slices of 1 sequence"


def test_a_run_records_the_slicing_its_steps_ran(smoke_data, tmp_path, capsys, monkeypatch):
    from rev.training import loop
    from rev.training.loop import TrainConfig, train

    monkeypatch.setattr(loop, "_SAID", set())   # another test in this process may have said it already
    s = train(TrainConfig(profile="smoke", trunk="reveuler_rev", data_dir=smoke_data, out_dir=tmp_path / "run",
                          train_tokens=2 * 8 * 64, batch_slice=3, progress=False, device="cpu"))
    assert s["batch_slicing"]["slices"] == 3 and s["batch_slicing"]["described"] == "3 slices of 3 sequences"
    assert "each step runs 3 slices of 3 sequences (set by batch_slice)" in capsys.readouterr().out
    train(TrainConfig(profile="smoke", trunk="reveuler_rev", data_dir=smoke_data, out_dir=tmp_path / "run2",
                      train_tokens=2 * 8 * 64, batch_slice=3, progress=False, device="cpu", seed=1))
    assert "each step runs" not in capsys.readouterr().out   # a second seed of the same shape: said once


def test_a_plan_says_memory_forced_it_below_the_gpu_rows_only_below_them():
    """At the assignment's sequence length (512): slices of 32 sequences are 16,384 rows, exactly
    `GPU_MIN_ROWS` (not below: nothing to say); slices of 31 are 15,872 rows (below: said)."""
    cfg = dataclasses.replace(REV, seq_len=512)
    at = plan_slices(cfg, 64, "cuda", lambda s: s <= 32)
    assert (at.slices, at.sequences) == (2, 32) and 32 * 512 == GPU_MIN_ROWS
    assert at.reason == "the fewest slices that fit the budget"
    below = plan_slices(cfg, 62, "cuda", lambda s: s <= 31)
    assert (below.slices, below.sequences) == (2, 31)
    assert f"memory forces slices below {GPU_MIN_ROWS:,} rows" in below.reason


def test_auto_slices_are_resolved_in_one_module():
    """Whether "auto" means the GPU's measured plan is decided in `rev.measure.slicing` alone (and what "auto" means
    for a model built with no plan, in the model itself): any other module comparing `batch_slice` with "auto" is a
    second policy that can drift from this one."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "rev"
    homes = {root / "measure" / "slicing.py", root / "core" / "model.py"}
    found = [str(p.relative_to(root)) for p in sorted(root.rglob("*.py")) if p not in homes
             and re.search(r"batch_slice\s*[!=]=\s*[\"']auto[\"']", p.read_text())]
    assert found == [], "modules that decide what an auto batch slice means"
