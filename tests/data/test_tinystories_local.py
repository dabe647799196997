"""The TinyStories source's success path, end to end, without a network: a local folder in the hub's layout (a
`text` column in train and validation parquet files under data/, as roneneldan/TinyStories publishes it) named by
REV_TINYSTORIES is read by `datasets` itself, exactly as the hub's copy would be; prepare writes the token files;
a profile on that corpus trains a step. Only the folder stands in for the hub."""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from rev.data import tinystories
from rev.data.corpus import prepare
from rev.data.tokens import EOT, DataError, load
from rev.base.profiles import get_profile
from rev.data.stories import synthetic_stories
from rev.training.loop import TrainConfig, train

datasets = pytest.importorskip("datasets")


def _decoded(folder: Path, split: str) -> list[str]:
    text = load(folder).decode(np.fromfile(folder / f"{split}.bin", dtype=np.uint16))
    return text.split(EOT)[1:]     # one <|endoftext|> before every story


@pytest.fixture
def hub_copy(tmp_path, monkeypatch) -> tuple[list[str], list[str]]:
    """Stories in the hub's layout, named by REV_TINYSTORIES; the hub and the user's cache are kept out of it."""
    stories = list(synthetic_stories(90, seed=4))
    train_split, val_split = stories[:80] + [""], stories[80:]   # the hub's train split has an empty row too
    folder = tmp_path / "TinyStories" / "data"
    folder.mkdir(parents=True)
    datasets.Dataset.from_dict({"text": train_split}).to_parquet(str(folder / "train-00000-of-00001.parquet"))
    datasets.Dataset.from_dict({"text": val_split}).to_parquet(str(folder / "validation-00000-of-00001.parquet"))
    monkeypatch.setenv(tinystories.LOCAL_ENV, str(folder.parent))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))

    def no_hub(*args, **kwargs):
        raise AssertionError("a local copy must not send anything to the hub")

    monkeypatch.setattr(tinystories, "probe_hub", no_hub)
    return stories[:80], val_split


def test_prepare_reads_the_local_copy_through_datasets(hub_copy, tmp_path):
    train_split, val_split = hub_copy
    out = prepare("tinystories", tmp_path / "ts", 300, progress=False)
    meta = load(out).meta
    assert meta["source"] == "tinystories" and meta["request"]["dataset"] == str(tmp_path / "TinyStories")
    assert _decoded(out, "train") == train_split       # every story, in order, the empty row dropped
    assert _decoded(out, "val") == val_split           # the data set's own validation split, as it is


def test_a_copy_whose_text_column_is_large_string_is_text(hub_copy, tmp_path):
    """Arrow stores a text column as `large_string` where its offsets outgrow 32 bits (and some writers always
    do): it is text as much as `string` is. Written so here, read back as such by `datasets`, and prepared."""
    folder = Path(tinystories.dataset_path()) / "data"
    for split, rows in (("train", hub_copy[0]), ("validation", hub_copy[1])):
        ds = datasets.Dataset.from_dict({"text": rows}).cast_column("text", datasets.Value("large_string"))
        ds.to_parquet(str(folder / f"{split}-00000-of-00001.parquet"))
    read = datasets.load_dataset(str(folder.parent), split="validation")
    assert read.features["text"].dtype == "large_string"
    out = prepare("tinystories", tmp_path / "ts", 300, progress=False)
    assert _decoded(out, "val") == hub_copy[1]


def test_prepare_then_one_training_step_on_a_tinystories_profile(hub_copy, tmp_path):
    prof = dataclasses.replace(get_profile("smoke"), name="tinystories-local", data_source="tinystories",
                               data_name="tinystories", data_tokens=0, vocab_size=300)
    one_batch = prof.batch_size * prof.seq_len
    s = train(TrainConfig(profile=prof, data_dir=tmp_path / "data", out_dir=tmp_path / "run", train_tokens=one_batch,
                          eval_every=1, progress=False))
    folder = tmp_path / "data" / "tinystories"
    assert (folder / "train.bin").stat().st_size > 0 and _decoded(folder, "val") == hub_copy[1]
    assert s["steps"] == 1 and math.isfinite(s["final_train_loss"]) and math.isfinite(s["final_val_loss"])
    assert s["data"] == "tinystories", "trained on another corpus than the one just prepared"


def test_a_missing_local_copy_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv(tinystories.LOCAL_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(DataError, match="REV_TINYSTORIES=.*is not a folder"):
        prepare("tinystories", tmp_path / "ts", 300, progress=False)
    assert not (tmp_path / "ts").exists()
