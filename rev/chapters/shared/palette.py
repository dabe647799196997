"""One colour per thing across every figure of the book, so a colour means the same run, trunk or stream from
notebook to notebook.

Families, so that no colour means two kinds of thing: blues for the residual baseline, warm colours (reds,
oranges, browns) for reversible runs and integrators, grey for the screening's and other short runs, and cool
colours that no run uses for the streams (fp32 / fp64 / fixed) and for a backward (stored / rebuilt).
"""
from __future__ import annotations

# the workbook's runs, by folder name (`rev.engine.profiles.MAIN_RUNS` / `EXTRA_RUNS`)
RUNS = {"run1_baseline": "#1f77b4", "run1b_baseline_maxbatch": "#6baed6", "run2_reversible_same_batch": "#d62728",
        "run3_reversible_max_batch": "#ff7f0e", "run4_reversible_deep": "#8c564b",
        "run3b_reversible_max_batch_stream": "#e377c2", "run2b_screening_runner_up": "#bcbd22"}
SCREENING = "#7f7f7f"
# integrators, by trunk or integrator name: the residual trunk is forward Euler
INTEGRATORS = {"residual": "#1f77b4", "euler": "#1f77b4", "midpoint": "#a63603", "leapfrog": "#a63603",
               "reveuler": "#fd8d3c"}
STREAMS = {"fp32": "#7570b3", "fp64": "#1b9e77", "fixed": "#66a61e"}
BACKWARDS = {"stored": "#525252", "rebuilt": "#d62728"}
OTHER = "#7f7f7f"


def run_colour(run: str) -> str:
    """A run's colour by its folder name (grey for any other run)."""
    return RUNS.get(run, SCREENING)


def integrator_colour(name: str) -> str:
    """A trunk's (`midpoint_rev`, `reveuler`) or an integrator's (`leapfrog`) colour: reversible and stored twins
    share their integrator's."""
    return INTEGRATORS.get(name.removesuffix("_rev"), OTHER)
