"""Notebook 03 (screening): short runs of every reversible candidate, and the rule that picks the trunk the
assignment runs use.

The package, in the order the notebook tells the story:

* `rule`      the candidates, their short runs, the rule (`choose`: reconstructs, then lowest loss, a tie within
              `LOSS_TIE`, the stated fallback of `rev.chapters.shared.verdicts`, broken towards fp32 and speed), its verdicts, runner-up and figures, `screening.json`;
* `sizes`     per profile: the fraction of the budget a candidate trains on, and which candidates;
* `streams`   the fp64 and fixed-point candidates measured on their fp32 twin's trained weights (paired);
* `takeaways` the notebook's closing Markdown, computed from the screening's result;
* `exercises` the check of exercise 03.2 (the learner's version of the rule).

Everything public is re-exported here: `from rev.chapters.screening import choose`.
"""
from .rule import (ASSIGNMENT_FINAL, LOSS_TIE, Candidate, choose, chosen_reversible,
                   distinct_runner_up, exactness_by_block_dtype, exactness_lesson, pick_of_tie, plot_screening_bars,
                   plot_screening_curves, reconstructs, screen, screening_candidates, screening_rule,
                   screening_tokens, screening_verdicts, speed_text, stream_twins, tied_with_best)
from .streams import PROBE_STEPS, stream_lesson, with_stream
from .takeaways import screening_takeaways
from .exercises import SCREENING_CASES, check_screening_rule

__all__ = ["ASSIGNMENT_FINAL", "LOSS_TIE", "Candidate", "choose", "chosen_reversible",
           "distinct_runner_up", "exactness_by_block_dtype", "exactness_lesson", "pick_of_tie", "plot_screening_bars",
           "plot_screening_curves", "reconstructs", "screen", "screening_candidates", "screening_rule",
           "screening_tokens", "screening_verdicts", "speed_text", "stream_twins", "tied_with_best",
           "PROBE_STEPS", "stream_lesson", "with_stream", "screening_takeaways", "SCREENING_CASES", "check_screening_rule"]
