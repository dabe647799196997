"""`python -m rev gpucheck`: refuses on a machine without CUDA; its gradient check (the part that also runs on
a CPU) is exact on every available device and catches a backward that forgets the autocast replay."""
import contextlib

import pytest
import torch

from rev.__main__ import main
from rev.engine import gpucheck
from rev.engine.profiles import PROFILES

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
