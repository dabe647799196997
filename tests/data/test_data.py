"""rev.data.tokens: synthetic corpus, BPE, token files, loading checks, batch sampler, command line."""
from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from rev.data import corpus as data
from rev.data import tokens as rdata
from rev.data import tinystories
from rev.data.corpus import prepare
from rev.data.tokens import EOT, DataError, load
from rev.data.stories import synthetic_stories

N_STORIES = 300
VOCAB = 384


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """A tiny synthetic corpus shared by the read-only tests."""
    return prepare("synthetic", tmp_path_factory.mktemp("data") / "syn", VOCAB, stories=N_STORIES, seed=1,
                   progress=False)


@pytest.fixture
def copy(corpus, tmp_path) -> Path:
    """A private copy of the tiny corpus, for tests that damage it."""
    return Path(shutil.copytree(corpus, tmp_path / "copy"))


def split_stories(n: int, seed: int, val_fraction: float = 0.02) -> dict[str, list[str]]:
    stories = list(synthetic_stories(n, seed))
    return {"train": [s for i, s in enumerate(stories) if not data._is_val(i, val_fraction)],
            "val": [s for i, s in enumerate(stories) if data._is_val(i, val_fraction)]}


def decoded_stories(folder: Path, split: str) -> list[str]:
    td = load(folder)
    text = td.decode(np.fromfile(folder / f"{split}.bin", dtype=np.uint16))
    parts = text.split(EOT)
    assert parts[0] == ""  # one <|endoftext|> before every story
    return parts[1:]


def no_leftovers(parent: Path, name: str) -> bool:
    return not any(parent.glob(f".{name}.*"))


# --- the synthetic corpus ---------------------------------------------------------------------------------------

def test_synthetic_stories_are_deterministic_per_seed():
    a = list(synthetic_stories(50, seed=7))
    assert a == list(synthetic_stories(50, seed=7))
    assert a[:20] == list(synthetic_stories(20, seed=7))  # story i does not depend on the corpus size
    assert a != list(synthetic_stories(50, seed=8))


def test_synthetic_stories_are_varied_and_story_sized(record_property):
    stories = list(synthetic_stories(2000, seed=0))
    distinct = len(set(stories)) / len(stories)
    words = [re.findall(r"[a-z']+", s.lower()) for s in stories]
    vocab = set().union(*words)
    lengths = [len(w) for w in words]
    openings = {s.split(".")[0] for s in stories}
    record_property("distinct_story_ratio", distinct)
    record_property("word_vocabulary", len(vocab))
    print(f"\nsynthetic corpus, 2000 stories: distinct ratio {distinct:.4f}, word vocabulary {len(vocab)}, "
          f"words per story {min(lengths)}-{max(lengths)} (mean {np.mean(lengths):.0f})")
    assert distinct > 0.99
    assert len(vocab) > 300
    assert 60 <= min(lengths) and max(lengths) <= 260 and 100 <= np.mean(lengths) <= 200
    assert len(openings) > 500  # not one template with names swapped
    assert sum('"' in s for s in stories) > 0.9 * len(stories)  # dialogue
    assert all("\n\n" not in s and EOT not in s for s in stories)  # safe in blank-line separated text files


# --- tokenizer and token files ----------------------------------------------------------------------------------

def test_bpe_round_trips_text_exactly(corpus):
    td = load(corpus)
    samples = list(synthetic_stories(30, seed=99)) + [
        "  two  spaces,\ttabs\nand newlines\n\n", "Ünïcödé, 日本語 and emoji 🐢!", "", "x" * 1000]
    for text in samples:
        assert td.decode(td.encode(text)) == text
    assert td.encode(EOT) == [td.eot_id]


def test_bins_decode_back_to_the_source_stories(corpus):
    expected = split_stories(N_STORIES, seed=1)
    meta = json.loads((corpus / "meta.json").read_text())
    for split in ("train", "val"):
        assert decoded_stories(corpus, split) == expected[split]
        assert meta["splits"][split]["stories"] == len(expected[split])
    assert len(expected["val"]) == 6  # 2 % of 300, spread through the corpus
    assert meta["vocab_size"] == VOCAB and meta["max_token_id"] < VOCAB and meta["eot_id"] == 0


def test_meta_records_sizes_hashes_and_counts(corpus):
    meta = json.loads((corpus / "meta.json").read_text())
    assert meta["source"] == "synthetic" and meta["request"]["stories"] == N_STORIES
    for split in ("train", "val"):
        info = meta["splits"][split]
        assert (corpus / info["file"]).stat().st_size == info["bytes"] == 2 * info["tokens"]
        assert rdata._blake2b(corpus / info["file"]) == info["blake2b"]
    assert meta["tokenizer_sha256"] == rdata.sha256_file(corpus / "tokenizer.json")


def test_sampler_is_deterministic_and_shifted(corpus):
    td = load(corpus, model_vocab_size=VOCAB)
    x1, y1 = td.get_batch("train", 4, 32, torch.Generator().manual_seed(3))
    torch.manual_seed(123)  # global RNG state must not matter
    x2, y2 = td.get_batch("train", 4, 32, torch.Generator().manual_seed(3))
    x3, _ = td.get_batch("train", 4, 32, torch.Generator().manual_seed(4))
    assert torch.equal(x1, x2) and torch.equal(y1, y2) and not torch.equal(x1, x3)
    assert x1.shape == y1.shape == (4, 32) and x1.dtype == y1.dtype == torch.int64
    assert torch.equal(x1[:, 1:], y1[:, :-1])
    assert int(x1.max()) < td.vocab_size
    g = torch.Generator().manual_seed(0)
    first, second = td.get_batch("val", 2, 16, g), td.get_batch("val", 2, 16, g)
    assert not torch.equal(first[0], second[0])  # the generator advances
    n = td.n_tokens("val")
    with pytest.raises(DataError, match=rf"too few for one sequence of {n:,} \(it needs {n + 1:,}\)"):
        td.get_batch("val", 1, n, g)
    assert td.get_batch("val", 1, n - 1, g)[0].shape == (1, n - 1)     # seq_len inputs and one more target: fits
    td.check_sequences(n - 1)
    with pytest.raises(DataError, match="the val split"):
        td.check_sequences(n)
    with pytest.raises(DataError, match="split"):
        td.get_batch("test", 1, 8, g)


def test_prepare_refuses_splits_shorter_than_the_shortest_sequence_a_profile_trains(tmp_path):
    from rev.base.profiles import PROFILES

    assert data.SHORTEST_SEQ_LEN == min(p.seq_len for p in PROFILES.values())
    words = "the cat sat on a mat and a dog ran far away in the sun".split()
    text = tmp_path / "t.txt"
    text.write_text("\n\n".join(" ".join(words[(i + j) % len(words)] for j in range(20)) for i in range(300)))
    with pytest.raises(DataError, match=rf"the val split .* too few for one sequence of {data.SHORTEST_SEQ_LEN} "):
        prepare(f"text:{text}", tmp_path / "short", 300, val_fraction=0.01, progress=False)
    assert list(tmp_path.iterdir()) == [text]                                # nothing kept, not even a temporary
    assert load(prepare(f"text:{text}", tmp_path / "ok", 300, val_fraction=0.05, progress=False)).n_tokens("val") > 64


def test_prepare_reuses_a_verified_folder_and_rebuilds_on_change(tmp_path):
    out = tmp_path / "syn"
    prepare("synthetic", out, 300, stories=120, progress=False)
    stamp = (out / "meta.json").read_text()
    start = time.perf_counter()
    assert prepare("synthetic", out, 300, stories=120, progress=False) == out
    assert time.perf_counter() - start < 5 and (out / "meta.json").read_text() == stamp  # reused
    prepare("synthetic", out, 300, stories=120, seed=5, progress=False)
    assert json.loads((out / "meta.json").read_text())["request"]["seed"] == 5  # other arguments: rebuilt
    assert no_leftovers(tmp_path, "syn")


def test_synthetic_size_in_tokens_is_approximate(tmp_path):
    meta = json.loads((prepare("synthetic", tmp_path / "t", 512, tokens=60_000, progress=False)
                       / "meta.json").read_text())
    assert 0.8 * 60_000 < meta["tokens"] < 1.25 * 60_000


def test_text_corpus_end_to_end(tmp_path):
    stories = list(synthetic_stories(60, seed=4))
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "a.txt").write_text(f"\n{EOT}\n".join(stories[:40]) + f"\n{EOT}\n", encoding="utf-8")
    (folder / "b.txt").write_text("\n\n\n".join(s.replace("\n", " ") for s in stories[40:]), encoding="utf-8")
    expected = stories[:40] + [s.replace("\n", " ") for s in stories[40:]]
    out = prepare(f"text:{folder}", tmp_path / "out", 300, val_fraction=0.1, progress=False)
    got = decoded_stories(out, "train") + decoded_stories(out, "val")
    assert sorted(got) == sorted(expected)
    assert decoded_stories(out, "val") == [s for i, s in enumerate(expected) if data._is_val(i, 0.1)]
    td = load(out, model_vocab_size=512)
    x, y = td.get_batch("train", 2, 16, torch.Generator().manual_seed(0))
    assert x.shape == (2, 16)
    # editing the corpus makes the next prepare rebuild
    (folder / "b.txt").write_text("\n\n".join(expected[40:50]), encoding="utf-8")
    prepare(f"text:{folder}", tmp_path / "out", 300, val_fraction=0.1, progress=False)
    assert len(decoded_stories(out, "train") + decoded_stories(out, "val")) == 50


def test_tinystories_without_network_fails_fast_with_offline_advice(tmp_path, monkeypatch):
    # an endpoint nothing listens on: the same answer as no network, also on machines that have one
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    start = time.perf_counter()
    with pytest.raises(DataError) as info:
        prepare("tinystories", tmp_path / "ts", progress=False)
    assert time.perf_counter() - start < 60
    message = str(info.value)
    assert "roneneldan/TinyStories" in message and "--source synthetic" in message and "text:PATH" in message
    assert not (tmp_path / "ts").exists() and no_leftovers(tmp_path, "ts")


# --- bad input: a clear error and nothing half-written ----------------------------------------------------------

@pytest.mark.parametrize("source, vocab, match", [
    ("text:/no/such/stories.txt", 300, "does not exist"),
    ("synthetic", 70_000, "uint16"),
    ("synthetic", 100, "at least 257"),
    ("wikipedia", 300, "unknown source"),
])
def test_bad_arguments_are_refused_before_any_work(tmp_path, source, vocab, match):
    with pytest.raises(DataError, match=match):
        prepare(source, tmp_path / "out", vocab, stories=10, progress=False)
    assert not (tmp_path / "out").exists() and no_leftovers(tmp_path, "out")


@pytest.mark.parametrize("content", ["", "   \n\n \n", f"{EOT}\n{EOT}\n", "just one story"])
def test_empty_corpus_is_refused_without_output(tmp_path, content):
    path = tmp_path / "empty.txt"
    path.write_text(content)
    with pytest.raises(DataError, match="empty|two"):
        prepare(f"text:{path}", tmp_path / "out", 300, progress=False)
    assert not (tmp_path / "out").exists() and no_leftovers(tmp_path, "out")


def test_truncated_bin_is_refused(copy):
    path = copy / "train.bin"
    path.write_bytes(path.read_bytes()[:-2])
    with pytest.raises(DataError, match="truncated"):
        load(copy)


def test_altered_bin_is_refused_unless_verification_is_skipped(copy):
    raw = bytearray((copy / "val.bin").read_bytes())
    raw[10] ^= 1
    (copy / "val.bin").write_bytes(bytes(raw))
    with pytest.raises(DataError, match="checksum"):
        load(copy)
    load(copy, verify=False)  # lengths only: the quick path for big corpora


def test_tokenizer_or_meta_from_another_corpus_is_refused(copy, tmp_path):
    other = prepare("synthetic", tmp_path / "other", 300, stories=100, seed=2, progress=False)
    mixed = Path(shutil.copytree(copy, tmp_path / "mixed"))
    shutil.copy(other / "tokenizer.json", mixed / "tokenizer.json")
    with pytest.raises(DataError, match="not the tokenizer"):
        load(mixed)
    shutil.copy(other / "meta.json", copy / "meta.json")
    with pytest.raises(DataError, match="not the tokenizer"):
        load(copy)


def test_model_vocabulary_smaller_than_the_data_is_refused(corpus):
    with pytest.raises(DataError, match=rf"vocab_size to at least {VOCAB}.*--vocab-size {VOCAB - 1}"):
        load(corpus, model_vocab_size=VOCAB - 1)
    assert load(corpus, model_vocab_size=VOCAB).vocab_size == VOCAB
    assert load(corpus, model_vocab_size=8192).vocab_size == VOCAB


def test_missing_or_unfinished_folder_is_refused(copy, tmp_path):
    with pytest.raises(DataError, match="no prepared corpus"):
        load(tmp_path / "nowhere")
    (copy / "meta.json").unlink()
    with pytest.raises(DataError, match="no meta.json"):
        load(copy)


def test_interrupted_prepare_leaves_nothing_a_load_accepts(tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(data, "_encode_split", interrupted)
    with pytest.raises(KeyboardInterrupt):
        prepare("synthetic", tmp_path / "syn", 300, stories=50, progress=False)
    assert not (tmp_path / "syn").exists() and no_leftovers(tmp_path, "syn")
    with pytest.raises(DataError):
        load(tmp_path / "syn")
    monkeypatch.undo()
    # a killed run leaves its temporary folder: never read by load, removed by the next prepare
    (tmp_path / ".syn.tmp-999999").mkdir()
    (tmp_path / ".syn.tmp-999999" / "train.bin").write_bytes(b"\0\0")
    prepare("synthetic", tmp_path / "syn", 300, stories=50, progress=False)
    assert load(tmp_path / "syn").n_tokens("train") > 0 and no_leftovers(tmp_path, "syn")


def test_a_damaged_folder_is_rebuilt_and_a_foreign_one_is_not_touched(copy, tmp_path):
    request = json.loads((copy / "meta.json").read_text())["request"]
    (copy / "train.bin").write_bytes(b"\0\0")
    prepare("synthetic", copy, request["vocab_size"], stories=request["stories"], seed=request["seed"],
            progress=False)
    assert load(copy).n_tokens("train") > 2
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(DataError, match="not a prepared corpus"):
        prepare("synthetic", foreign, 300, stories=50, progress=False)
    assert (foreign / "notes.txt").read_text() == "keep me"


# --- profiles and the command line ------------------------------------------------------------------------------

def test_prepare_profile_says_when_it_builds(tmp_path, capsys):
    from rev.base.profiles import PROFILES

    profile = PROFILES["smoke"].replace(data_tokens=20_000, data_name="tiny", vocab_size=300)
    out = data.prepare_profile(profile, tmp_path, progress=False)
    assert out == tmp_path / "tiny" and "preparing" in capsys.readouterr().out
    assert load(out, model_vocab_size=profile.vocab_size).meta["request"]["tokens"] == 20_000
    data.prepare_profile(profile, tmp_path, progress=False)
    assert capsys.readouterr().out == ""


def test_command_line(tmp_path, capsys):
    from rev.__main__ import main

    argv = ["prepare", "--stories", "100", "--vocab-size", "300", "--data-root", str(tmp_path), "--no-progress"]
    assert main(argv) == 0
    assert "built in" in capsys.readouterr().out
    assert (tmp_path / "synthetic-100st-v300" / "meta.json").exists()
    assert main(argv) == 0 and "reused" in capsys.readouterr().out
    assert main(["prepare", "--vocab-size", "70000", "--out", str(tmp_path / "x"), "--no-progress"]) == 2
    assert "uint16" in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_names_and_counts():
    assert data.default_name("synthetic", 8192, tokens=5_000_000) == "synthetic-5M"
    assert data.default_name("synthetic", 2048, stories=300, seed=2) == "synthetic-300st-v2048-s2"
    assert data.default_name("tinystories") == "tinystories"
    assert data.default_name("text:/x/my_stories.txt", 1024) == "text-my_stories-v1024"
    assert [data._count(s) for s in ("5M", "200k", "5e6", "1_000")] == [5_000_000, 200_000, 5_000_000, 1000]


def test_tinystories_code_path_on_local_datasets(tmp_path, monkeypatch):
    """Everything after the download, on `datasets` objects made here (the hub is not reachable from tests)."""
    datasets = pytest.importorskip("datasets")
    stories = list(synthetic_stories(80, seed=6))
    fake = {"train": datasets.Dataset.from_dict({"text": stories[:70] + [""]}),
            "val": datasets.Dataset.from_dict({"text": stories[70:]})}
    monkeypatch.setattr(tinystories, "load_splits", lambda: fake)
    out = prepare("tinystories", tmp_path / "ts", 300, stories=50, progress=False)
    assert decoded_stories(out, "train") == stories[:50]  # the cap cuts the training split only
    assert decoded_stories(out, "val") == stories[70:]


def test_unigram_loss_matches_a_plain_count(corpus):
    """The context-free line, against a direct count in plain Python."""
    import math
    from collections import Counter

    data = load(corpus)
    train, val = data.array("train").tolist(), data.array("val").tolist()
    counts, total = Counter(train), len(train) + data.vocab_size
    expected = -sum(math.log((counts[t] + 1) / total) for t in val) / len(val)
    assert data.unigram_loss() == pytest.approx(expected, rel=1e-9)
    assert data.unigram_loss() < math.log(data.vocab_size)  # token frequencies carry information


def test_paths_inside_the_checkout_are_shown_relative_to_it(tmp_path):
    from rev.base.files import CHECKOUT, shown_path

    assert shown_path(CHECKOUT / "results" / "cpu" / "run1_baseline") == "results/cpu/run1_baseline"
    assert shown_path(tmp_path) == str(tmp_path)          # a place the reader chose outside it stays as given
