"""Notebook 00 (setup): the corpus in tokens, what `load` refuses, and the plan a token budget makes.

The package, in the order the notebook tells the story:

* `lessons`   what a corpus looks like in tokens (`corpus_facts`, `token_reach`), what `load` refuses for three
              mix-ups (`what_load_refuses`, on two tiny corpora made here), the tokens' rank-frequency figure
              (`plot_token_frequencies`);
* `exercises` the checks of the notebook's exercises (00.2 a token budget's steps, 00.3 a swapped tokenizer).

Everything public is re-exported here: `from rev.chapters.setup import corpus_facts`.
"""
from .lessons import (ACCEPTED, corpus_facts, plot_token_frequencies, swapped_copy, tiny_corpora, token_reach,
                      what_load_refuses)
from .exercises import check_plan_steps, check_swapped_reading

__all__ = ["ACCEPTED", "corpus_facts", "plot_token_frequencies", "swapped_copy", "tiny_corpora", "token_reach", "what_load_refuses",
           "check_plan_steps", "check_swapped_reading"]
