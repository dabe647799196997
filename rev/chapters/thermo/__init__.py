"""Notebook 08 (training irreversibility): the four potentials of a finite step, measured.

A trunk can be run backwards exactly; the *training process* cannot. For an update

    theta' = theta - eta * U(theta),        J = dU/dtheta,

the finite step eta breaks time-reversal symmetry, and four different arguments all find the same price for it,
a potential phi = (eta/4) |U|^2 added to the loss:

* backward error analysis (DE): one step equals gradient flow on L + phi_DE for a time eta, to O(eta^3);
* the time-reversal defect (TA): a step forward then a step with -eta lands at theta - 2 eta grad(phi_TA);
* time renormalisation (TR): halving the step k times builds a coupling g(k) = (1 - 2^-k)/4, phi_TR = g eta |U|^2;
* stochastic thermodynamics (ST): with noise of temperature T, T * (entropy production) contains the increment
  of phi_ST = (eta/4) |U|^2, exactly.

The package, one concern per module, in the order the notebook tells the story:

* `problems`  the small float64 test problems (quadratic, logistic regression, tiny MLP) and the input checks;
* `defect`    steps, flows, round trips, and the theory as functions (modified field, g(k), entropy production);
* `measure`   the four potentials measured on real trajectories (double backward for the J U products), the
              O(eta) slopes, and the small tables the chapter prints;
* `symmetry`  the rescaling-symmetry drift (phi breaks rescaling, keeps rotations);
* `sizes`     the per-profile sizes (`SIZES`) and the paper's Figure 2 setup they are compared with;
* `shock`     the learning-rate shock experiment on a tiny causal transformer and a linear perceptron;
* `seeds`     that shock over several seeds: four measures, before/after responses, verdicts ("not decided");
* `cache`     the paper-size shock as `python -m rev thermo-shock`, its cached JSON and what the notebook shows;
* `findings`  the notebook's figures and its summary JSON;
* `exercises` the checks of the notebook's exercises (08.1-08.3).

Everything public is re-exported here, so `from rev.chapters import thermo; thermo.measure_potentials(...)`.

"""
from .defect import (coupling, coupling_recursion, entropy_production, entropy_production_identity, fine_steps,
                     flow_rk4, gd_step, gd_trajectory, grad_phi, modified_update, quadratic_round_trip_prediction,
                     renormalised_potential, renormalised_update, reverse_step, round_trip)
from .exercises import (check_backward_sign_break, check_defect_slopes, check_round_trip_defect, defect_scaling,
                        scaling_problem)
from .cache import cache_path, load_runs, notebook_runs, planned_runs, save_runs
from .findings import (ChapterFindings, plot_coupling, plot_drift, plot_error_slopes, plot_shock, plot_shock_seeds,
                       write_summary)
from .measure import (POTENTIALS, ROUNDING, Measurement, compare, coupling_table, entropy_identity_table, eta_grid,
                      loglog_slope, measure_coupling, measure_potentials, minibatch_stream, potential_sweep,
                      projection_ratio, renormalisation_mismatch, round_trip_table, slope_table, stochastic_limit)
from .problems import (DTYPE, Field, Problem, logistic_problem, mlp_problem, quadratic_problem, standard_problems,
                       top_curvature, torch_threads)
from .seeds import (MEASURES, UNDECIDED, claim_status, measure_series, per_seed_table, seed_table, seed_verdict,
                    shock_over_seeds, verdict_over_seeds, verdict_table)
from .shock import (LAYOUTS, MODELS, LinearPerceptron, ReversalBatch, TinyCausalTransformer, base_learning_rate,
                    fluctuation_summary, fluctuation_verdict, lr_scan, lr_shock_experiment, noise_floor,
                    resolve_device, response_row, reversal_batch, windowed_variance)
from .sizes import (FLUCTUATION_SIZES, PAPER_SETUP_FIELDS, SWEEP_SIZES, FluctuationSizes, SweepSizes,
                    chapter_sizes, paper_differences, paper_sizes, setup_table,
                    quick_shock_sizes)
from .symmetry import balance_drift, drift_rate_ratio, drift_table, product_loss, symmetry_defects

__all__ = ["coupling", "coupling_recursion", "entropy_production", "entropy_production_identity", "fine_steps",
           "flow_rk4", "gd_step", "gd_trajectory", "grad_phi", "modified_update", "quadratic_round_trip_prediction",
           "renormalised_potential", "renormalised_update", "reverse_step", "round_trip",
           "check_backward_sign_break", "check_defect_slopes", "check_round_trip_defect", "defect_scaling",
           "scaling_problem", "cache_path", "load_runs", "notebook_runs", "planned_runs", "save_runs", "ChapterFindings",
           "plot_coupling", "plot_drift", "plot_error_slopes", "plot_shock", "plot_shock_seeds",
           "write_summary", "POTENTIALS", "ROUNDING", "Measurement", "compare", "coupling_table",
           "entropy_identity_table", "eta_grid", "loglog_slope", "measure_coupling", "measure_potentials",
           "minibatch_stream", "potential_sweep", "projection_ratio", "renormalisation_mismatch", "round_trip_table", "slope_table",
           "stochastic_limit", "DTYPE", "Field", "Problem", "logistic_problem", "mlp_problem", "quadratic_problem",
           "standard_problems", "top_curvature", "torch_threads", "MEASURES", "UNDECIDED", "claim_status",
           "measure_series", "per_seed_table", "seed_table", "seed_verdict", "shock_over_seeds",
           "verdict_over_seeds", "verdict_table", "LAYOUTS", "MODELS", "LinearPerceptron", "ReversalBatch",
           "TinyCausalTransformer", "base_learning_rate", "fluctuation_summary", "fluctuation_verdict", "lr_scan",
           "lr_shock_experiment", "noise_floor", "resolve_device", "response_row", "reversal_batch",
           "windowed_variance", "FLUCTUATION_SIZES", "SWEEP_SIZES", "FluctuationSizes", "SweepSizes",
           "chapter_sizes", "quick_shock_sizes", "PAPER_SETUP_FIELDS", "paper_differences", "setup_table",
           "paper_sizes", "balance_drift", "drift_rate_ratio", "drift_table", "product_loss", "symmetry_defects"]
