"""Notebook 00's measurements (rev.chapters.setup.lessons): how far a token reaches, what `load` refuses, the tokens'
frequencies."""
from __future__ import annotations

import pytest

from rev.chapters.setup import lessons as setup
from rev.data.tokens import load


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    small, _ = setup.tiny_corpora(tmp_path_factory.mktemp("corpora"))
    return load(small)


class _Stub:
    """Just what `token_reach` reads of a corpus: its token ids and how to decode them, and its split sizes."""

    def __init__(self, text: str, chars_per_token: float):
        self.text = text
        n_text = round(len(text) / chars_per_token)
        self.meta = {"splits": {"train": {"stories": 1, "chars": len(text), "tokens": n_text + 1}}}

    def array(self, split: str):
        import numpy as np

        return np.arange(10)

    def decode(self, ids, skip_special: bool = False) -> str:
        return self.text


def test_token_reach_reads_the_ratio_off_the_corpus():
    words = "the cat sat on the mat and then it ran off " * 20   # 43 characters, 11 words (spaces included)
    assert setup.token_reach(_Stub(words, 1.6))["a token covers"] == "less than a word"
    assert setup.token_reach(_Stub(words, 4.0))["a token covers"] == "about one word"
    assert setup.token_reach(_Stub(words, 9.0))["a token covers"] == "more than a word"
    assert setup.token_reach(_Stub(words, 2.0))["words per token"] == pytest.approx(2.0 / (43 / 11), rel=0.01)


def test_what_load_refuses_names_files_not_temporary_folders(tiny):
    refusals = setup.what_load_refuses(tiny)
    assert len(refusals) == 3 and setup.ACCEPTED not in refusals.values()
    assert not any("/tmp" in error or "mixed/" in error or "tiny-v" in error for error in refusals.values()), refusals
    assert "tokenizer.json" in refusals["tokenizer.json from another corpus"]


def test_the_frequency_figure_ranks_the_counts_and_draws_the_uniform_share(tiny):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig = setup.plot_token_frequencies(tiny)
    dots, uniform = fig.axes[0].get_lines()[:2]
    share = dots.get_ydata()
    counts = np.bincount(tiny.array("train"), minlength=tiny.vocab_size)[:tiny.vocab_size]
    assert np.all(np.diff(share) <= 0) and share[0] == pytest.approx(counts.max() / counts.sum())
    assert uniform.get_ydata()[0] == pytest.approx(1 / tiny.vocab_size)
    plt.close(fig)
