"""Notebook 09b (adaptive rank): the reversal defect as a rank signal -- a low-rank matrix ODE integrated by
projector splitting, rank enrichment, and a controller compared with fixed rank and spacing at equal memory.

* `splitting`   the K, S, L substeps (exact flows), the step and its reverse, the defect, rho, enrichment;
* `controller`  the controller's rules and the backward that rebuilds states by the reverse map (with reloads);
* `sizes`       the chapter's sizes per profile;
* `experiment`  the offline image sequences, the matrix-ODE classifier, memory and gradient fidelity;
* `training`    one arm trained with gradients through the reverse map (fixed, or the controller deciding);
* `comparison`  thresholds calibrated on held-out seeds; controller vs fixed at equal measured peak memory over
                paired seeds, the figure and tables;
* `exercises`   the checks of exercises 09b.1 and 09b.2, and the measurement of 09b.3.
"""
from .comparison import (ACC_MARGIN, CALIB_OFFSET, COS_GOOD, COS_SLACK, PEAK_MATCH, TAU_SVD, TIE, calibrate,
                         comparison_figure, compare, paired_sign_flip, save_verdict, success_criterion, summary_table,
                         verdict, VERDICT_FILE)
from .controller import RankController, enrichment_trace, forward_keep, kept_steps, reversal_gradients
from .exercises import CHECKPOINT_SHARE, check_projection, check_reverse_order, checkpoint_measurement
from .sizes import LowRankSizes, SIZES, chapter_sizes
from .experiment import (MatrixODE, gradient_fidelity, make_digits, new_model, rebuild_drift,
                         step_peak_bytes)
from .splitting import (LowRank, affine_flow, defect, dense_step, enrich, field, from_dense, initial_state,
                        k_substep, ksl_step, l_substep, reverse_step, rho, roundtrip_defect, s_substep,
                        tangent_residual)
from .training import seed_data, train_arm

__all__ = ["ACC_MARGIN", "CALIB_OFFSET", "COS_GOOD", "COS_SLACK", "PEAK_MATCH", "TAU_SVD", "TIE", "calibrate",
           "comparison_figure", "compare", "paired_sign_flip", "success_criterion",
           "save_verdict", "summary_table", "verdict", "VERDICT_FILE", "RankController", "enrichment_trace", "forward_keep",
           "kept_steps", "reversal_gradients", "check_projection", "check_reverse_order", "CHECKPOINT_SHARE",
           "checkpoint_measurement", "LowRankSizes",
           "MatrixODE", "gradient_fidelity", "make_digits", "new_model", "rebuild_drift", "chapter_sizes", "SIZES", "step_peak_bytes", "LowRank", "affine_flow",
           "defect", "dense_step", "enrich", "field", "from_dense", "initial_state", "k_substep", "ksl_step",
           "l_substep", "reverse_step", "rho", "roundtrip_defect", "s_substep", "tangent_residual", "seed_data",
           "train_arm"]
