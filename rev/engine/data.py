"""Corpora, tokenizer and token files: everything between raw text and training batches.

`python -m rev prepare` turns a source into ``data/<name>/{tokenizer.json, train.bin, val.bin, meta.json}``:

* ``tinystories``: the real data set through `datasets` (needs the Hugging Face hub or its local cache);
* ``text:PATH``: local ``.txt`` files or folders (comma-separated), stories separated by ``<|endoftext|>`` or by
  blank lines;
* ``synthetic``: short children's stories written by a seeded story grammar in this module, so that tests, CI and
  offline learners have a corpus with no download at all.

The tokenizer is a byte-level BPE trained on the training split only; ``<|endoftext|>`` comes before every story
in the ``.bin`` files (uint16 ids). `load` checks a prepared folder against its ``meta.json`` and hands out
deterministic random batches from memory-mapped token files.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import operator
import os
import random
import shutil
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from itertools import chain, islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from tqdm.auto import tqdm

if TYPE_CHECKING:  # torch is imported only when batches are drawn: `prepare` does not need it
    import torch

EOT = "<|endoftext|>"
FORMAT = 1                       # bump when the layout of a prepared folder changes
MIN_VOCAB = 257                  # the 256 byte symbols plus <|endoftext|>
MAX_VOCAB = 65535                # ids are stored as uint16
DEFAULT_VOCAB = 8192
DEFAULT_SYNTHETIC_TOKENS = 5_000_000
TINYSTORIES = "roneneldan/TinyStories"
SPLITS = ("train", "val")
_STORIES_PER_BATCH = 1024        # encoding works on this many stories at a time, so memory stays bounded
_READ_CHUNK = 1 << 22            # bytes per read when checksumming


class DataError(ValueError):
    """Bad input to the data pipeline; the message says what to do about it."""


# ---------------------------------------------------------------------------------------------------------------
# What was asked for: a normalised request, recorded in meta.json and compared on re-runs
# ---------------------------------------------------------------------------------------------------------------

def _whole(value: Any) -> int | None:
    """`value` as an int if it is a whole number (int, numpy integer), else None."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _check_sizes(vocab_size: int, tokens: int | None, stories: int | None, val_fraction: float) -> None:
    if _whole(vocab_size) is None or vocab_size < MIN_VOCAB:
        raise DataError(f"vocab_size={vocab_size!r}: a byte-level BPE needs at least {MIN_VOCAB} entries "
                        f"(256 bytes + {EOT}); use e.g. --vocab-size 512 for tiny runs or 8192 for the assignment")
    if vocab_size > MAX_VOCAB:
        raise DataError(f"vocab_size={vocab_size} does not fit the uint16 token files (at most {MAX_VOCAB}); "
                        f"choose --vocab-size {MAX_VOCAB} or less (8192 is the assignment's)")
    for flag, value in (("tokens", tokens), ("stories", stories)):
        if value is not None and (_whole(value) is None or value <= 0):
            raise DataError(f"{flag}={value!r}: give a positive whole number (or leave it out)")
    if not 0.0 < val_fraction <= 0.5:
        raise DataError(f"val_fraction={val_fraction!r}: give a fraction in (0, 0.5], e.g. 0.02")


def _text_files(spec: str) -> list[Path]:
    """The .txt files named by `spec` (comma-separated files or folders; folders are searched recursively)."""
    files: list[Path] = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        path = Path(part).expanduser()
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.txt") if p.is_file())
            if not found:
                raise DataError(f"text source: no .txt files under {path}; put your stories in .txt files there")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise DataError(f"text source: {path} does not exist; give an existing .txt file or folder, "
                            f"e.g. --source text:stories.txt")
    if not files:
        raise DataError("text source: no path given; write it as --source text:PATH")
    if all(p.stat().st_size == 0 for p in files):
        raise DataError(f"text source: {', '.join(map(str, files))} is empty; the corpus needs at least "
                        f"two stories (one for training, one for validation)")
    return files


def _request(source: str, vocab_size: int, tokens: int | None, stories: int | None, seed: int,
             val_fraction: float) -> dict[str, Any]:
    """What identifies a prepared corpus. Settings that do not change a source's output are left out of it."""
    _check_sizes(vocab_size, tokens, stories, val_fraction)
    vocab_size, tokens, stories = _whole(vocab_size), _whole(tokens), _whole(stories)  # plain ints for JSON
    base = {"format": FORMAT, "source": source, "vocab_size": vocab_size, "tokens": tokens, "stories": stories}
    if source == "synthetic":
        if tokens is None and stories is None:
            base["tokens"] = DEFAULT_SYNTHETIC_TOKENS
        return {**base, "seed": int(seed), "val_fraction": float(val_fraction)}
    if source == "tinystories":  # the data set's own validation split is used as it is
        return {**base, "dataset": TINYSTORIES}
    if source.startswith("text:"):
        # size and modification time of each file: editing the corpus makes the next prepare rebuild
        inputs = [[str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns] for p in _text_files(source[5:])]
        return {**base, "inputs": inputs, "val_fraction": float(val_fraction)}
    raise DataError(f"unknown source {source!r}: use 'synthetic', 'tinystories' or 'text:PATH'")


def default_name(source: str, vocab_size: int = DEFAULT_VOCAB, tokens: int | None = None,
                 stories: int | None = None, seed: int = 0) -> str:
    """Folder name under data/ for a corpus, e.g. `synthetic-5M`, `tinystories`, `text-mystories-v2048`."""
    if source == "synthetic":
        name = "synthetic-" + (_short(tokens) if tokens else f"{stories}st" if stories else
                               _short(DEFAULT_SYNTHETIC_TOKENS))
        if tokens and stories:
            name += f"-{stories}st"
    elif source.startswith("text:"):
        first = Path(source[5:].split(",")[0].rstrip("/"))
        name = "text-" + (first.stem or "corpus")
    else:
        name = source.replace("/", "-")
        if tokens or stories:
            name += "-" + (_short(tokens) if tokens else f"{stories}st")
    if vocab_size != DEFAULT_VOCAB:
        name += f"-v{vocab_size}"
    if source == "synthetic" and seed:
        name += f"-s{seed}"
    return name


def _short(n: int) -> str:
    for unit, size in (("G", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= size and n % (size // 10) == 0:
            return f"{n / size:g}{unit}"
    return str(n)


# ---------------------------------------------------------------------------------------------------------------
# Sources: fresh iterators over the stories of each split
# ---------------------------------------------------------------------------------------------------------------

@dataclass
class _Corpus:
    streams: dict[str, Callable[[], Iterator[str]]]   # split -> a new iterator over its stories
    totals: dict[str, int | None]                     # stories per split when known in advance (progress bars)
    spool: bool = False   # keep the training stories on disk after the tokenizer pass instead of making them again


def _is_val(index: int, val_fraction: float) -> bool:
    """Every 1/val_fraction-th story goes to validation, story 0 first: stable whatever the corpus length."""
    return index == 0 or math.floor(index * val_fraction) > math.floor((index - 1) * val_fraction)


# characters per token of a byte-level BPE on simple English, by vocabulary (measured on the synthetic corpus;
# it levels off once every word is one token); used only to size a corpus in tokens before it is tokenized
_CHARS_PER_TOKEN = ((256, 1.0), (300, 1.45), (384, 1.9), (512, 2.3), (1024, 3.2), (2048, 4.0), (4096, 4.2),
                    (65536, 4.4))


def _chars_per_token(vocab_size: int) -> float:
    x = math.log2(vocab_size)
    for (v0, c0), (v1, c1) in zip(_CHARS_PER_TOKEN, _CHARS_PER_TOKEN[1:]):
        if vocab_size <= v1:
            return c0 + (c1 - c0) * (x - math.log2(v0)) / (math.log2(v1) - math.log2(v0))
    return _CHARS_PER_TOKEN[-1][1]


def _capped(stories: Iterable[str], max_stories: int | None, max_tokens: int | None,
            vocab_size: int) -> Iterator[str]:
    budget = math.inf if max_tokens is None else max_tokens * _chars_per_token(vocab_size)
    chars = 0
    for i, story in enumerate(stories):
        if (max_stories is not None and i >= max_stories) or chars >= budget:
            return
        chars += len(story)
        yield story


def _synthetic_corpus(req: dict[str, Any]) -> _Corpus:
    seed, vf = req["seed"], req["val_fraction"]
    n = req["stories"] or math.inf
    if req["tokens"]:
        # estimate from the first stories: story i is fixed whatever the size, so this is deterministic
        sample = [len(_story(seed, i)) for i in range(256)]
        per_story = sum(sample) / len(sample) / _chars_per_token(req["vocab_size"])
        n = min(n, max(2, math.ceil(req["tokens"] / per_story)))
    n = int(n)
    n_val = sum(1 for i in range(n) if _is_val(i, vf))

    def stream(val: bool) -> Iterator[str]:
        return (_story(seed, i) for i in range(n) if _is_val(i, vf) == val)

    # writing a story costs more than reading it back: spool the training split for the encoding pass
    return _Corpus({"train": lambda: stream(False), "val": lambda: stream(True)},
                   {"train": n - n_val, "val": n_val}, spool=True)


def _file_stories(path: Path) -> Iterator[str]:
    """Stories of one file, read line by line: split on <|endoftext|> if the file has one, else on blank lines."""
    try:
        with path.open(encoding="utf-8") as f:
            by_marker = any(EOT in line for line in f)
        parts: list[str] = []
        with path.open(encoding="utf-8") as f:
            for line in f:
                if by_marker:
                    *ends, rest = line.split(EOT)
                    for end in ends:
                        parts.append(end)
                        yield from _flush(parts)
                    parts.append(rest)
                elif line.strip():
                    parts.append(line)
                else:
                    yield from _flush(parts)
        yield from _flush(parts)
    except UnicodeDecodeError as e:
        raise DataError(f"{path} is not UTF-8 text ({e.reason} at byte {e.start}); convert it to UTF-8") from e


def _flush(parts: list[str]) -> Iterator[str]:
    text = "".join(parts).strip()
    parts.clear()
    if text:
        yield text


def _text_corpus(req: dict[str, Any]) -> _Corpus:
    files = [Path(p) for p, _, _ in req["inputs"]]
    vf = req["val_fraction"]

    def stream(val: bool) -> Iterator[str]:
        stories = _capped(chain.from_iterable(map(_file_stories, files)), req["stories"], req["tokens"],
                          req["vocab_size"])
        return (s for i, s in enumerate(stories) if _is_val(i, vf) == val)

    return _Corpus({"train": lambda: stream(False), "val": lambda: stream(True)}, {"train": None, "val": None})


def _offline_message(reason: str) -> str:
    cache = ("it is not in the local Hugging Face cache either" if _hub_offline_flag() else
             "if it is already in your Hugging Face cache, set HF_HUB_OFFLINE=1 and HF_DATASETS_OFFLINE=1 and "
             "run again")
    return (f"cannot get {TINYSTORIES} from the Hugging Face hub ({reason}); {cache}. Without a network, "
            f"prepare the project's own corpus instead: `python -m rev prepare --source synthetic` "
            f"(prepare('synthetic', ...)), or your own stories: `--source text:PATH` (.txt files, stories "
            f"separated by {EOT} or blank lines).")


def _hub_offline_flag() -> bool:
    return any(os.environ.get(k, "").strip().lower() in ("1", "true", "yes", "on")
               for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def _probe_hub(timeout: float = 5.0) -> None:
    """Fails in seconds when the hub is unreachable; `datasets` alone retries for half a minute or more."""
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    request = urllib.request.Request(f"{endpoint}/api/datasets/{TINYSTORIES}", method="HEAD")
    try:
        urllib.request.urlopen(request, timeout=timeout).close()
    except urllib.error.HTTPError:
        return  # the hub answered; `datasets` will report anything more specific
    except (urllib.error.URLError, OSError) as e:
        raise DataError(_offline_message(f"{endpoint} is unreachable: {getattr(e, 'reason', e)}")) from None


def _load_tinystories() -> dict[str, Any]:
    if not _hub_offline_flag():
        _probe_hub()
    # short hub timeouts: read by huggingface_hub when first imported
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", "10")
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", "60")
    try:
        import datasets
    except ImportError as e:
        raise DataError("the tinystories source needs the `datasets` package: pip install datasets") from e
    try:
        return {split: datasets.load_dataset(TINYSTORIES, split=hf) for split, hf in
                (("train", "train"), ("val", "validation"))}
    except Exception as e:  # network, cache and hub errors come in many types; all mean "not available here"
        raise DataError(_offline_message(f"{type(e).__name__}: {e}")) from e


def _texts(dataset: Any) -> Iterator[str]:
    for batch in dataset.iter(batch_size=_STORIES_PER_BATCH):
        for text in batch["text"]:
            text = (text or "").strip()
            if text:
                yield text


def _tinystories_corpus(req: dict[str, Any]) -> _Corpus:
    ds = _load_tinystories()

    def train() -> Iterator[str]:  # a cap cuts the training split; validation stays the data set's own
        return _capped(_texts(ds["train"]), req["stories"], req["tokens"], req["vocab_size"])

    total = None if req["tokens"] else min(len(ds["train"]), req["stories"] or len(ds["train"]))
    return _Corpus({"train": train, "val": lambda: _texts(ds["val"])}, {"train": total, "val": len(ds["val"])})


def _open_corpus(req: dict[str, Any]) -> _Corpus:
    if req["source"] == "synthetic":
        return _synthetic_corpus(req)
    if req["source"] == "tinystories":
        return _tinystories_corpus(req)
    return _text_corpus(req)


# ---------------------------------------------------------------------------------------------------------------
# Tokenizer and token files
# ---------------------------------------------------------------------------------------------------------------

def _batched(items: Iterable[str], size: int) -> Iterator[list[str]]:
    it = iter(items)
    while batch := list(islice(it, size)):
        yield batch


def _train_tokenizer(stories: Iterator[str], vocab_size: int, bar: Any) -> tuple[Tokenizer, int]:
    """Byte-level BPE with <|endoftext|> as id 0; returns it and the number of stories it was trained on."""
    tok = Tokenizer(models.BPE())
    # no normaliser and no prefix space: decode(encode(text)) == text for any text
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOT], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    seen = [0]

    def feed() -> Iterator[list[str]]:
        for batch in _batched(stories, _STORIES_PER_BATCH):
            seen[0] += len(batch)
            bar.update(len(batch))
            yield batch
        bar.set_postfix_str("computing merges")

    tok.train_from_iterator(feed(), trainer=trainer)
    return tok, seen[0]


def _with_eot(ids: list[list[int]], eot_id: int) -> np.ndarray:
    """Concatenates stories as uint16, each preceded by one <|endoftext|>."""
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter(chain.from_iterable(ids), dtype=np.uint16, count=int(lengths.sum()))
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    return np.insert(flat, starts, np.uint16(eot_id))


def _spooled(stories: Iterable[str], path: Path) -> Iterator[str]:
    """Passes stories through while writing them to `path`, one JSON string per line."""
    with path.open("w", encoding="utf-8") as f:
        for story in stories:
            f.write(json.dumps(story) + "\n")
            yield story


def _unspooled(path: Path) -> Iterator[str]:
    with path.open(encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)


def _encode_split(tok: Tokenizer, stories: Iterator[str], path: Path, eot_id: int, bar: Any) -> dict[str, Any]:
    digest = hashlib.blake2b(digest_size=16)
    n_tokens = n_stories = n_chars = max_id = 0
    with path.open("wb") as f:
        for batch in _batched(stories, _STORIES_PER_BATCH):
            ids = _with_eot([e.ids for e in tok.encode_batch_fast(batch, add_special_tokens=False)], eot_id)
            data = ids.tobytes()
            f.write(data)
            digest.update(data)  # checksum while writing: no second pass over the file
            n_tokens += ids.size
            n_stories += len(batch)
            n_chars += sum(map(len, batch))
            max_id = max(max_id, int(ids.max()))
            bar.update(len(batch))
            bar.set_postfix(tokens=f"{n_tokens:,}", refresh=False)
    return {"file": path.name, "tokens": n_tokens, "bytes": n_tokens * 2, "stories": n_stories, "chars": n_chars,
            "max_token_id": max_id, "blake2b": digest.hexdigest()}


def _blake2b(path: Path) -> str:
    digest = hashlib.blake2b(digest_size=16)
    with path.open("rb") as f:
        while chunk := f.read(_READ_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _bar(progress: bool, total: int | None, desc: str) -> Any:
    return tqdm(total=total, desc=desc, unit="story", disable=not progress, dynamic_ncols=True)


def _build(req: dict[str, Any], corpus: _Corpus, folder: Path, name: str, progress: bool) -> dict[str, Any]:
    """Writes tokenizer.json, train.bin, val.bin and, last, meta.json into `folder`."""
    start = time.perf_counter()
    spool = folder / "train.spool.jsonl"
    streams = dict(corpus.streams)
    if corpus.spool:
        streams["train"] = lambda: _spooled(corpus.streams["train"](), spool)
    with _bar(progress, corpus.totals["train"], f"{name}: tokenizer") as bar:
        tok, n_train = _train_tokenizer(streams["train"](), req["vocab_size"], bar)
    if corpus.spool:
        streams["train"] = lambda: _unspooled(spool)
    if n_train == 0:
        raise DataError(f"the {req['source']} corpus has no training stories (it is empty or has a single story); "
                        f"give it at least two non-empty stories")
    tok.save(str(folder / "tokenizer.json"))
    eot_id = tok.token_to_id(EOT)
    splits = {}
    for split in SPLITS:
        with _bar(progress, corpus.totals[split], f"{name}: encode {split}") as bar:
            splits[split] = _encode_split(tok, streams[split](), folder / f"{split}.bin", eot_id, bar)
        if splits[split]["stories"] == 0:
            raise DataError(f"the {req['source']} corpus gave no {split} stories; it needs at least two stories "
                            f"(raise --stories/--tokens or --val-fraction)")
    spool.unlink(missing_ok=True)
    seconds = time.perf_counter() - start
    total = sum(s["tokens"] for s in splits.values())
    meta = {
        "format": FORMAT, "request": req, "source": req["source"],
        "vocab_size": tok.get_vocab_size(), "requested_vocab_size": req["vocab_size"],
        "eot_token": EOT, "eot_id": eot_id, "dtype": "uint16", "eot_position": "before each story",
        "tokenizer_sha256": _sha256(folder / "tokenizer.json"),
        "max_token_id": max(s["max_token_id"] for s in splits.values()),
        "splits": splits, "tokens": total,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "build_seconds": round(seconds, 3),
        "tokens_per_second": round(total / max(seconds, 1e-9)),
    }
    (folder / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


# ---------------------------------------------------------------------------------------------------------------
# prepare: reuse what verifies, else build in a temporary sibling folder and rename it into place
# ---------------------------------------------------------------------------------------------------------------

@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """Serialises prepares sharing a data folder (one per rank under torchrun, or two notebooks)."""
    try:
        import fcntl
        fd = os.open(folder, os.O_RDONLY)
    except (ImportError, OSError):  # no flock here (Windows): run unlocked
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # some network mounts refuse locks: run unlocked
            pass
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _is_current(out: Path, req: dict[str, Any]) -> bool:
    try:
        meta = json.loads((out / "meta.json").read_text())
        if meta.get("request") != req:
            return False
        load(out, verify=True)
        return True
    except (OSError, ValueError):  # missing, unreadable or not verifying (DataError is a ValueError)
        return False


def _remove_leftovers(out: Path) -> None:
    """Temporary folders of interrupted prepares (never accepted by `load`: it reads only `out`)."""
    for pattern in (f".{out.name}.tmp-*", f".{out.name}.old-*"):
        for leftover in out.parent.glob(pattern):
            shutil.rmtree(leftover, ignore_errors=True)


def _check_target(out: Path) -> None:
    if out.is_file() or (out.is_dir() and any(out.iterdir()) and not (out / "meta.json").exists()):
        raise DataError(f"{out} exists and is not a prepared corpus; choose another --out or move it away "
                        f"(prepare only replaces folders it wrote itself)")


def _prepare(req: dict[str, Any], out: Path, progress: bool,
             announce: Callable[[], None] | None = None) -> tuple[Path, bool]:
    """Returns the folder and whether it was built (False: reused)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with _locked(out.parent):
        if _is_current(out, req):
            return out, False
        _check_target(out)
        _remove_leftovers(out)
        if announce:
            announce()
        corpus = _open_corpus(req)  # may fail (no network): nothing has been written yet
        tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
        tmp.mkdir()
        try:
            _build(req, corpus, tmp, out.name, progress)
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            if out.exists():
                out.rename(old)
            tmp.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out, True


def prepare(source: str, out_dir: str | Path, vocab_size: int = DEFAULT_VOCAB, *, tokens: int | None = None,
            stories: int | None = None, seed: int = 0, val_fraction: float = 0.02, progress: bool = True) -> Path:
    """Tokenizes `source` into `out_dir` (see the module docstring) and returns `out_dir`.

    `tokens` / `stories` size the corpus: the synthetic one is generated up to about that many tokens or exactly
    that many stories (default 5M tokens); text and TinyStories corpora are cut there (TinyStories: its training
    split only). `seed` and `val_fraction` apply to synthetic and text corpora; TinyStories keeps its own
    validation split. A folder already prepared with the same arguments that still verifies is reused as it is.
    """
    req = _request(source, vocab_size, tokens, stories, seed, val_fraction)
    return _prepare(req, Path(out_dir), progress)[0]


def _prepare_profile(profile: Any, data_root: str | Path, progress: bool) -> tuple[Path, bool]:
    out = Path(data_root) / profile.data_name
    # data_tokens == 0 means the whole data set (TinyStories profiles)
    req = _request(profile.data_source, profile.vocab_size, profile.data_tokens or None, None, 0, 0.02)

    def announce() -> None:
        size = f"~{profile.data_tokens:,} tokens, " if profile.data_tokens else ""
        print(f"preparing the {profile.data_source} corpus of profile '{profile.name}' in {out} "
              f"({size}vocabulary {profile.vocab_size}) ...", flush=True)

    return _prepare(req, out, progress, announce)


def prepare_profile(profile: Any, data_root: str | Path = "data", progress: bool = True) -> Path:
    """Prepares the default corpus of a `rev.engine.profiles.Profile` in data_root/profile.data_name (if not there)."""
    return _prepare_profile(profile, data_root, progress)[0]


# ---------------------------------------------------------------------------------------------------------------
# Loading: verification, memmap batches, encode/decode
# ---------------------------------------------------------------------------------------------------------------

def _read_meta(folder: Path) -> dict[str, Any]:
    rebuild = f"prepare it again: python -m rev prepare --out {folder} ..."
    if not folder.is_dir():
        raise DataError(f"no prepared corpus at {folder}: run `python -m rev prepare` (or rev.engine.data.prepare) first")
    try:
        meta = json.loads((folder / "meta.json").read_text())
    except FileNotFoundError:
        raise DataError(f"{folder} has no meta.json (an unfinished or foreign folder); {rebuild}") from None
    except (OSError, ValueError) as e:
        raise DataError(f"{folder}/meta.json is unreadable ({e}); {rebuild}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or not _complete(meta):
        raise DataError(f"{folder}/meta.json is not a complete format-{FORMAT} corpus description; {rebuild}")
    return meta


def _complete(meta: dict[str, Any]) -> bool:
    keys = ("vocab_size", "eot_id", "tokenizer_sha256", "max_token_id", "splits")
    split_keys = ("tokens", "blake2b")
    splits = meta.get("splits")
    return (all(k in meta for k in keys) and isinstance(splits, dict) and
            all(isinstance(splits.get(s), dict) and all(k in splits[s] for k in split_keys) for s in SPLITS))


def _check_tokenizer(folder: Path, meta: dict[str, Any]) -> Tokenizer:
    path = folder / "tokenizer.json"
    if not path.is_file():
        raise DataError(f"{path} is missing; prepare the corpus again (the token files cannot be read without it)")
    if _sha256(path) != meta.get("tokenizer_sha256"):
        raise DataError(f"{path} is not the tokenizer that encoded the token files in {folder} (its hash differs "
                        f"from meta.json): the files were mixed from different corpora; prepare the corpus again")
    tok = Tokenizer.from_file(str(path))
    if tok.get_vocab_size() != meta["vocab_size"] or tok.token_to_id(EOT) != meta["eot_id"]:
        raise DataError(f"{path} does not match meta.json (vocabulary or {EOT} id); prepare the corpus again")
    return tok


def _check_bins(folder: Path, meta: dict[str, Any], verify: bool) -> None:
    for split in SPLITS:
        info = meta["splits"][split]
        path = folder / f"{split}.bin"
        if not path.is_file():
            raise DataError(f"{path} is missing; prepare the corpus again")
        size = path.stat().st_size
        if size != 2 * info["tokens"]:
            raise DataError(f"{path} has {size:,} bytes but meta.json records {info['tokens']:,} tokens "
                            f"({2 * info['tokens']:,} bytes): it was truncated or overwritten; prepare it again")
        if verify and _blake2b(path) != info["blake2b"]:
            raise DataError(f"{path} does not match its checksum in meta.json: it was altered after prepare; "
                            f"prepare the corpus again")


def _as_ids(ids: Any) -> list[int]:
    if hasattr(ids, "tolist"):  # tensors and arrays
        ids = ids.tolist()
    return [int(i) for i in ids]


class TokenData:
    """A verified corpus: memory-mapped token files, its tokenizer, and a deterministic batch sampler."""

    def __init__(self, folder: Path, meta: dict[str, Any], tokenizer: Tokenizer) -> None:
        self.path = folder
        self.meta = meta
        self.tokenizer = tokenizer
        self.vocab_size: int = meta["vocab_size"]
        self.eot_id: int = meta["eot_id"]
        self._arrays: dict[str, np.memmap] = {}

    def __repr__(self) -> str:
        sizes = ", ".join(f"{s}={self.n_tokens(s):,}" for s in SPLITS)
        return f"TokenData({str(self.path)!r}, vocab_size={self.vocab_size}, tokens: {sizes})"

    def array(self, split: str) -> np.memmap:
        """The token ids of a split, memory-mapped (read-only)."""
        if split not in SPLITS:
            raise DataError(f"unknown split {split!r}: use one of {', '.join(SPLITS)}")
        if split not in self._arrays:
            self._arrays[split] = np.memmap(self.path / f"{split}.bin", dtype=np.uint16, mode="r")
        return self._arrays[split]

    def n_tokens(self, split: str) -> int:
        if split not in SPLITS:
            raise DataError(f"unknown split {split!r}: use one of {', '.join(SPLITS)}")
        return int(self.meta["splits"][split]["tokens"])

    def get_batch(self, split: str, batch_size: int, seq_len: int, generator: torch.Generator,
                  device: str | torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """x, y int64 (batch_size, seq_len), y = x shifted by one; offsets come from `generator` alone."""
        import torch

        data = self.array(split)
        if len(data) <= seq_len:
            raise DataError(f"the {split} split has {len(data):,} tokens, too few for seq_len={seq_len}; "
                            f"use a shorter sequence or a bigger corpus")
        offsets = torch.randint(len(data) - seq_len, (batch_size,), generator=generator,
                                device=generator.device).cpu().numpy()
        window = data[offsets[:, None] + np.arange(seq_len + 1)].astype(np.int64)
        chunk = torch.from_numpy(window)
        x, y = chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous()
        if device is not None:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        return x, y

    def unigram_loss(self) -> float:
        """Validation cross-entropy (nats/token) of a model that ignores context: every token is predicted
        with its frequency in the training split (add-one smoothed, so unseen tokens cost finite loss). A
        trained model has learnt something beyond token counts only once it scores below this."""
        vocab = self.vocab_size
        counts = np.bincount(self.array("train"), minlength=vocab)[:vocab].astype(np.float64) + 1.0
        log_p = np.log(counts / counts.sum())
        val = self.array("val")
        return float(-log_p[val].mean()) if len(val) else float("nan")

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Any, skip_special: bool = False) -> str:
        """Text of token ids (list, array or tensor); <|endoftext|> shows story boundaries unless skipped."""
        return self.tokenizer.decode(_as_ids(ids), skip_special_tokens=skip_special)


def load(data_dir: str | Path, model_vocab_size: int | None = None, verify: bool = True) -> TokenData:
    """Opens a prepared corpus after checking it: meta.json, tokenizer identity, `.bin` lengths, and checksums
    unless `verify=False`. A `model_vocab_size` smaller than the corpus vocabulary is an error."""
    folder = Path(data_dir)
    meta = _read_meta(folder)
    tok = _check_tokenizer(folder, meta)
    _check_bins(folder, meta, verify)
    if meta["max_token_id"] >= meta["vocab_size"]:
        raise DataError(f"{folder}/meta.json records token id {meta['max_token_id']} outside the vocabulary of "
                        f"{meta['vocab_size']}; prepare the corpus again")
    if model_vocab_size is not None and model_vocab_size < meta["vocab_size"]:
        raise DataError(f"the model's vocabulary ({model_vocab_size}) is smaller than the corpus's "
                        f"({meta['vocab_size']}, token ids up to {meta['max_token_id']}): set the model's "
                        f"vocab_size to at least {meta['vocab_size']}, or prepare the data with "
                        f"--vocab-size {model_vocab_size}")
    return TokenData(folder, meta, tok)


# ---------------------------------------------------------------------------------------------------------------
# Command line: python -m rev prepare
# ---------------------------------------------------------------------------------------------------------------

def _count(text: str) -> int:
    """Whole numbers written as 5000000, 5_000_000, 5e6, 5M or 200k."""
    t = text.strip().lower().replace("_", "").replace(",", "")
    scale = {"k": 10**3, "m": 10**6, "g": 10**9}.get(t[-1:], 1)
    try:
        value = float(t[:-1] if scale > 1 else t) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count (try 5000000, 5M or 200k)") from None
    if value != int(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return int(value)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source", default="synthetic",
                        help="synthetic (default), tinystories, or text:PATH[,PATH...] (.txt files or folders)")
    parser.add_argument("--vocab-size", type=int, default=DEFAULT_VOCAB, help="BPE vocabulary (default 8192)")
    parser.add_argument("--out", default=None, help="output folder (default: DATA_ROOT/<name from the arguments>)")
    parser.add_argument("--tokens", type=_count, default=None,
                        help="corpus size in tokens, approximate (synthetic default 5M; cuts other sources)")
    parser.add_argument("--stories", type=_count, default=None, help="corpus size in stories")
    parser.add_argument("--seed", type=int, default=0, help="synthetic corpus seed")
    parser.add_argument("--val-fraction", type=float, default=0.02,
                        help="share of stories kept for validation (synthetic and text sources)")
    parser.add_argument("--profile", default=None,
                        help="prepare this profile's corpus (smoke, cpu, t4, full, auto) instead")
    parser.add_argument("--data-root", default="data", help="folder that holds the corpora (default data)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def run_cli(args: argparse.Namespace) -> int:
    progress = not args.no_progress
    try:
        if args.profile:
            from rev.engine.profiles import get_profile

            try:
                profile = get_profile(args.profile)
            except ValueError as e:
                raise DataError(str(e)) from None
            out, built = _prepare_profile(profile, args.data_root, progress)
        else:
            req = _request(args.source, args.vocab_size, args.tokens, args.stories, args.seed, args.val_fraction)
            out = Path(args.out) if args.out else Path(args.data_root) / default_name(
                args.source, args.vocab_size, args.tokens, args.stories, args.seed)
            out, built = _prepare(req, out, progress)
        data = load(out, verify=False)  # verified while being built or reused
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    m = data.meta
    how = (f"built in {m['build_seconds']:.1f} s, {m['tokens_per_second']:,} tokens/s" if built else
           "already prepared with these arguments: reused")
    print(f"{out}: {data.n_tokens('train'):,} train + {data.n_tokens('val'):,} val tokens, "
          f"vocabulary {data.vocab_size} (requested {m['requested_vocab_size']}; {how})")
    return 0


# ---------------------------------------------------------------------------------------------------------------
# The synthetic corpus: a small story grammar.
#
# Each story is drawn from its own `random.Random` seeded by (seed, index), so story i is the same whatever the
# corpus size, a corpus of n stories is a prefix of one of n+1 stories, and any split can be regenerated alone.
# The grammar keeps a cast (hero, friend, grown-up), a place and an object fixed through a story, so a model has
# long-range consistency to learn (names, pronouns, what was lost and where), not only local word statistics.
# ---------------------------------------------------------------------------------------------------------------

_GIRLS = ("Lily", "Mia", "Emma", "Sara", "Anna", "Lucy", "Ella", "Zoe", "Amy", "Ruby", "Rosie", "Daisy", "Molly",
          "Chloe", "Grace", "Ava", "Ivy", "Nora", "Maya", "Kate", "Jenny", "Sophie", "Hannah", "Tara", "Lena",
          "Rita", "Nina", "Bella", "Clara", "Poppy", "Sue", "May", "Jill", "Elsie", "Hazel", "Iris")
_BOYS = ("Tom", "Ben", "Max", "Sam", "Leo", "Jack", "Tim", "Finn", "Jake", "Noah", "Oliver", "Luke", "Dan", "Eli",
         "Owen", "Ryan", "Adam", "Theo", "Henry", "Milo", "Ollie", "Billy", "Bobby", "Charlie", "Joe", "Pete",
         "Alex", "Kai", "Toby", "Jim", "Ned", "Ted", "Zack", "Hugo", "Oscar", "Felix")
_PET_NAMES = ("Pip", "Coco", "Bubbles", "Fluffy", "Spot", "Sunny", "Buddy", "Pinky", "Whiskers", "Bingo", "Hoppy",
              "Rusty", "Nutmeg", "Pebble", "Ziggy", "Honey", "Button", "Patch", "Snowy", "Peanut", "Muffin",
              "Tiny", "Dot", "Biscuit", "Puddles", "Maple", "Clover", "Socks", "Pepper", "Twig")
# animal -> (where it lives, a thing it likes to do)
_ANIMALS = {
    "bunny": ("in a cozy hole under a big tree", "hop in the grass"),
    "puppy": ("in a little house with a red door", "chase its tail"),
    "kitten": ("in a warm house by the river", "chase balls of yarn"),
    "bear cub": ("in a big cave in the woods", "eat sweet honey"),
    "fox": ("in a den at the edge of the forest", "run through the tall grass"),
    "duck": ("by a quiet pond", "splash in the water"),
    "mouse": ("in a tiny hole in the wall", "nibble on cheese"),
    "owl": ("in a high nest in an old oak tree", "look at the stars"),
    "frog": ("on a green lily pad", "jump from leaf to leaf"),
    "squirrel": ("in a round nest high in a tree", "collect nuts"),
    "piglet": ("on a big farm", "roll in the mud"),
    "lamb": ("in a green field on a farm", "run and jump in the sun"),
    "turtle": ("near a sandy beach", "swim slowly in the sea"),
    "elephant": ("in a warm, sunny land", "spray water with its trunk"),
    "monkey": ("in a tall tree in the jungle", "swing from branch to branch"),
    "hedgehog": ("under a pile of leaves in a garden", "look for bugs"),
    "bird": ("in a small nest in a cherry tree", "sing pretty songs"),
    "kangaroo": ("in a wide, dry land", "bounce as high as it could"),
}
_CHILD_HOMES = ("in a little house by the woods", "near a big park", "in a cozy house with a red door",
                "in a tiny village by the sea", "in a busy town", "on a farm with many animals",
                "in a small house on a hill", "in a yellow house on a quiet street")
_TRAITS = {
    "kind": "always tried to help others",
    "curious": "liked to ask questions about everything",
    "shy": "did not talk very much",
    "brave": "liked to try new things",
    "playful": "loved to run and laugh all day",
    "clever": "liked to solve puzzles",
    "cheerful": "always had a big smile",
    "gentle": "was always careful with small things",
    "busy": "never liked to sit still",
    "silly": "liked to make funny faces",
}
_GROWNUPS = (("Mom", "she"), ("Dad", "he"), ("Grandma", "she"), ("Grandpa", "he"), ("Mama", "she"),
             ("Papa", "he"))

# place -> where ("in the park"), sights, spots (where something can hide), activities (past tense)
_PLACES = {
    "the park": ("in the park",
                 ("tall green trees", "a big red slide", "swings that went up high", "a pond with ducks"),
                 ("under the slide", "behind a big tree", "next to the swings", "in the tall grass",
                  "near the pond", "under a bench"),
                 ("ran on the soft grass", "went down the slide", "played on the swings", "fed the ducks")),
    "the beach": ("at the beach",
                  ("soft yellow sand", "big blue waves", "pretty shells", "white birds in the sky"),
                  ("under a pile of sand", "behind a big rock", "next to the beach towel", "near the water",
                   "near the sand castles", "under a beach chair"),
                  ("built a big sand castle", "splashed in the waves", "looked for shells", "dug a deep hole")),
    "the forest": ("in the forest",
                   ("tall old trees", "tiny mushrooms", "a little stream", "birds singing in the branches"),
                   ("under a pile of leaves", "behind an old log", "next to a mossy rock", "inside a hollow tree",
                    "near the stream", "under a bush"),
                   ("jumped over logs", "picked berries", "listened to the birds", "followed a little path")),
    "the garden": ("in the garden",
                   ("bright flowers", "a small pond", "green peas and carrots", "busy bees"),
                   ("under a big leaf", "behind the flower pots", "next to the watering can",
                    "in the carrot patch", "under the bench", "near the gate"),
                   ("watered the flowers", "chased butterflies", "dug in the dirt", "picked red tomatoes")),
    "the farm": ("on the farm",
                 ("brown cows", "a big red barn", "chickens", "a tall haystack"),
                 ("in the hay", "behind the barn", "next to the chicken coop", "under the old tractor",
                  "near the fence", "by the water trough"),
                 ("fed the chickens", "rode on the tractor", "jumped in the hay", "gave the horse an apple")),
    "the playground": ("at the playground",
                       ("a tall climbing frame", "a sandbox", "a merry-go-round", "a long yellow slide"),
                       ("in the sandbox", "under the climbing frame", "behind the slide", "next to the fence",
                        "under the seesaw", "near the gate"),
                       ("climbed to the top", "played in the sandbox", "went round on the merry-go-round",
                        "played tag")),
    "the meadow": ("in the meadow",
                   ("wild flowers", "butterflies", "a big old oak tree", "soft green grass"),
                   ("in the tall grass", "behind the oak tree", "next to a big stone", "among the flowers",
                    "near a rabbit hole", "under a bush"),
                   ("rolled down the hill", "picked flowers", "chased butterflies", "looked at the clouds")),
    "the lake": ("by the lake",
                 ("clear blue water", "little fish", "a wooden dock", "green reeds"),
                 ("under the dock", "in the reeds", "next to the boat", "behind a rock", "near the water",
                  "under a willow tree"),
                 ("threw stones into the water", "watched the fish", "walked along the shore",
                  "put their feet in the water")),
    "the backyard": ("in the backyard",
                     ("a swing on a tree", "a little vegetable patch", "a fence", "a bird bath"),
                     ("under the porch", "behind the shed", "next to the bird bath", "in the bushes",
                      "near the fence", "under the swing"),
                     ("played catch", "ran through the sprinkler", "had a picnic on the grass", "made mud pies")),
    "the zoo": ("at the zoo",
                ("big gray elephants", "tall giraffes", "noisy monkeys", "a sleepy lion"),
                ("under a bench", "next to the map", "behind the ice cream cart", "near the monkey house",
                 "by the water fountain", "under a bush"),
                ("watched the monkeys swing", "fed the goats", "looked at the giraffes",
                 "laughed at the penguins")),
    "the library": ("at the library",
                    ("rows and rows of books", "soft chairs", "a reading corner", "big windows"),
                    ("under a table", "behind a bookshelf", "next to the big chair", "next to the book cart",
                     "near the door", "by the big window"),
                    ("read a book about dragons", "looked at picture books", "listened to a story",
                     "found a book about stars")),
    "the hill": ("on the hill",
                 ("a big sky", "white clouds", "a lone tree on top", "the whole town far below"),
                 ("behind the lone tree", "in the long grass", "next to a big rock", "under a bush",
                  "near the top", "by the little path"),
                 ("ran up to the top", "rolled down the hill", "flew paper planes", "looked at the town")),
    "the school": ("at school",
                   ("a big classroom", "colorful pictures on the walls", "a fish tank", "a playground outside"),
                   ("under a desk", "behind the reading chair", "next to the toy box", "next to the fish tank",
                    "near the door", "by the window"),
                   ("painted pictures", "sang songs", "counted to one hundred", "played with clay")),
    "the market": ("at the market",
                   ("stalls full of fruit", "a man selling flowers", "big baskets", "bright red apples"),
                   ("under a fruit stall", "behind a big basket", "next to the flower stall",
                    "near the bread shop", "under a cart", "by the fountain"),
                   ("bought some apples", "smelled the fresh bread", "looked at the flowers",
                    "tasted a sweet peach")),
}

# object -> adjectives, play (infinitive), played (past), what goes wrong, how it is mended (None: unbreakable)
_OBJECTS = {
    "ball": (("red", "blue", "bouncy", "big yellow", "shiny green", "striped"),
             "kick the ball", "kicked the ball high into the air",
             "the ball rolled into a thorny bush and got a hole",
             "put a patch on the hole and pumped the ball full of air again"),
    "kite": (("red", "rainbow", "big blue", "paper", "bright orange"),
             "fly the kite", "flew the kite high in the sky",
             "the kite got stuck in a tree and its paper tore",
             "got the kite down and taped the tear with strong tape"),
    "teddy bear": (("soft brown", "old", "fluffy", "little", "cuddly"),
                   "have a tea party with the teddy bear", "hugged the teddy bear tight",
                   "one of the teddy bear's arms came loose",
                   "sewed the arm back on with a needle and thread"),
    "doll": (("pretty", "little", "rag", "smiling"),
             "dress up the doll", "dressed the doll in a tiny hat",
             "the doll's dress ripped down the side",
             "sewed the dress with a needle and pink thread"),
    "toy car": (("red", "fast", "little blue", "shiny", "green"),
                "race the toy car", "raced the toy car down a ramp",
                "a wheel came off the toy car",
                "put the wheel back on with a tiny screw"),
    "toy boat": (("little wooden", "red", "white", "tiny"),
                 "sail the boat", "sailed the boat in a big puddle",
                 "the mast of the boat snapped",
                 "glued the mast back on and let it dry in the sun"),
    "picture book": (("big", "old", "colorful", "new"),
                     "read the book", "read the picture book",
                     "a page of the book tore in half",
                     "taped the page with clear tape so the words lined up"),
    "drum": (("small", "red", "loud", "shiny"),
             "play the drum", "played the drum, boom, boom, boom",
             "the top of the drum split",
             "stretched a new top over the drum and tied it tight"),
    "toy train": (("wooden", "long", "green", "little"),
                  "play with the toy train", "pushed the toy train around the track",
                  "the last car came off the toy train",
                  "bent the little hook back so the cars held together"),
    "robot": (("shiny", "silver", "little", "funny"),
              "make the robot walk", "made the robot walk and beep",
              "the robot's arm fell off",
              "snapped the arm back into place and tightened the screw"),
    "balloon": (("red", "big", "shiny", "purple"),
                "bounce the balloon", "bounced the balloon up in the air", None, None),
    "hat": (("funny", "big", "straw", "blue"),
            "try on the hat", "took turns wearing the hat", None, None),
    "jump rope": (("long", "pink", "green"),
                  "jump with the rope", "jumped rope and counted the jumps",
                  "the jump rope snapped in the middle",
                  "tied the two ends together with a strong knot"),
    "bucket": (("little", "blue", "yellow"),
               "fill the bucket with sand", "filled the bucket with sand and water",
               "the handle of the bucket broke off",
               "tied a new string handle onto the bucket"),
    "paper plane": (("little", "white", "folded"),
                    "throw the paper plane", "threw the paper plane and watched it glide",
                    "a wing of the paper plane got bent",
                    "folded the wing straight and taped it"),
    "scarf": (("warm", "striped", "woolly", "soft"),
              "wear the scarf", "wrapped the scarf around their necks",
              "the scarf got a big hole in it",
              "knitted the hole closed with new yarn"),
    "shell": (("pretty", "pink", "spotted", "shiny"),
              "listen to the sea in the shell", "held the shell up to their ears to hear the sea", None, None),
    "crown": (("golden", "paper", "sparkly"),
              "play king and queen with the crown", "played king and queen with the crown",
              "the paper crown got crumpled",
              "smoothed the crown flat and glued on new sparkles"),
}
_TREATS = ("a big red apple", "three cookies", "a cupcake with pink icing", "a bag of grapes", "a juicy orange",
           "a piece of chocolate cake", "some sweet strawberries", "a warm muffin", "a banana", "a box of raisins",
           "a slice of watermelon", "a honey sandwich")
_WEATHER = ("It was a sunny day.", "The sun was shining and the birds were singing.",
            "It was a warm spring morning.", "It was a cool, windy day.", "The sky was blue and clear.",
            "It was a bright summer afternoon.", "Big white clouds floated in the sky.",
            "The leaves were red and orange, and the air was crisp.")
# words that get a fresh random pick every time a template uses them
_SYNONYMS = {
    "happy": ("happy", "glad", "very happy", "so happy"),
    "sad": ("sad", "upset", "very sad", "sad and worried"),
    "scared": ("scared", "afraid", "a little scared", "very scared"),
    "proud": ("proud", "very proud", "so proud of {himself}"),
    "lonely": ("lonely", "a bit lonely", "sad and alone"),
    "big": ("big", "huge", "great big"),
    "cried": ("cried", "said sadly", "sobbed"),
    "shouted": ("shouted", "called", "yelled happily"),
    "smiled": ("smiled", "grinned", "smiled a big smile"),
    "time": ("morning", "afternoon", "day", "sunny day"),
    "Soon": ("Soon", "After a while", "Before long", "In no time"),
    "Then": ("Then", "Just then", "All of a sudden", "Suddenly"),
    "hug": ("a big hug", "a tight hug", "a warm hug"),
    "fun": ("so much fun", "a lot of fun", "the best time"),
}
_ENDINGS = ("From that day on, {name} and {friend} were best friends.", "And they all lived happily ever after.",
            "It was the best day ever.", "{name} went to bed that night with a big smile.",
            "{name} would never forget that day.", "The end.")

_CHILD_LIKES = ("play outside", "draw pictures", "sing songs", "read books", "build towers with blocks",
                "help in the kitchen", "look at the clouds", "dance in the living room", "play games")
_TREAT_WORDS = {  # treat -> (the short name, pronoun)
    "a big red apple": ("the apple", "it"), "three cookies": ("the cookies", "them"),
    "a cupcake with pink icing": ("the cupcake", "it"), "a bag of grapes": ("the grapes", "them"),
    "a juicy orange": ("the orange", "it"), "a piece of chocolate cake": ("the cake", "it"),
    "some sweet strawberries": ("the strawberries", "them"), "a warm muffin": ("the muffin", "it"),
    "a banana": ("the banana", "it"), "a box of raisins": ("the raisins", "them"),
    "a slice of watermelon": ("the watermelon", "it"), "a honey sandwich": ("the sandwich", "it"),
}


class _Values(dict):
    """Template values. A key listed in `_SYNONYMS` is drawn afresh each time a template uses it."""

    def __init__(self, rng: random.Random) -> None:
        super().__init__()
        self.rng = rng

    def __missing__(self, key: str) -> str:
        if key not in _SYNONYMS:
            raise KeyError(key)
        return self.rng.choice(_SYNONYMS[key]).format_map(self)


def _capitalise(sentence: str) -> str:
    for i, ch in enumerate(sentence):
        if ch.isalpha():
            return sentence[:i] + ch.upper() + sentence[i + 1:]
    return sentence


class _Teller:
    """Collects sentences into paragraphs; each `say` picks one of its variants."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.v = _Values(rng)
        self.paragraphs: list[str] = []
        self.current: list[str] = []

    def say(self, *variants: str) -> None:
        self.current.append(_capitalise(self.rng.choice(variants).format_map(self.v)))

    def maybe(self, p: float, *variants: str) -> None:
        if self.rng.random() < p:
            self.say(*variants)

    def paragraph(self) -> None:
        if self.current:
            self.paragraphs.append(" ".join(self.current))
            self.current = []

    def text(self) -> str:
        self.paragraph()
        # one newline between paragraphs: a blank line is the story separator of plain-text corpora
        return "\n".join(self.paragraphs)


def _a(phrase: str) -> str:
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


def _pronouns(female: bool, prefix: str = "") -> dict[str, str]:
    words = ({"he": "she", "him": "her", "his": "her", "himself": "herself"} if female else
             {"he": "he", "him": "him", "his": "his", "himself": "himself"})
    out = {prefix + k: v for k, v in words.items()}
    out.update({prefix + k.capitalize(): v.capitalize() for k, v in words.items()})
    return out


def _character(rng: random.Random, avoid: str = "") -> dict[str, str]:
    """A child (names by gender) or a young animal (pet names); never named `avoid`."""
    female = rng.random() < 0.5
    if rng.random() < 0.62:
        kind = "girl" if female else "boy"
        names = _GIRLS if female else _BOYS
        home, likes = rng.choice(_CHILD_HOMES), rng.choice(_CHILD_LIKES)
    else:
        kind = rng.choice(tuple(_ANIMALS))
        names = _PET_NAMES
        home, likes = _ANIMALS[kind]
    name = rng.choice(names)
    while name == avoid:
        name = rng.choice(names)
    size = rng.choice(("little ", "little ", "young ", "small ", ""))
    return {"name": name, "kind": kind, "desc": _a(size + kind), "home": home, "likes": likes,
            **_pronouns(female)}


def _cast(t: _Teller, breakable: bool = False) -> None:
    """Fills the teller's values with a hero, a friend, a grown-up, a place and an object."""
    rng, v = t.rng, t.v
    hero = _character(rng)
    v.update(hero)
    friend = _character(rng, avoid=hero["name"])
    v.update({"friend": friend["name"], "fkind": friend["kind"], "fdesc": friend["desc"],
              **_pronouns(friend["he"] == "she", "f")})
    adult, adult_he = rng.choice(_GROWNUPS)
    v.update({"adult": adult, "adult_lc": adult.lower(), **_pronouns(adult_he == "she", "a")})
    place = rng.choice(tuple(_PLACES))
    where, sights, spots, activities = _PLACES[place]
    s = rng.sample(sights, 2)
    p = rng.sample(spots, 3)
    a = rng.sample(activities, 2)
    v.update({"place": place, "at_place": where, "sight1": s[0], "sight2": s[1],
              "spot1": p[0], "spot2": p[1], "spot3": p[2],
              "activity": a[0], "activity2": a[1], "weather": rng.choice(_WEATHER)})
    names = [k for k, o in _OBJECTS.items() if o[3] is not None] if breakable else list(_OBJECTS)
    obj = rng.choice(names)
    adjs, play, played, broke, fix = _OBJECTS[obj]
    v.update({"obj": obj, "oadj": rng.choice(adjs), "play": play, "played": played,
              "broke": broke or "", "Broke": _capitalise(broke or ""), "fix": fix or ""})
    trait = rng.choice(tuple(_TRAITS))
    v.update({"trait": trait, "trait_desc": _TRAITS[trait]})


def _opening(t: _Teller) -> None:
    if t.rng.random() < 0.2:
        t.say("{name} was {desc} who lived {home}.", "In a land not far away, {desc} named {name} lived {home}.")
    else:
        t.say("Once upon a time, there was {desc} named {name}.",
              "Once upon a time, there lived {desc} named {name}.",
              "There was once {desc} called {name}.",
              "Once there was {desc} named {name}.")
        t.maybe(0.5, "{He} lived {home}.", "{name} lived {home} with {his} {adult_lc}.")
    t.maybe(0.6, "{name} was very {trait} and {trait_desc}.", "{He} was a {trait} {kind} who {trait_desc}.")
    t.maybe(0.6, "{His} favorite toy was {his} {oadj} {obj}.", "{He} loved {his} {oadj} {obj} very much.",
            "Every day, {he} liked to {likes}.", "More than anything, {name} loved to {likes}.")
    t.paragraph()


def _closing(t: _Teller, *morals: str) -> None:
    t.say(*morals)
    t.maybe(0.3, "It was the best day ever.", "And they all lived happily ever after.",
            "{name} went to bed that night with a big smile.", "{name} would never forget that day.")


def _lost_and_found(t: _Teller) -> None:
    t.say("One {time}, {name} went to {place} with {his} {oadj} {obj}.",
          "One {time}, {name} and {his} {adult_lc} took {his} {obj} to {place}.",
          "{weather} {name} took {his} {oadj} {obj} and went to {place}.")
    t.maybe(0.6, "There were {sight1} and {sight2}.", "{He} saw {sight1} and {sight2}.")
    t.say("{He} {activity} and had {fun}.", "{He} {activity} for a long time.",
          "First, {he} {activity}. Then {he} {activity2}.")
    t.say("But when it was time to go home, {his} {obj} was gone!",
          "When {he} looked down, {his} {obj} was not there anymore.",
          "{Then}, {name} saw that {his} {obj} was missing.")
    t.say('"Oh no! Where is my {obj}?" {he} {cried}.', '"My {obj}! I lost my {obj}!" {he} {cried}.')
    t.maybe(0.5, "{name} felt {sad}. Tears came to {his} eyes.", "{His} lip began to shake.")
    t.paragraph()
    t.say("{Then}, {his} friend {friend} came by.", "{Then}, {friend} the {fkind} walked over.",
          "{friend}, {fdesc} who lived nearby, heard {him}.")
    t.say('"What is wrong?" asked {friend}.', '"Why are you sad?" asked {friend}.')
    t.say('"I lost my {obj}," said {name}.', '"I can\'t find my {oadj} {obj}," said {name}.')
    t.say('"Don\'t worry. I will help you look," said {friend}.', '"Let\'s look for it together," said {friend}.')
    t.say("They looked {spot1}, but it was not there.", "First they looked {spot1}. Nothing.")
    t.say("They looked {spot2}, but it was not there either.", "Next they looked {spot2}. Still nothing.")
    t.maybe(0.5, '"Maybe it is gone forever," said {name}.', "{name} almost gave up.")
    t.say("{Then}, {friend} saw something {spot3}. It was the {obj}!",
          "Then {name} looked {spot3}, and there it was!",
          '"Look!" said {friend}, pointing {spot3}. There was the {oadj} {obj}!')
    t.paragraph()
    t.say("{name} was {happy}. {He} gave {friend} {hug}.",
          "{name} jumped up and down. {He} hugged {his} {obj} and then hugged {friend}.")
    t.say('"Thank you, {friend}! You are a good friend," said {name}.', '"Thank you for helping me," said {name}.')
    t.maybe(0.6, "Then they {played} together until the sun went down.")
    _closing(t, "From then on, {name} always kept {his} {obj} close.",
             "{name} learned that it is good to have a friend when things go wrong.",
             "After that day, {name} was always careful with {his} {obj}.")


def _sharing(t: _Teller) -> None:
    if t.rng.random() < 0.5:
        treat = t.rng.choice(tuple(_TREAT_WORDS))
        the_treat, it = _TREAT_WORDS[treat]
        t.v.update({"treat": treat, "the_treat": the_treat, "it": it})
        t.say("One {time}, {adult} gave {name} {treat}.", "{name} found {treat} in {his} lunch box.",
              "{at_place}, {name} had {treat} for a snack.")
        t.say("{He} wanted to eat {it} all by {himself}.", "{He} did not want to share {it} with anyone.")
        t.say("{Then}, {friend} came over and looked at {the_treat}.")
        t.say('"That looks yummy. Can I have some?" asked {friend}.', '"May I have a little?" asked {friend}.')
        t.say('"No! It is mine," said {name}.', '"No, I want {it} all," said {name}.')
        t.say("{friend} looked down and walked away slowly.", "{friend}'s face fell, and {fhe} sat down alone.")
        t.paragraph()
        t.say("{name} took a bite, but it did not taste as good as before.",
              "{name} ate a little, but {he} did not feel {happy}.")
        t.say("{He} looked at {friend}, who was sitting all alone.")
        t.maybe(0.6, '{adult} saw this and said softly, "Things are better when we share."',
                '{name} remembered what {adult} always said: "Sharing is caring."')
        t.say("{name} walked over to {friend}.")
        t.say('"I am sorry. Do you want half?" asked {name}.', '"Here, let\'s share," said {name}.')
        t.paragraph()
        t.say("{friend} {smiled}. They sat down together and shared {the_treat}.")
        t.say("It tasted much better that way.", "It was the best snack ever.")
    else:
        t.say("One {time}, {name} was playing with {his} {oadj} {obj} {at_place}.",
              "{weather} {name} took {his} new {obj} to {place}.")
        t.say('{friend} came running. "Can I play too?" {fhe} asked.',
              '{friend} saw the {obj} and asked, "Can I have a turn?"')
        t.say('{name} held the {obj} tight. "No, it is mine!" {he} said.',
              '"No, I want to {play} by myself," said {name}.')
        t.say("{friend} reached for the {obj}, and they both pulled and pulled.",
              "{friend} tried to take the {obj}, and soon they were both shouting.")
        t.paragraph()
        t.say('{adult} came over. "What is going on?" {ahe} asked.',
              '{Then}, {adult} heard the noise and came to see.')
        t.say('"{friend} wants my {obj}," said {name}.',
              '"It is mine!" said {name}. "And I want a turn!" said {friend}.')
        t.say('{adult} said, "Why don\'t you take turns? Then you can both have fun."',
              '"When we share, everyone can play," said {adult} kindly.')
        t.say("{name} thought about it. Then {he} let {friend} {play} first.",
              "{name} gave the {obj} to {friend}. {He} counted to twenty, and then it was {his} turn.")
        t.paragraph()
        t.say("They {played} together and laughed and laughed.", "{Soon}, they {played} and had {fun}.")
        t.say("Playing together was much more fun than playing alone.")
    _closing(t, "{name} learned that sharing makes everyone {happy}.", "Sharing made {name} feel warm inside.",
             "From that day on, {name} and {friend} always shared.")
# fear -> (how it shows up, what the grown-up or friend says, the brave try, what it really was)
_FEARS = (
    ("At night, when {adult} turned off the light, {name} felt {scared}. The room was so dark! "
     '"I don\'t like the dark," {he} whispered.',
     '{adult} sat on the bed. "The dark is just the night resting," {ahe} said. '
     '"Everything in your room is still the same."',
     "{name} took a deep breath and opened {his} eyes wide.",
     "{He} saw {his} {obj} on the shelf and the moon shining through the window. The room was not scary at all."),
    ("One day {at_place}, a big brown dog ran up to {name}. It barked loudly! {name} was {scared} and hid "
     "behind {adult}.",
     '"This dog is friendly," said {adult}. "Hold out your hand slowly, and let him sniff it."',
     "{name} held out {his} hand. It was shaking a little. The dog sniffed it.",
     "Then the dog licked {his} hand and wagged its tail. {name} laughed. The dog just wanted to play!"),
    ("{name} went to the lake with {adult}. The water looked deep and cold, and {name} did not want to go in.",
     '"I will hold your hands," said {adult}. "Just kick your feet like a little frog."',
     "{name} stepped into the water. {He} held on tight and kicked {his} feet.",
     "Splash, splash! The water was cool and fun. Soon {name} was paddling all by {himself}."),
    ("One night there was a big storm. Boom! The thunder was so loud that {name} hid under {his} blanket.",
     '{adult} came in and said, "Thunder is just a big noise from the clouds. It cannot hurt you in here."',
     '"Let\'s count after each flash," said {adult}. They counted together: one, two, three, four.',
     "Each time, the thunder was farther away. Soon the storm was gone, and {name} was not scared anymore."),
    ("At the playground, there was a very tall slide. {name} climbed up, but when {he} looked down, "
     "{his} legs shook.",
     '{friend} called from the bottom, "You can do it! I will be right here."',
     "{name} sat down, closed {his} eyes, and let go.",
     '"Wheee!" {He} went down so fast. It was the most fun thing ever! {He} ran back to the ladder to go again.'),
    ("One morning, {name} saw a spider on the wall. It had eight long legs. {name} screamed and ran to {adult}.",
     '"That spider is more scared of you than you are of it," said {adult}. "Let\'s watch it together."',
     "{name} stood next to {adult} and looked at the spider very carefully.",
     "The spider was busy making a web. It was shiny and round, like a tiny wheel. {name} thought it was "
     "beautiful."),
    ("It was {name}'s first day at a new school. {He} did not know anyone, and {his} tummy felt funny.",
     '{adult} knelt down and said, "Just say hello and smile. That is how friends begin."',
     '{name} walked up to {fdesc} named {friend} and said, "Hello. Do you want to play?"',
     "{friend} smiled back. They played with clay all morning, and at lunch they sat together."),
    ("One night, {name} heard a noise at the window. Scratch, scratch, scratch! {He} pulled the blanket up "
     "to {his} nose.",
     '{adult} came in with a little lamp. "Let\'s go and see what it is," {ahe} said.',
     "{name} held {adult}'s hand, and together they looked out of the window.",
     "It was only a branch of the old tree, tapping on the glass in the wind. {name} giggled."),
    ("{name} wanted to ride the big horse at the farm, but the horse was so tall! {name} stepped back.",
     '"His name is Apple. He is very gentle," said the farmer. "I will hold him for you."',
     "{adult} lifted {name} up, and {he} sat on the horse's soft back.",
     "The horse walked slowly around the field. Clip, clop, clip, clop. {name} felt like a king on a throne."),
)


def _fear_overcome(t: _Teller) -> None:
    shows, comfort, attempt, truth = t.rng.choice(_FEARS)
    t.say(shows)
    t.maybe(0.5, "{His} heart beat fast.", "{He} wanted to run away.", '"I can\'t do it," {he} said.')
    t.paragraph()
    t.say(comfort)
    t.maybe(0.5, '"Will you stay with me?" asked {name}. "Of course," came the answer.',
            "{name} thought about it for a long time.")
    t.say(attempt)
    t.say(truth)
    t.paragraph()
    t.say("{name} felt {proud}.", "{name} was not {scared} anymore. {He} felt {proud}.")
    t.say('"I was brave!" {he} said.', '"That was not so scary after all," said {name} with a smile.')
    _closing(t, "{name} learned that being brave means trying, even when you feel {scared}.",
             "Sometimes the things that scare us are not so bad when we look at them closely.",
             "From that day on, {name} was a little braver every day.")


def _making_a_friend(t: _Teller) -> None:
    t.say("{name} had just moved to a new town. {He} did not have any friends yet and felt {lonely}.",
          "One {time}, {name} went to {place}, but there was no one to play with. {He} felt {lonely}.",
          "{weather} {name} sat {at_place}, all by {himself}.")
    t.say("{Then}, {he} saw {fdesc} sitting all alone.", "{He} noticed {fdesc} standing {spot2}.")
    t.say("The {fkind} looked {sad}, too.", "The {fkind} was looking at the ground.")
    t.paragraph()
    t.say("{name} walked over slowly.", "{name} was a little shy, but {he} walked over.")
    t.say('"Hi! I am {name}. What is your name?" {he} asked.', '"Hello," said {name}. "Are you all alone?"')
    t.say('"I am {friend}," said the {fkind} quietly.', '"My name is {friend}," said the {fkind}.')
    t.maybe(0.6, '"I like your {oadj} {obj}," said {friend}.',
            '"I am new here," said {friend}. "Me too!" said {name}.')
    t.say('"Do you want to {play} with me?" asked {name}.', '"Let\'s {play} together!" said {name}.')
    t.say("{friend}'s face lit up. \"Yes!\"", "{friend} {smiled} and nodded.")
    t.paragraph()
    t.say("They {played}. Then they {activity}.", "First they {activity}. Then they {played}.")
    t.say("They laughed so much that their tummies hurt.", "They had {fun}.")
    t.maybe(0.5, "{friend} told {name} a funny joke, and {name} told {friend} a secret.",
            "They found out that they both liked to {likes}.")
    t.say('When the sun began to set, {friend} asked, "Can we play again tomorrow?"',
          'When it was time to go, {name} said, "See you tomorrow, {friend}!"')
    t.paragraph()
    _closing(t, "From that day on, {name} and {friend} were best friends.",
             "{name} learned that a new friend can be just one hello away.",
             "{name} was never {lonely} again, because now {he} had a friend.")


def _accident_repair(t: _Teller) -> None:
    t.say("One {time}, {name} and {friend} were playing with {name}'s {oadj} {obj} {at_place}.",
          "{weather} {name} and {his} friend {friend} took the {obj} to {place}.")
    t.say("They {played}.", "They took turns. First {name}, then {friend}.")
    t.say("{Then}, {friend} pulled too hard, and {broke}!", "But {friend} was not careful, and {broke}.",
          "Oh no! {Broke}!")
    t.paragraph()
    t.say('"You broke it!" {name} shouted. {He} was very angry.',
          "{name} looked at the {obj}. {He} felt {sad}.")
    t.say("{friend} began to cry. \"I am so sorry,\" {fhe} said. \"It was an accident.\"",
          '"I did not mean to," said {friend} in a small voice.')
    t.say("{name} saw how sad {friend} was, and {he} knew it was an accident.",
          "{name} took a deep breath. {He} did not want to be mad at {his} friend.")
    t.say('"It\'s okay," said {name}. "Let\'s ask {adult} to help."')
    t.paragraph()
    t.say('They ran to {adult}. "Can you fix it?" asked {name}.', "They took the {obj} home to {adult}.")
    t.say('{adult} looked at it and said, "Let\'s fix it together."', '"I think we can fix it," said {adult}.')
    t.say("Together they {fix}.", "{adult} showed them how, and they {fix}.")
    t.say("{Soon}, the {obj} was as good as new.", "It had a little mark now, but {name} loved it even more.")
    t.maybe(0.6, "Then {name} and {friend} went back outside and {played} again.")
    _closing(t, "{name} learned that accidents happen, and it is better to fix things together than to be angry.",
             "{name} and {friend} learned that friends forgive each other.",
             "Fixing the {obj} together made them even better friends.")


_HOUSE_THINGS = ("favorite blue vase", "lamp with the yellow shade", "special cup with little flowers",
                 "big flower pot", "old clock", "pretty glass bowl")


def _honesty(t: _Teller) -> None:
    t.v["thing"] = t.rng.choice(_HOUSE_THINGS)
    t.say("One rainy day, {name} was playing with {his} {obj} in the living room.",
          "{name} was playing with {his} {oadj} {obj} in the house, even though {adult} said to play outside.")
    t.say("{He} threw it up high, again and again.", "{He} ran around and around the table with it.")
    t.say("{Then}, it bumped into {adult}'s {thing}. Crash! It fell and broke into pieces.",
          "The {obj} hit {adult}'s {thing}. It wobbled, and then it fell to the floor and broke.")
    t.paragraph()
    t.say("{name} was {scared}.", "{name}'s heart beat fast.")
    t.say("{He} thought about hiding the pieces under the rug.", "Maybe {adult} would not find out, {he} thought.")
    t.say("But {he} knew that hiding it would be wrong.", "But it did not feel right to keep a secret.")
    t.say("{name} walked slowly to the kitchen, where {adult} was cooking.", "{He} went to find {adult}.")
    t.say('"{adult}, I broke your {thing}. I am sorry," {he} said quietly.',
          '"I have to tell you something," said {name}. "I broke your {thing}."')
    t.paragraph()
    t.say("{adult} looked at the pieces. Then {ahe} knelt down and gave {name} {hug}.")
    t.say('"Thank you for telling me the truth," said {adult}. '
          '"I am sad about my {thing}, but I am proud of you."',
          '"Things can be fixed," said {adult}. "I am happy that you were honest with me."')
    t.say("Together they glued the pieces back together.", "They cleaned up the pieces together.")
    t.maybe(0.6, "After that, {name} always played with {his} {obj} outside.")
    _closing(t, "{name} learned that telling the truth is always best, even when it is hard.",
             "Being honest made {name} feel light and happy inside.")


# someone in trouble -> (what the hero finds, how the hero helps, how it ends)
_TROUBLES = (
    ("{Then}, {he} saw a little bird {spot1}. Its wing was hurt, and it could not fly.",
     "{name} gently picked it up and put it in a box with soft grass. {He} gave it water and seeds. "
     "Every day, {he} took care of the bird.",
     "After a week, the bird's wing was better. It flapped its wings and flew up into the sky. "
     "It sang a happy song, as if to say thank you."),
    ("{Then}, {he} heard a small meow. A kitten was stuck high up in a tree.",
     "{name} could not reach it, so {he} ran to get {adult}. {adult} brought a tall ladder and climbed up.",
     "{adult} carried the kitten down. The kitten purred and rubbed against {name}'s legs."),
    ("{Then}, an old man dropped his bag, and red apples rolled everywhere.",
     "{name} ran to help. {He} picked up the apples one by one and put them back in the bag.",
     '"Thank you, little one," said the old man. He smiled and gave {name} the shiniest apple.'),
    ("{Then}, {he} saw a little duckling all alone {spot1}. It was peeping loudly. It had lost its mother.",
     "{name} looked around. Far away, {he} saw a mother duck. {He} walked slowly toward her, and the duckling "
     "followed {him}, step by step.",
     "The mother duck quacked, and the duckling ran to her. {name} smiled as they swam away together."),
    ("{Then}, {friend} tripped over a stone and fell. {fHis} knee was scraped, and {fhe} began to cry.",
     "{name} helped {fhim} up and walked {fhim} to {adult}, who washed the knee and put a bandage on it.",
     '{friend} stopped crying. "Thank you for helping me," {fhe} said, and gave {name} {hug}.'),
    ("{Then}, {he} saw a beetle lying on its back {spot1}. It waved its tiny legs but could not turn over.",
     "{name} found a leaf and gently slid it under the beetle. Then {he} helped it turn over.",
     "The beetle crawled away into the grass. {name} liked to think it was going home to its family."),
    ("{Then}, {he} saw a puppy with a blue collar {spot1}. It looked lost and was shaking.",
     "{name} read the name on the collar: Rex. There was a street name, too. {name} and {adult} took the puppy "
     "there.",
     'A girl opened the door and cried, "Rex! You came back!" She hugged the puppy and thanked {name} '
     "again and again."),
)


def _helping(t: _Teller) -> None:
    find, help_, end = t.rng.choice(_TROUBLES)
    t.say("One {time}, {name} was walking to {place} with {adult}.", "{weather} {name} went to play {at_place}.",
          "One {time}, {name} was playing {at_place}.")
    t.maybe(0.5, "{He} saw {sight1} and {sight2}.", "{He} {activity}.")
    t.say(find)
    t.say('"Oh no!" said {name}. "I have to help."', '"Poor thing," said {name}.',
          "{name} knew {he} had to do something.")
    t.paragraph()
    t.say(help_)
    t.say(end)
    t.paragraph()
    t.say("{name} felt warm inside.", "{name} was {happy} that {he} could help.")
    _closing(t, "Helping others made {name} feel {happy}.", "Being kind is always the right thing to do.",
             "{name} learned that even a small {kind} can do a big kindness.")


# a present -> (making it, the little mishap on the way)
_PRESENTS = (
    ("{He} got out {his} crayons and drew a picture of the two of them {at_place}. "
     "{He} used every color {he} had.",
     "Oops! {He} spilled some water on the corner, but {he} let it dry, and it looked like a little cloud."),
    ("{He} went outside and picked red, yellow and blue flowers. {He} tied them together with a ribbon.",
     "On the way home, a bee buzzed around the flowers, but {name} stayed calm, and it flew away."),
    ("With help from {helper}, {he} mixed flour, sugar and eggs in a big bowl. They baked cookies shaped like "
     "stars.",
     "Some of the cookies were a little burnt, but most of them were golden and sweet."),
    ("{He} folded a big piece of paper in half and drew a heart on the front. Inside, {he} wrote: I love you.",
     "The glitter spilled all over the table! {name} laughed and cleaned it up."),
    ("{He} put colorful beads on a string, one by one, to make a necklace.",
     "The string slipped, and beads rolled everywhere, so {he} picked them all up and started again."),
    ("{He} found a smooth, flat stone and painted a smiling sun on it.",
     "The paint was still wet when {he} touched it, so {he} had to fix the sun's nose."),
)


def _gift(t: _Teller) -> None:
    make, mishap = t.rng.choice(_PRESENTS)
    if t.rng.random() < 0.5:
        t.v.update({"who": t.v["adult"], "helper": t.v["friend"], **_pronouns(t.v["ahe"] == "she", "r")})
    else:
        t.v.update({"who": t.v["friend"], "helper": t.v["adult"], **_pronouns(t.v["fhe"] == "she", "r")})
    t.say("Tomorrow was {who}'s birthday, and {name} wanted to give {rhim} a special present.",
          "{name} wanted to surprise {who}, because {rhe} was always so kind.")
    t.say("But {name} did not have any money to buy a present.", "{He} thought and thought about what to give.")
    t.say('"I know! I will make something," {he} said.', "Then {he} had an idea.")
    t.paragraph()
    t.say(make)
    t.say(mishap)
    t.maybe(0.5, "It took a long time, but {name} did not give up.", "{He} worked on it all afternoon.")
    t.say("When it was done, {he} hid the present behind {his} back.", "{He} wrapped it in paper and hid it.")
    t.paragraph()
    t.say('The next day, {name} gave the present to {who}. "Surprise!" {he} shouted.',
          '"Happy birthday, {who}!" said {name}, and held out the present.')
    t.say("{who}'s eyes filled with joy.", "{who} opened it slowly and gasped.")
    t.say('"This is the best present ever," said {who}. "You made it just for me?"',
          '"I love it," said {who}, and gave {name} {hug}.')
    _closing(t, "{name} learned that the best presents are made with love.",
             "Giving the present made {name} even happier than getting one.")


# a skill -> (what it is, how the first try goes wrong, the advice, the success)
_SKILLS = (
    ("ride {his} new bike", "{He} wobbled and fell down onto the grass.",
     '"Keep your eyes ahead and keep pedaling," said {adult}.',
     "{He} pedaled and pedaled, and the bike went straight! {He} rode all the way to the end of the street."),
    ("swim like a fish", "{He} sank and got water up {his} nose.",
     '"Lie on the water like a star, and kick your legs," said {adult}.',
     "{He} kicked and kicked, and {he} floated! Then {he} swam across the pool all by {himself}."),
    ("tie {his} shoes", "The laces got all tangled into a big knot.",
     '"Make two bunny ears, and cross them over," said {adult}.',
     "{He} made two loops, crossed them, and pulled. It was a perfect bow!"),
    ("whistle like {adult}", "{He} blew and blew, but only air came out.",
     '"Make your lips small and round, and blow softly," said {adult}.',
     "A tiny whistle came out! Then a louder one. Soon {he} could whistle a whole song."),
    ("climb the big tree in the backyard", "{His} foot slipped, and {he} slid back down.",
     '"Hold on to the strong branches, and take one step at a time," said {friend}.',
     "{He} climbed one branch, then another, then another. Soon {he} could see the whole street from the top."),
    ("write {his} name", "The letters came out big and wobbly, and one was backwards.",
     '"Go slowly, one letter at a time," said {adult}.',
     "{He} wrote each letter slowly. There it was: {name}, in neat letters!"),
    ("catch a ball", "The ball bounced off {his} hands and hit {him} on the nose.",
     '"Watch the ball all the way into your hands," said {friend}.',
     "{friend} threw the ball, and {name} watched it closely. Catch! {He} did it!"),
    ("jump rope", "The rope got caught on {his} feet every time.",
     '"Jump just when the rope comes near the ground," said {friend}.',
     "{He} jumped once, twice, ten times without stopping!"),
)


def _learning(t: _Teller) -> None:
    skill, fail, advice, success = t.rng.choice(_SKILLS)
    t.v["skill"] = skill.format_map(t.v)
    t.say("{name} really wanted to learn to {skill}.", "More than anything, {name} wanted to {skill}.")
    t.maybe(0.5, "All of {his} friends could do it, but {name} could not.",
            "{He} had tried before, but it was hard.")
    t.paragraph()
    t.say("The first time {he} tried, it did not go well.", "{He} tried and tried.")
    t.say(fail)
    t.maybe(0.5, "{He} tried again, but the same thing happened.", "{He} tried again, and it was still hard.")
    t.say('"I will never learn," {he} said, and {he} sat down, feeling {sad}.', "{name} wanted to give up.")
    t.paragraph()
    t.say(advice)
    t.say('"Everyone finds it hard at first. Try one more time."', '"You are getting better every time."')
    t.say("{name} stood up and tried again.", "{name} took a deep breath and tried once more.")
    t.say(success)
    t.paragraph()
    t.say('"I did it!" {he} {shouted}.', '"Look at me!" {he} {shouted}.')
    t.say("Everyone clapped, and {name} felt {proud}.", "{name} felt {proud}.")
    _closing(t, "{name} learned that if you keep trying, you can do hard things.",
             "{name} learned that practice makes things easier.")


_INDOOR_FUN = ("built a big blanket fort in the living room", "made a puppet show with old socks",
               "had their picnic on the kitchen floor", "painted pictures of the sun",
               "baked muffins and licked the spoon", "played hide and seek all over the house")


def _rainy_day(t: _Teller) -> None:
    t.v["indoor"] = t.rng.choice(_INDOOR_FUN)
    t.v["treat"] = t.rng.choice(tuple(_TREAT_WORDS))
    t.say("{name} and {friend} planned to have a picnic {at_place}.",
          "{name} was going to {place} with {friend} that day.")
    t.say("They packed sandwiches, juice, and {treat}.", "{He} was so excited that {he} woke up early.")
    t.say("But then dark clouds came, and it began to rain.", "But when {he} looked outside, it was raining hard.")
    t.say('"Now we can\'t go," said {name} sadly.', '"It is not fair!" said {name}, and {he} stamped {his} foot.')
    t.paragraph()
    t.say('{adult} said, "Rain can be fun, too. Let\'s have an adventure inside."',
          '{adult} smiled and said, "I have an idea."')
    t.say("So they {indoor}.", "They {indoor}.")
    t.say("They laughed and had {fun}.", "It was even more fun than they thought.")
    t.paragraph()
    t.say("{Soon}, the rain stopped. The sun came out, and a {big} rainbow stretched across the sky.")
    t.say("{name} and {friend} put on their boots and jumped in all the puddles. Splash!",
          "They went out and looked at the rainbow. It had every color {name} knew.")
    _closing(t, "{name} learned that even a rainy day can be a happy day.",
             "Sometimes the best days are the ones you do not plan.")


# something strange found -> (the find, what the hero does with it, what comes of it)
_MYSTERIES = (
    ("a small blue egg",
     "{name} took the egg home and kept it warm in a soft blanket. Every day {he} checked on it.",
     "One morning, crack! A tiny bird poked its head out. {name} fed it until it was big and strong, and then it "
     "flew away. But every spring, it came back to sing at {his} window."),
    ("a little gold key", "{name} wondered what it could open. {He} tried the door, the toy box, and the gate.",
     "At last, {he} tried an old box in the attic. Click! Inside were toys from when {adult} was little. "
     "{adult} laughed and told {him} stories about every one."),
    ("an old paper map with a red X on it", "{name} and {friend} followed the map past the tall tree and the "
     "big rock.",
     "Under the X, they dug a hole and found a tin box full of shiny buttons and marbles. They shared the "
     "treasure and kept the map for another day."),
    ("a big brown seed", "{name} planted the seed in a pot and watered it every day.",
     "First a tiny green shoot came up. Then it grew and grew. By summer, it was a sunflower taller than "
     "{name}, with a face as bright as the sun."),
    ("a tiny wooden box", "{name} opened the box very carefully.",
     "Inside was a little music box. When {he} turned the handle, it played a sweet song. {name} and {adult} "
     "danced around the kitchen."),
)


def _discovery(t: _Teller) -> None:
    thing, act, outcome = t.rng.choice(_MYSTERIES)
    t.v["thing"] = thing
    t.say("One {time}, {name} was exploring {place}.", "{weather} {name} went to {place} to look around.")
    t.maybe(0.5, "{He} saw {sight1} and {sight2}.", "{He} {activity}.")
    t.say("{Then}, {he} saw something {spot1}. It was {thing}!",
          "{spot1}, {he} found {thing}.")
    t.say('"What is this?" {he} wondered.', '"Wow!" said {name}. "Where did this come from?"')
    t.maybe(0.5, "{name} was very curious.", "{He} showed it to {adult}, who said, \"Let's find out.\"")
    t.paragraph()
    t.say(act)
    t.say(outcome)
    t.paragraph()
    _closing(t, "{name} learned that the world is full of surprises if you keep your eyes open.",
             "{name} was glad {he} had been so curious.",
             "It was the best thing {name} had ever found.")


_PLOTS = (_lost_and_found, _sharing, _fear_overcome, _making_a_friend, _accident_repair, _honesty, _helping,
          _gift, _learning, _rainy_day, _discovery)


def _story(seed: int, index: int) -> str:
    """Story `index` of the corpus for `seed`: depends on nothing else."""
    rng = random.Random(f"revbook-stories/{seed}/{index}")
    plot = rng.choice(_PLOTS)
    t = _Teller(rng)
    _cast(t, breakable=plot is _accident_repair)
    _opening(t)
    plot(t)
    return t.text()


def synthetic_stories(n_stories: int, seed: int = 0) -> Iterator[str]:
    """`n_stories` short children's stories, the same for the same seed (story i never depends on n_stories)."""
    for i in range(n_stories):
        yield _story(seed, i)
