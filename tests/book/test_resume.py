"""A workbook that survives interruptions: `train(resume="auto")` starts, continues or reuses a run; the
workbook skips notebooks whose marker says they completed with the same source and parameters; and a smoke
workbook killed in the middle of run 1 picks up where it stopped, with the losses of an uninterrupted run."""
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rev.book.workbook import completed, marker_path
from rev.base.files import write_json
from rev.base.profiles import get_profile
from rev.training.loop import TrainConfig, train
from run_logs import logged_losses

SMOKE = get_profile("smoke")
ONE_BATCH = SMOKE.batch_size * SMOKE.seq_len


@pytest.fixture(scope="module")
def data_dir(smoke_data) -> Path:
    return smoke_data


def test_resume_auto_starts_then_continues_then_reuses(data_dir, tmp_path, capsys):
    kw = dict(profile="smoke", data_dir=data_dir, trunk="reveuler_rev", train_tokens=12 * ONE_BATCH, ckpt_every=4,
              progress=False)
    whole = train(TrainConfig(out_dir=tmp_path / "whole", **kw))
    cut = tmp_path / "cut"
    train(TrainConfig(out_dir=cut, resume="auto", stop_after=6, **kw))    # no checkpoint yet: starts
    assert not (cut / "summary.json").exists()
    resumed = train(TrainConfig(out_dir=cut, resume="auto", **kw))        # continues from step 4
    assert "from its checkpoint at step 4 of 12" in capsys.readouterr().out
    assert logged_losses(cut) == logged_losses(tmp_path / "whole")
    assert resumed["final_val_loss"] == whole["final_val_loss"]
    assert resumed["peak_memory_bytes"] == whole["peak_memory_bytes"]  # measured before the cut, carried over

    log_before = (cut / "log.csv").read_text()
    again = train(TrainConfig(out_dir=cut, resume="auto", **kw))          # finished, same settings: reused
    assert "reusing the finished run" in capsys.readouterr().out
    assert again == json.loads((cut / "summary.json").read_text()) and (cut / "log.csv").read_text() == log_before

    other = train(TrainConfig(out_dir=cut, resume="auto", **{**kw, "seed": 1}))  # other settings: trained anew
    assert "written with other settings: starting afresh" in capsys.readouterr().out
    assert other["steps"] == 12 and logged_losses(cut) != logged_losses(tmp_path / "whole")


def test_resume_must_be_a_known_mode(data_dir, tmp_path):
    with pytest.raises(ValueError, match="'auto'"):
        train(TrainConfig(profile="smoke", data_dir=data_dir, out_dir=tmp_path, resume="yes", progress=False))


def test_marker_matches_only_the_same_source_and_parameters(tmp_path):
    src = tmp_path / "nb.ipynb"
    src.write_text('{"cells": []}')
    params = {"PROFILE": "smoke", "SEED": 0}
    marker = marker_path(tmp_path / "results", "smoke", "nb")
    assert not completed(marker, src, params)                              # never ran
    write_json(marker, {"source_sha256": hashlib.sha256(src.read_bytes()).hexdigest(), "parameters": params})
    assert completed(marker, src, params)
    assert not completed(marker, src, {**params, "SEED": 1})               # other parameters
    src.write_text('{"cells": [1]}')
    assert not completed(marker, src, params)                              # edited notebook
    marker.write_text("{not json")
    assert not completed(marker, src, params)                              # damaged marker: run again


def _workbook(tmp: Path, data_dir: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "rev", "workbook", "--profile", "smoke", "--only", "00_setup", "04_run1_baseline",
           "--out", str(tmp / "build"), "--results", str(tmp / "results"), "--data-dir", str(data_dir)]
    return subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=1200)


@pytest.mark.slow
def test_interrupted_workbook_continues_where_it_stopped(data_dir, tmp_path):
    """Run 00 then 04 and kill the kernel (SIGKILL, as a disconnect would) right after run 1's first
    checkpoint; the second call must skip 00 and finish run 1 from that checkpoint, with the losses of an
    uninterrupted run of the same settings."""
    run1 = tmp_path / "results" / "smoke" / "run1_baseline"
    first = _workbook(tmp_path, data_dir, {"REV_KILL_AFTER_CHECKPOINT": "run1_baseline"})
    assert first.returncode != 0 and "kernel died" in first.stderr, first.stdout[-2000:] + first.stderr[-2000:]
    setup_marker = marker_path(tmp_path / "results", "smoke", "00_setup")
    assert setup_marker.exists() and not marker_path(tmp_path / "results", "smoke", "04_run1_baseline").exists()
    assert (run1 / "ckpt.pt").exists() and not (run1 / "summary.json").exists()
    assert len(logged_losses(run1)) == SMOKE.ckpt_every   # killed right after the checkpoint at step 40 of 80
    marker_text = setup_marker.read_text()

    second = _workbook(tmp_path, data_dir)
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    assert "00_setup: completed before" in second.stdout and setup_marker.read_text() == marker_text
    executed = (tmp_path / "build" / "notebooks" / "04_run1_baseline.ipynb").read_text()
    assert f"from its checkpoint at step {SMOKE.ckpt_every} of" in executed

    ref = tmp_path / "reference"
    subprocess.run([sys.executable, "-m", "rev", "train", "--profile", "smoke", "--trunk", "residual", "--out",
                    str(ref), "--data-dir", str(data_dir), "--no-progress"], check=True, capture_output=True)
    assert logged_losses(run1) == logged_losses(ref)
    got, want = (json.loads((d / "summary.json").read_text()) for d in (run1, ref))
    for key in ("steps", "final_train_loss", "final_val_loss"):
        assert got[key] == want[key], key


def test_the_parameters_cell_names_folders_inside_the_checkout_relative_to_it(tmp_path):
    from rev.book.sequence import NOTEBOOK_DIR
    from rev.base.files import shown_path as notebook_path   # what run_workbook passes to the parameters cell

    root = NOTEBOOK_DIR.parent
    assert notebook_path(root / "build" / "ci" / "results") == "build/ci/results"   # no machine path in the copy
    assert notebook_path(tmp_path / "r") == str(tmp_path / "r")                     # outside: absolute
