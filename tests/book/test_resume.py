"""A workbook that survives interruptions: `train(resume="auto")` starts, continues or reuses a run; the
workbook skips notebooks whose marker says they completed with the same source and parameters; and on a simulated
Colab a smoke workbook killed in the middle of run 1, its runtime reset but its Google Drive kept, picks up where it
stopped, with the losses of an uninterrupted run, and retrains nothing after."""
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fake_colab import FAKE_DRIVE_ENV, driver_cells, fake_google_colab
from rev.book.colab import ROOT, SETUP_CELL
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


# --- a Colab session, reset, and the next one ------------------------------------------------------------------

NOTEBOOKS = ("00_setup", "04_run1_baseline")


# on PYTHONPATH, with REV_KILL_AFTER_CHECKPOINT=<run>, it kills a process right after that run's checkpoint
KILL_HOOK = Path(__file__).resolve().parents[1] / "support" / "kill_after_checkpoint"


def _colab_session(tmp: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """One Colab session on a fresh runtime: /content (`tmp/content`) starts empty but for a checkout of this tree,
    Google Drive (`tmp/drive-cloud`) keeps what earlier sessions put there. The kernel runs the driver's own cells:
    its parameters, the set-up cell (which mounts Drive and puts the results and data there), `sh`, and the
    sequence cell (the plan, then the workbook), on the smoke profile and the notebooks `NOTEBOOKS`."""
    content = tmp / "content"
    if content.exists():
        shutil.rmtree(content)               # a runtime reset: the checkout, the build folder and the mount go
    checkout = content / "revbook"
    for rel in ("rev", "notebooks"):
        shutil.copytree(ROOT / rel, checkout / rel, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", checkout)
    cells = driver_cells("colab-01", "colab-04", "colab-15")
    script = tmp / "kernel.py"
    script.write_text("\n\n".join([
        "import google.colab  # Colab's kernel has it imported",
        cells[0], f"DRIVE_DIR = {str(content / 'drive' / 'MyDrive' / 'revbook')!r}", f"ONLY = {' '.join(NOTEBOOKS)!r}",
        SETUP_CELL, "import os, subprocess, sys\nfrom pathlib import Path", cells[1],
        "profile, run_sequence, results = 'smoke', True, ROOT / RESULTS_DIR\nos.chdir(ROOT)", cells[2]]))
    env = {**os.environ, **(env or {}), FAKE_DRIVE_ENV: str(tmp / "drive-cloud"),
           "PYTHONPATH": os.pathsep.join([str(checkout), str(tmp / "colab-site"), str(KILL_HOOK)])}
    return subprocess.run([sys.executable, str(script)], cwd=content, capture_output=True, text=True, env=env,
                          timeout=1200)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_a_colab_workbook_on_drive_survives_a_runtime_reset_and_retrains_nothing(tmp_path):
    """Session 1 runs 00 (the data goes to Drive) and 04, and dies right after run 1's first checkpoint (SIGKILL, as
    a disconnect). The runtime is reset: /content, the checkout with it, is wiped; Drive is kept. Session 2, from a
    fresh checkout, skips 00, prepares no data and continues run 1 from that checkpoint, with the losses of an
    uninterrupted run. After another reset, session 3 finds both notebooks done and changes nothing; notebook 04
    run once more (its marker gone) reuses the finished run instead of training it."""
    (tmp_path / "drive-cloud").mkdir()
    fake_google_colab(tmp_path / "colab-site")
    drive = tmp_path / "drive-cloud" / "revbook"
    results, run1 = drive / "results", drive / "results" / "smoke" / "run1_baseline"

    first = _colab_session(tmp_path, {"REV_KILL_AFTER_CHECKPOINT": "run1_baseline"})
    assert first.returncode != 0 and "kernel died" in first.stdout, first.stdout[-3000:] + first.stderr[-3000:]
    assert "results and data on Google Drive" in first.stdout
    assert first.stdout.index("estimated T4 time") < first.stdout.index("00_setup (profile smoke)")  # the plan first
    assert (drive / "data" / SMOKE.data_name / "meta.json").is_file(), "the prepared data is not on Drive"
    setup_marker = marker_path(results, "smoke", "00_setup")
    assert setup_marker.exists() and not marker_path(results, "smoke", "04_run1_baseline").exists()
    assert (run1 / "ckpt.pt").exists() and not (run1 / "summary.json").exists()
    assert len(logged_losses(run1)) == SMOKE.ckpt_every  # killed right after the checkpoint at step 40 of 80
    data_before, marker_text = _files(drive / "data"), setup_marker.read_text()

    second = _colab_session(tmp_path)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "00_setup: completed before" in second.stdout and setup_marker.read_text() == marker_text
    assert _files(drive / "data") == data_before, "the data was prepared again"
    executed = (tmp_path / "content" / "revbook" / "build" / "smoke" / "notebooks" / "04_run1_baseline.ipynb")
    assert f"from its checkpoint at step {SMOKE.ckpt_every} of" in executed.read_text()

    ref = tmp_path / "reference"
    subprocess.run([sys.executable, "-m", "rev", "train", "--profile", "smoke", "--trunk", "residual", "--out",
                    str(ref), "--data-dir", str(drive / "data"), "--no-progress"], check=True, capture_output=True)
    assert logged_losses(run1) == logged_losses(ref)
    got, want = (json.loads((d / "summary.json").read_text()) for d in (run1, ref))
    for key in ("steps", "final_train_loss", "final_val_loss"):
        assert got[key] == want[key], key

    finished = _files(run1)
    third = _colab_session(tmp_path)
    assert third.returncode == 0 and all(f"{n}: completed before" in third.stdout for n in NOTEBOOKS), third.stdout
    assert _files(run1) == finished
    marker_path(results, "smoke", "04_run1_baseline").unlink()     # 04 must run again: its run is there, finished
    fourth = _colab_session(tmp_path)
    assert fourth.returncode == 0, fourth.stdout[-3000:] + fourth.stderr[-3000:]
    executed = (tmp_path / "content" / "revbook" / "build" / "smoke" / "notebooks" / "04_run1_baseline.ipynb")
    assert "reusing the finished run" in executed.read_text() and _files(run1) == finished


def test_the_parameters_cell_names_folders_inside_the_checkout_relative_to_it(tmp_path):
    from rev.book.sequence import NOTEBOOK_DIR
    from rev.base.files import shown_path as notebook_path   # what run_workbook passes to the parameters cell

    root = NOTEBOOK_DIR.parent
    assert notebook_path(root / "build" / "ci" / "results") == "build/ci/results"   # no machine path in the copy
    assert notebook_path(tmp_path / "r") == str(tmp_path / "r")                     # outside: absolute
