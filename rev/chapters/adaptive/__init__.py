"""Notebook 09 (adaptive checkpointing): the reversal defect as a reliability signal, and checkpoints of the
stream kept only where they are needed.

A reversible trunk on a float stream rounds on every add and subtract, so walking it backward does not land
exactly on the states the forward pass went through; where the miss arises (layer after layer, or in one
ill-conditioned inversion) is measured, not assumed.
Two remedies change the stream (`fp64`, `fixed`). This chapter builds the third: *measure* how far a round trip
misses, and keep an exact copy of the stream state at the layer boundaries where it misses too much.

The package, one concern per module, in the order the notebook tells the story:

* `measure`    keep sets and spans, the reversal defect, the errors backward rebuilds with, kept-state bytes,
               gradient fidelity against a dense reference;
* `policy`     the keep-state controller: `FixedPolicy`, `AdaptivePolicy`, and `AdaptiveCheckpointer`, the hook a
               training loop calls;
* `sizes`      the per-profile sizes (from `rev.base.profiles.CHAPTER_SIZES["adaptive"]`), model and batches;
* `placement`  the stress (`expand_blocks`) and the layout comparisons on fixed weights;
* `training`   the chapter's compact loop, pretraining and the comparison under one memory budget;
* `findings`   the larger figures;
* `exercises`  the checks of the notebook's exercises (09.1, 09.3).

Everything public is re-exported here, so `from rev.chapters import adaptive as A; A.reversal_defect(...)`.
"""
from .exercises import check_no_restart, check_span_tops, exercise_batch, exercise_model, trunk_function
from .findings import frontier_figure, training_figure
from .measure import (DEFECT_EPS, REFERENCES, Span, apply_keep, backward_reconstruction_errors, boundary_states,
                      clone_model, defect_vs_depth, fixed_spacing, gradient_cosine, keep_from_spans, kept_state_bytes,
                      parameter_gradients, reference_model, relative_error, reversal_defect, spans_from_keep,
                      state_bytes, stored_twin, validate_keep)
from .placement import (calibrate, distinct_layouts, expand_blocks, frontier, frontier_verdict, grad_error,
                        layout_report, pick_gain, settle, span_defect_matrix, stress_scan, uniform_layout,
                        boundary_rival)
from .policy import AdaptiveCheckpointer, AdaptivePolicy, FixedPolicy, make_policy
from .sizes import ChapterSizes, batch_source, chapter_sizes, model_config
from .training import (compare_training, pretrain, replicate_training, summarise_run, train_with_checkpointer,
                       training_verdict)

__all__ = ["check_no_restart", "check_span_tops", "exercise_batch", "exercise_model", "trunk_function",
           "frontier_figure", "training_figure", "DEFECT_EPS", "REFERENCES", "Span", "apply_keep",
           "backward_reconstruction_errors", "boundary_states", "clone_model", "defect_vs_depth", "fixed_spacing",
           "gradient_cosine", "keep_from_spans", "kept_state_bytes", "parameter_gradients", "reference_model",
           "relative_error", "reversal_defect", "spans_from_keep", "state_bytes", "stored_twin", "validate_keep",
           "calibrate", "distinct_layouts", "expand_blocks", "frontier", "frontier_verdict", "grad_error",
           "layout_report", "pick_gain",
           "settle", "span_defect_matrix", "stress_scan", "uniform_layout", "boundary_rival", "AdaptiveCheckpointer", "AdaptivePolicy",
           "FixedPolicy", "make_policy", "ChapterSizes", "batch_source", "chapter_sizes", "model_config",
           "compare_training", "pretrain", "replicate_training", "summarise_run",
           "train_with_checkpointer", "training_verdict"]
