"""The workbook's runs by folder name: what the report calls each, its legend label and what it trains. Notebooks
04-06 make the main runs in this order; the report, the tables, the palette and the trace chapter read them here."""
from __future__ import annotations

from typing import NamedTuple


class MainRun(NamedTuple):
    role: str          # the report's name for it
    label: str         # short label for plot legends
    what: str          # one line: what the run trains


# The workbook's main runs, in the order notebooks 04-06 make them; folder names under results/<profile>/.
MAIN_RUNS: dict[str, MainRun] = {
    "run1_baseline": MainRun("baseline", "baseline", "residual at the profile's batch"),
    "run1b_baseline_maxbatch": MainRun("baseline, max batch", "baseline max batch",
                                       "residual at its own max batch under the memory budget"),
    "run2_reversible_same_batch": MainRun("reversible, same batch", "reversible",
                                          "the screened reversible trunk at the profile's batch"),
    "run3_reversible_max_batch": MainRun("reversible, max batch", "reversible max batch",
                                         "the screened reversible trunk at its max batch under the same budget"),
    "run4_reversible_deep": MainRun("reversible, deep", "reversible deep",
                                    "the deepest reversible model that fits the baseline's memory at its batch"),
}

# Runs the report shows when they are there, never listed as missing: run 3b (notebook 06) and the screening's
# runner-up at the full budget (notebook 07).
EXTRA_RUNS: dict[str, MainRun] = {
    "run3b_reversible_max_batch_stream": MainRun("reversible, max batch, other stream", "reversible max batch, 3b",
                                                 "the screened reversible trunk on the other stream (fp32 <-> "
                                                 "fp64) at its own max batch"),
    "run2b_screening_runner_up": MainRun("screening runner-up", "runner-up",
                                         "the screening's second-best reversible candidate at the profile's batch"),
}
