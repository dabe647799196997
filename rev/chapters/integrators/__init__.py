"""Notebooks 01 (integrator theory) and 01b (build the backward): why a trunk can run backwards, and the
memory-free backward built by hand.

01 works on toy dynamics x' = f(x): Euler is not reversible (its there-and-back defect is O(h^2)), leapfrog and
two-stream reversible Euler are, in exact arithmetic; in floating point the rebuilt input drifts, slowly on an
fp64 stream and not at all on a fixed-point one. 01b turns that into an autograd Function that keeps only the
final state and rebuilds every layer's input in backward, checks it against the stored twin, and breaks it.

The package, in the order the notebooks tell the story:

* `toy`         01's toy fields, walks, round trips, defects and the error models the figures compare with (the
                notebook writes each integrator's step and inverse in its cells and checks them against
                `rev.core.integrators`);
* `toy_plots`   01's figures (log axes that show exact zeros, the measured-vs-model band, the explorer);
* `buildit`     01b: the tiny two-stream trunk, the reference memory-free Function and its broken variants, the
                drift, memory and cost studies and their figures;
* `exercises`   the checks of the exercises of both notebooks (01.1, 01.2, 01b.1).

Everything public is re-exported here, except the name two modules share (`walk_back`: take it from `toy` or `buildit`).
"""
from .toy import (COMPUTE_DTYPE, UNIT_ROUNDOFF, add_sub_check, add_sub_example, AddSubCheck,
                  depth_slope, depth_study, DepthStudy, error_budget, error_profile, ErrorBudget, euler_defect,
                  EulerDefect, Field, fit_loglog_slope, initial_points, leapfrog_roots, linear_field, local_errors,
                  make_tanh_field, model_band, parasitic_mode, ParasiticMode, roundtrip_error, spacing, step_study,
                  StepStudy, TanhField, validate_walk, walk_forward)
from .toy_plots import (DEFAULT_EXPLORER, STREAM_COLORS, band_legend, band_panels, explorer_figure,
                        interactive_explorer, parasitic_figure, zero_aware_log_axis, zero_note)
from .buildit import (BREAKS, COLORS, GRAD_RTOL, TRUNKS, block_params, break_table, check_fixed_inverse, core_trunk,
                      count_evaluations, drift_study, evaluations_per_layer,
                      exercise_trunk, function_trunk, gradient_errors, KeepsStates, make_blocks, make_input,
                      memory_slopes, memory_study, plot_drift, plot_memory, pull_back, rebuild_error,
                      relative_error, ReversibleEulerFunction, run_function, saved_bytes_at, saved_tensor_bytes,
                      step_activation_bytes, stored_trunk, summarise_errors, SwappedInverse, TwoStreamBlock,
                      undo_layer, undo_update)
from .exercises import check_euler_there_and_back, check_function, check_leapfrog_inverse, LeapfrogInverse

__all__ = ["COMPUTE_DTYPE", "UNIT_ROUNDOFF", "add_sub_check", "add_sub_example", "AddSubCheck",
           "depth_slope", "depth_study", "DepthStudy", "error_budget", "error_profile", "ErrorBudget", "euler_defect",
           "EulerDefect", "Field", "fit_loglog_slope", "initial_points", "leapfrog_roots", "linear_field",
           "local_errors", "make_tanh_field", "model_band", "parasitic_mode", "ParasiticMode", "roundtrip_error",
           "spacing", "step_study", "StepStudy", "TanhField", "validate_walk", "walk_forward",
           "DEFAULT_EXPLORER", "STREAM_COLORS", "band_legend", "band_panels", "explorer_figure",
           "interactive_explorer", "parasitic_figure", "zero_aware_log_axis", "zero_note", "BREAKS", "COLORS",
           "GRAD_RTOL", "TRUNKS", "block_params", "break_table", "check_fixed_inverse", "core_trunk",
           "count_evaluations", "drift_study", "evaluations_per_layer",
           "exercise_trunk", "function_trunk", "gradient_errors", "KeepsStates", "make_blocks", "make_input",
           "memory_slopes", "memory_study", "plot_drift", "plot_memory", "pull_back",
           "rebuild_error", "relative_error", "ReversibleEulerFunction", "run_function", "saved_bytes_at",
           "saved_tensor_bytes", "step_activation_bytes", "stored_trunk", "summarise_errors", "SwappedInverse",
           "TwoStreamBlock", "undo_layer", "undo_update", "check_euler_there_and_back", "check_function",
           "check_leapfrog_inverse", "LeapfrogInverse"]
