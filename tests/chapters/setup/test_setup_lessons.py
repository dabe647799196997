"""Notebook 00's computed sentences (rev.chapters.setup.lessons): how far a token reaches, and what `load` refused, read from
the data and the refusals, so different inputs read differently."""
from __future__ import annotations

import pytest
import torch

from rev.chapters.setup import lessons as setup
from rev.data.tokens import load
from rev.base.profiles import get_profile


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


def test_takeaways_say_what_load_refused(tiny):
    prof = get_profile("smoke")
    device = torch.device("cpu")
    refused = {"a": "the model's vocabulary is too small", "b": "hash differs", "c": "truncated"}
    text = setup.takeaways(prof, tiny, "synthetic", device, None, refused)
    assert "refused all 3 mix-ups" in text and "ACCEPTED" not in text
    text = setup.takeaways(prof, tiny, "synthetic", device, None, dict(refused, b=setup.ACCEPTED))
    assert "ACCEPTED 1 of 3 mix-ups it should refuse: b" in text and "refused all" not in text
    reach = setup.token_reach(tiny)
    assert f"{reach['words per token']:.2f} of a" in text and reach["a token covers"] in text


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
