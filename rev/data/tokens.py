"""Token files as training reads them: `load` checks a prepared folder and hands out a `TokenData`.

A prepared corpus is ``data/<name>/{tokenizer.json, train.bin, val.bin, meta.json}`` (written by
`rev.data.corpus.prepare`): uint16 token ids with ``<|endoftext|>`` before every story, the byte-level BPE that
made them, and ``meta.json`` recording sizes and checksums. `load` refuses a folder whose pieces do not belong
together (lengths, checksums, tokenizer hash, a model vocabulary too small) with a message saying what to do;
`TokenData` draws deterministic random batches from the memory-mapped files.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tokenizers import Tokenizer

from ..base.files import shown_path

if TYPE_CHECKING:  # torch is imported only when batches are drawn: `prepare` does not need it
    import torch

EOT = "<|endoftext|>"
FORMAT = 1                       # bump when the layout of a prepared folder changes
SPLITS = ("train", "val")
_READ_CHUNK = 1 << 22            # bytes per read when checksumming


class DataError(ValueError):
    """Bad input to the data pipeline; the message says what to do about it."""


# Checksums: `rev.data.corpus` records them in meta.json, `load` checks them; one definition for both sides.

def _blake2b(path: Path) -> str:
    digest = hashlib.blake2b(digest_size=16)
    with path.open("rb") as f:
        while chunk := f.read(_READ_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------------------------------------------------------
# Loading: verification, memmap batches, encode/decode
# ---------------------------------------------------------------------------------------------------------------

def _read_meta(folder: Path) -> dict[str, Any]:
    rebuild = f"prepare it again: python -m rev prepare --out {folder} ..."
    if not folder.is_dir():
        raise DataError(f"no prepared corpus at {folder}: run `python -m rev prepare` "
                        f"(or rev.data.corpus.prepare) first")
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
    if sha256_file(path) != meta.get("tokenizer_sha256"):
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


def check_sequence_fits(split: str, n_tokens: int, seq_len: int, where: str) -> None:
    """Refuse a split too short to draw one training sequence from (seq_len inputs and the next token's target):
    the one rule `prepare`, `train` (before its first step) and every batch drawn keep."""
    if n_tokens <= seq_len:
        raise DataError(f"the {split} split of {where} has {n_tokens:,} tokens, too few for one sequence of "
                        f"{seq_len:,} (it needs {seq_len + 1:,}): prepare a bigger corpus"
                        + (" or raise --val-fraction" if split == "val" else ""))


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
        return f"TokenData({shown_path(self.path)!r}, vocab_size={self.vocab_size}, tokens: {sizes})"

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
        check_sequence_fits(split, len(data), seq_len, shown_path(self.path))
        offsets = torch.randint(len(data) - seq_len, (batch_size,), generator=generator,
                                device=generator.device).cpu().numpy()
        window = data[offsets[:, None] + np.arange(seq_len + 1)].astype(np.int64)
        chunk = torch.from_numpy(window)
        x, y = chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous()
        if device is not None:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        return x, y

    def check_sequences(self, seq_len: int) -> None:
        """Both splits hold at least one sequence of `seq_len` (`check_sequence_fits`): checked before training."""
        for split in SPLITS:
            check_sequence_fits(split, self.n_tokens(split), seq_len, shown_path(self.path))

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
        raise DataError(f"the model's vocabulary ({model_vocab_size:,}) is smaller than the corpus's "
                        f"({meta['vocab_size']:,}, token ids up to {meta['max_token_id']:,}): set the model's "
                        f"vocab_size to at least {meta['vocab_size']}, or prepare the data with "
                        f"--vocab-size {model_vocab_size}")
    return TokenData(folder, meta, tok)
