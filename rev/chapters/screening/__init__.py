"""Notebook 03 (screening): short runs of every reversible candidate, and the rule that picks the trunk the
assignment runs use.

The package, in the order the notebook tells the story:

* `rule`      the candidates, their short runs (`screen`; the notebook runs the same loop in its cells), the rule
              (`choose`: reconstructs, then lowest loss, a tie within `LOSS_TIE`, the stated fallback of
              `rev.chapters.shared.verdicts`, broken towards the cheapest stream), its verdicts, runner-up, figures
              and `screening.json`;
* `sizes`     per profile: the fraction of the budget a candidate trains on, and which candidates;
* `streams`   the fp64 and fixed-point candidates measured on their fp32 twin's trained weights (paired);
* `exercises` the check of exercise 03.2 (the learner's version of the rule).

Everything public is re-exported here: `from rev.chapters.screening import choose`.
"""
from .rule import (ASSIGNMENT_FINAL, LOSS_TIE, STREAM_COST, Candidate, choose, chosen_reversible, distinct_runner_up,
                   exactness_by_block_dtype, pick_of_tie, plot_screening_bars, plot_screening_curves, reconstructs,
                   screen, screening_candidates, screening_tokens, screening_verdicts, stream_twins, tied_with_best,
                   trained_row)
from .streams import PROBE_STEPS, stream_row, with_stream
from .exercises import SCREENING_CASES, check_screening_rule

__all__ = ["ASSIGNMENT_FINAL", "LOSS_TIE", "STREAM_COST", "Candidate", "choose", "chosen_reversible",
           "distinct_runner_up", "exactness_by_block_dtype", "pick_of_tie", "plot_screening_bars",
           "plot_screening_curves", "reconstructs", "screen", "screening_candidates", "screening_tokens",
           "screening_verdicts", "stream_twins", "tied_with_best", "trained_row", "PROBE_STEPS", "stream_row",
           "with_stream", "SCREENING_CASES", "check_screening_rule"]
