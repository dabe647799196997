"""`resume="auto"` reuses or continues only a run made with the same settings: a different token budget or a
different batch is another run (another LR schedule, other data per step), trained afresh, never returned or
continued from the other's summary or checkpoint (`rev.training.loop.run_key`)."""
from __future__ import annotations

from pathlib import Path

import pytest

from rev.base.profiles import get_profile
from rev.training.loop import TrainConfig, train
from run_logs import logged_losses

SMOKE = get_profile("smoke")
SEQ = SMOKE.seq_len


@pytest.fixture(scope="module")
def data_dir(smoke_data) -> Path:
    return smoke_data


def _fresh(tmp_path: Path, name: str, **kw) -> dict:
    return train(TrainConfig(out_dir=tmp_path / name, **kw))


def _settings(data_dir: Path, batch: int, steps: int) -> dict:
    return dict(profile="smoke", data_dir=data_dir, batch_size=batch, train_tokens=steps * batch * SEQ,
                eval_every=2, ckpt_every=2, progress=False)


# (batch, steps) of the first run and of the second. Both pairs are chosen so that nothing else in the key
# differs: past the smoke profile's warm-up (8 steps at batch 8), and at most 4 steps for the batch pair (its
# warm-up is 8 steps at batch 8 and 16 at batch 4, so 4 for both).
PAIRS = [((8, 9), (8, 11)),    # the token budget grows: 9 -> 11 steps
         ((4, 4), (8, 4))]     # the batch doubles (the tokens too), the same step count
IDS = ["token budget", "batch"]


@pytest.mark.parametrize("first,second", PAIRS, ids=IDS)
def test_a_finished_run_with_other_settings_is_trained_afresh(first, second, data_dir, tmp_path, capsys):
    run = tmp_path / "run"
    train(TrainConfig(out_dir=run, resume="auto", **_settings(data_dir, *first)))
    capsys.readouterr()
    again = train(TrainConfig(out_dir=run, resume="auto", **_settings(data_dir, *second)))
    assert "reusing the finished run" not in capsys.readouterr().out
    want = _fresh(tmp_path, "fresh", **_settings(data_dir, *second))
    assert again["steps"] == want["steps"] == second[1]
    assert again["final_val_loss"] == want["final_val_loss"] and logged_losses(run) == logged_losses(tmp_path / "fresh")


@pytest.mark.parametrize("first,second", PAIRS, ids=IDS)
def test_an_unfinished_run_with_other_settings_is_not_continued(first, second, data_dir, tmp_path, capsys):
    run = tmp_path / "run"
    train(TrainConfig(out_dir=run, resume="auto", stop_after=2, **_settings(data_dir, *first)))
    assert (run / "ckpt.pt").exists() and not (run / "summary.json").exists()
    capsys.readouterr()
    again = train(TrainConfig(out_dir=run, resume="auto", **_settings(data_dir, *second)))
    assert "resuming" not in capsys.readouterr().out
    _fresh(tmp_path, "fresh", **_settings(data_dir, *second))
    assert again["steps"] == second[1] and logged_losses(run) == logged_losses(tmp_path / "fresh")


def test_the_same_settings_are_still_reused(data_dir, tmp_path, capsys):
    """The other side: nothing above passes by never reusing anything."""
    run = tmp_path / "run"
    done = train(TrainConfig(out_dir=run, resume="auto", **_settings(data_dir, 4, 4)))
    assert train(TrainConfig(out_dir=run, resume="auto", **_settings(data_dir, 4, 4))) == done
    assert "reusing the finished run" in capsys.readouterr().out
