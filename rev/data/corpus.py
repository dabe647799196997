"""Corpora and tokenizer: everything between raw text and the token files that `rev.data.tokens.load` reads.

`python -m rev prepare` turns a source into ``data/<name>/{tokenizer.json, train.bin, val.bin, meta.json}``:

* ``tinystories``: the real data set through `datasets` (needs the Hugging Face hub or its local cache);
* ``text:PATH``: local ``.txt`` files or folders (comma-separated), stories separated by ``<|endoftext|>`` or by
  blank lines;
* ``synthetic``: short children's stories written by the seeded story grammar of `rev.data.stories`, so that
  tests, CI and offline learners have a corpus with no download at all.

The tokenizer is a byte-level BPE trained on the training split only; ``<|endoftext|>`` comes before every story
in the ``.bin`` files (uint16 ids). A folder is built under a temporary name and renamed into place, so `load`
never sees half of one.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import operator
import os
import shutil
import sys
import time
from dataclasses import dataclass
from itertools import chain, islice
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from ..base.progress import tqdm

from .tokens import EOT, FORMAT, SPLITS, DataError, check_sequence_fits, sha256_file, load
from ..base.cli import check_seed, folder_arg, seed_arg
from ..base.files import read_json
from . import tinystories
from .stories import story_at

MIN_VOCAB = 257                  # the 256 byte symbols plus <|endoftext|>
MAX_VOCAB = 65535                # ids are stored as uint16
DEFAULT_VOCAB = 8192
DEFAULT_SYNTHETIC_TOKENS = 5_000_000
# the shortest sequence any profile trains (smoke's seq_len; tests/data/test_data.py holds it to the profiles): a
# corpus whose splits cannot give one such sequence is refused by `prepare` (a profile's own: its seq_len)
SHORTEST_SEQ_LEN = 64
_STORIES_PER_BATCH = 1024        # encoding works on this many stories at a time, so memory stays bounded


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
        try:
            seed = check_seed(seed)
        except TypeError as e:
            raise DataError(str(e)) from None
        return {**base, "seed": seed, "val_fraction": float(val_fraction)}
    if source == "tinystories":  # the data set's own validation split is used as it is
        return {**base, "dataset": tinystories.dataset_path()}  # a local copy is not the hub's: rebuilt
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
        sample = [len(story_at(seed, i)) for i in range(256)]
        per_story = sum(sample) / len(sample) / _chars_per_token(req["vocab_size"])
        n = min(n, max(2, math.ceil(req["tokens"] / per_story)))
    n = int(n)
    n_val = sum(1 for i in range(n) if _is_val(i, vf))

    def stream(val: bool) -> Iterator[str]:
        return (story_at(seed, i) for i in range(n) if _is_val(i, vf) == val)

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


def _texts(dataset: Any) -> Iterator[str]:
    for batch in dataset.iter(batch_size=_STORIES_PER_BATCH):
        for text in batch[tinystories.TEXT_COLUMN]:
            text = (text or "").strip()
            if text:
                yield text


def _tinystories_corpus(req: dict[str, Any]) -> _Corpus:
    ds = tinystories.load_splits()

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


def _bar(progress: bool, total: int | None, desc: str) -> Any:
    return tqdm(total=total, desc=desc, unit="story", disable=not progress, dynamic_ncols=True)


def _build(req: dict[str, Any], corpus: _Corpus, folder: Path, name: str, progress: bool,
           seq_len: int = SHORTEST_SEQ_LEN) -> dict[str, Any]:
    """Writes tokenizer.json, train.bin, val.bin and, last, meta.json into `folder`; refuses (before meta.json, so
    nothing is kept) splits too short for one sequence of `seq_len`."""
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
        check_sequence_fits(split, splits[split]["tokens"], seq_len, f"the {req['source']} corpus")
    spool.unlink(missing_ok=True)
    seconds = time.perf_counter() - start
    total = sum(s["tokens"] for s in splits.values())
    meta = {
        "format": FORMAT, "request": req, "source": req["source"],
        "vocab_size": tok.get_vocab_size(), "requested_vocab_size": req["vocab_size"],
        "eot_token": EOT, "eot_id": eot_id, "dtype": "uint16", "eot_position": "before each story",
        "tokenizer_sha256": sha256_file(folder / "tokenizer.json"),
        "max_token_id": max(s["max_token_id"] for s in splits.values()),
        "splits": splits, "tokens": total,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "build_seconds": round(seconds, 3),
        "tokens_per_second": round(total / max(seconds, 1e-9)),
    }
    # a plain write: `folder` is a temporary sibling that `_prepare` renames into place only once it is complete
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
        meta = read_json(out / "meta.json")
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


def _prepare(req: dict[str, Any], out: Path, progress: bool, announce: Callable[[], None] | None = None,
             seq_len: int = SHORTEST_SEQ_LEN) -> tuple[Path, bool]:
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
            _build(req, corpus, tmp, out.name, progress, seq_len)
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
        # the folder's name, not its path: this line lands in notebooks, where a machine's path is noise
        print(f"preparing the {profile.data_source} corpus of profile {profile.name} in the data folder {out.name} "
              f"({size}vocabulary {profile.vocab_size:,}) ...", flush=True)

    return _prepare(req, out, progress, announce, profile.seq_len)


def prepare_profile(profile: Any, data_root: str | Path = "data", progress: bool = True) -> Path:
    """Prepares the default corpus of a `rev.base.profiles.Profile` in data_root/profile.data_name (if not there)."""
    return _prepare_profile(profile, data_root, progress)[0]


def stand_in_name(profile: Any) -> str:
    """The folder of the synthetic corpus that stands in for a profile's unreachable one: never the profile's own
    folder name, so that no later run or report calls synthetic stories TinyStories."""
    return f"synthetic-instead-of-{profile.data_name}"


def prepare_stand_in(profile: Any, data_root: str | Path = "data", progress: bool = True) -> Path:
    """Notebook 00's offline fallback: the built-in synthetic stories, in `stand_in_name(profile)`."""
    return prepare("synthetic", Path(data_root) / stand_in_name(profile), profile.vocab_size,
                   tokens=profile.data_tokens or DEFAULT_SYNTHETIC_TOKENS, progress=progress)


def profile_folder(profile: Any, data_root: str | Path = "data") -> Path:
    """Where a profile's corpus is: its own folder, or the stand-in when only that one was prepared here."""
    own, stand_in = Path(data_root) / profile.data_name, Path(data_root) / stand_in_name(profile)
    return stand_in if not (own / "meta.json").exists() and (stand_in / "meta.json").exists() else own


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
    parser.add_argument("--out", type=folder_arg, default=None,
                        help="output folder (default: DATA_ROOT/<name from the arguments>)")
    parser.add_argument("--tokens", type=_count, default=None,
                        help="corpus size in tokens, approximate (synthetic default 5M; cuts other sources)")
    parser.add_argument("--stories", type=_count, default=None, help="corpus size in stories")
    parser.add_argument("--seed", type=seed_arg, default=0, help="synthetic corpus seed (0 to 2**32 - 1)")
    parser.add_argument("--val-fraction", type=float, default=0.02,
                        help="share of stories kept for validation (synthetic and text sources)")
    parser.add_argument("--profile", default=None,
                        help="prepare this profile's corpus (smoke, cpu, t4, full, auto) instead")
    parser.add_argument("--data-root", type=folder_arg, default="data",
                        help="folder that holds the corpora (default data)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def run_cli(args: argparse.Namespace) -> int:
    progress = not args.no_progress
    try:
        if args.profile:
            from rev.base.profiles import get_profile

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
