"""Notebook 00 (setup): what a corpus looks like in tokens, what `load` refuses, and the tokens' frequencies.

The two tiny corpora made here (`tiny_corpora`, and `swapped_copy` for the mixed-up folder) serve both
`what_load_refuses` and the exercise checks in `exercises`, so neither needs the profile's data nor a network.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Callable

from ...data.corpus import prepare
from ...data.tokens import DataError, TokenData, load

_TINY = ((300, 1), (400, 2))     # (vocabulary, seed) of the two tiny corpora: different merges, different ids
ACCEPTED = "accepted: a bug"  # what `what_load_refuses` records when `load` refuses nothing


def corpus_facts(data: TokenData) -> dict[str, float]:
    """How far a token reaches in the training split: characters per text token (the BPE's compression; the one
    <|endoftext|> before each story carries no text) and tokens per story (that marker included)."""
    train = data.meta["splits"]["train"]
    return {"stories": train["stories"], "characters per story": train["chars"] / train["stories"],
            "characters per token": train["chars"] / (train["tokens"] - train["stories"]),
            "tokens per story": train["tokens"] / train["stories"]}


def token_reach(data: TokenData, n_tokens: int = 100_000) -> dict[str, float | str]:
    """How far one token reaches, in words: characters per word (its leading space included, as the BPE sees it)
    over characters per text token, read from the first `n_tokens` of the training split, and exercise 00.1's
    three choices decided from that ratio ("less than a word" below 0.8, "about one word" up to 1.25, "more")."""
    ids = data.array("train")[:n_tokens].tolist()
    text = data.decode(ids, skip_special=True)
    words = len(text.split())
    chars_per_token = corpus_facts(data)["characters per token"]
    chars_per_word = len(text) / max(words, 1)
    share = chars_per_token / chars_per_word
    return {"characters per word": chars_per_word, "words per token": share,
            "a token covers": "less than a word" if share < 0.8 else "about one word" if share <= 1.25 else
            "more than a word"}


def tiny_corpora(root: str | Path) -> tuple[Path, Path]:
    """Two small synthetic corpora under `root` with different vocabularies (so different token ids)."""
    return tuple(prepare("synthetic", Path(root) / f"tiny-v{vocab}", vocab, stories=60, seed=seed, progress=False)
                 for vocab, seed in _TINY)


def swapped_copy(ours: Path, other: Path, dest: Path) -> Path:
    """A copy of corpus `ours` at `dest` holding `other`'s tokenizer: the mix-up of copying data folders by hand."""
    mixed = Path(shutil.copytree(ours, dest))
    shutil.copy(other / "tokenizer.json", mixed / "tokenizer.json")
    return mixed


def what_load_refuses(data: TokenData) -> dict[str, str]:
    """The errors `load` raises for three mix-ups: a model vocabulary smaller than `data`'s, a tokenizer from
    another corpus, a truncated token file (the last two on a tiny corpus, so nothing big is copied)."""
    errors = {}

    def refused(case: str, call: Callable[[], object], folder: Path | None = None) -> None:
        try:
            call()
            errors[case] = ACCEPTED
        except DataError as e:   # a temporary folder's path is noise to a reader: name the files alone
            text = str(e)
            errors[case] = text if folder is None else text.replace(f"{folder}/", "").replace(str(folder), "its folder")

    refused(f"model vocabulary {data.vocab_size // 2:,} < corpus {data.vocab_size:,}",
            lambda: load(data.path, model_vocab_size=data.vocab_size // 2, verify=False))
    with tempfile.TemporaryDirectory() as tmp:
        ours, other = tiny_corpora(tmp)
        mixed = swapped_copy(ours, other, Path(tmp) / "mixed")
        refused("tokenizer.json from another corpus", lambda: load(mixed), mixed)
        with open(ours / "val.bin", "r+b") as f:
            f.truncate(f.seek(0, 2) - 2)
        refused("val.bin one token short", lambda: load(ours), ours)
    return errors


def plot_token_frequencies(data: TokenData, top_words: int = 4):
    """The lines to beat, as a picture: each token's share of the training split against its frequency rank
    (log-log), beside the flat line of the uniform guess. The gap between the two curves is what the context-free
    model wins over ln V: the counts alone, before any context. The most frequent tokens are labelled."""
    import matplotlib.pyplot as plt
    import numpy as np

    from ..shared.palette import OTHER, RUNS

    vocab = data.vocab_size
    counts = np.bincount(data.array("train"), minlength=vocab)[:vocab].astype(np.float64)
    order = np.argsort(-counts)
    share = counts[order] / counts.sum()
    seen = share > 0
    rank = np.arange(1, vocab + 1)
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    ax.loglog(rank[seen], share[seen], ".", ms=3, color=RUNS["run1_baseline"], label="training tokens, by rank")
    ax.axhline(1 / vocab, color=OTHER, ls="--", lw=1, label=f"uniform guess: 1/V = 1/{vocab:,}")
    for r in range(min(top_words, int(seen.sum()))):
        word = data.decode([int(order[r])]).replace("\n", "\\n") or "?"
        ax.annotate(repr(word), (r + 1, share[r]), xytext=(5, 6 if r % 2 else -10), textcoords="offset points",
                    fontsize=7)  # alternate above and below: neighbouring ranks sit close on a log axis
    unseen = vocab - int(seen.sum())
    ax.set(xlabel="frequency rank", ylabel="share of the training tokens",
           title=f"{data.n_tokens('train'):,} training tokens over a vocabulary of {vocab:,}"
                 + (f" ({unseen:,} never occur)" if unseen else ""))
    ax.title.set_fontsize(9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    return fig
