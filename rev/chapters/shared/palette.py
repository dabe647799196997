"""One colour per thing across every figure of the book, so a colour means the same run, trunk or stream from
notebook to notebook.

Families, so that no colour means two kinds of thing: blues for the residual baseline, warm colours (reds,
oranges, browns) for reversible runs and integrators, grey for the screening's and other short runs, and cool
colours that no run uses for the streams (fp32 / fp64 / fixed) and for a backward (stored / rebuilt); the
companion chapters' arms (a policy under test, its fixed control, a shocked learning rate) take hues of their own,
and ordered sweeps a sequential map.
"""
from __future__ import annotations

# the workbook's runs, by folder name (`main_runs.MAIN_RUNS` / `EXTRA_RUNS`)
RUNS = {"run1_baseline": "#1f77b4", "run1b_baseline_maxbatch": "#6baed6", "run2_reversible_same_batch": "#d62728",
        "run3_reversible_max_batch": "#ff7f0e", "run4_reversible_deep": "#8c564b",
        "run3b_reversible_max_batch_stream": "#e377c2", "run2b_screening_runner_up": "#bcbd22"}
SCREENING = "#7f7f7f"
# integrators, by trunk or integrator name: the residual trunk is forward Euler
INTEGRATORS = {"residual": "#1f77b4", "euler": "#1f77b4", "midpoint": "#a63603", "leapfrog": "#a63603",
               "reveuler": "#fd8d3c"}
STREAMS = {"fp32": "#7570b3", "fp64": "#1b9e77", "fixed": "#66a61e"}
# 07b's ways to train past activation memory: the residual trunk's variants (stored, checkpointed, offloaded) in
# the baseline's blues, the reversible trunks in their integrators' colours (`variant_colour`)
VARIANTS = {"stored": "#1f77b4", "ckpt_attention": "#4292c6", "ckpt_block": "#08306b", "offload": "#9ecae1"}
BACKWARDS = {"stored": "#525252", "rebuilt": "#d62728"}
OTHER = "#7f7f7f"
# the companion chapters' arms (08, 09, 09b), in hues no run, trunk or stream uses: the policy under test (the
# adaptive checkpointing policy, the rank controller), its fixed control (fixed spacing, fixed rank, the unshocked
# run: cyan is always "the control"), and 08's shocked arms (learning rate raised / lowered)
ARMS = {"policy": "#e6ab02", "control": "#17becf", "raised": "#ae017e", "lowered": "#253494"}
# several measurements of one quantity in one panel (08's four potentials, 01's two toy problems and two roots):
# told apart by marker too
MEASURES = ("#4d4d4d", "#ae017e", "#e6ab02", "#17becf")
# a check against a deliberately broken variant (02's bf16 backward): the correct code near-black, the broken one
# in a hue no run, trunk or stream uses (green and red mean streams and runs, not "right" and "wrong")
CHECKS = {"correct": "#252525", "broken": "#c51b7d"}


def sweep_colours(n: int) -> list[str]:
    """`n` colours along one ordered axis (a sweep of eta, of depth): a sequential map, so order reads as order
    and no colour claims a run's or a trunk's meaning."""
    import matplotlib

    cmap = matplotlib.colormaps["viridis"]
    return [matplotlib.colors.to_hex(cmap(0.1 + 0.75 * i / max(1, n - 1))) for i in range(n)]


def run_colour(run: str) -> str:
    """A run's colour by its folder name (grey for any other run)."""
    return RUNS.get(run, SCREENING)


def variant_colour(name: str) -> str:
    """A 07b variant's colour (`VARIANTS`), a reversible trunk's by its integrator."""
    return VARIANTS.get(name) or integrator_colour(name)


def integrator_colour(name: str) -> str:
    """A trunk's (`midpoint_rev`, `reveuler`) or an integrator's (`leapfrog`) colour: reversible and stored twins
    share their integrator's."""
    return INTEGRATORS.get(name.removesuffix("_rev"), OTHER)
