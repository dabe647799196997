"""Notebook 07b (where reversible training stands): reversible trunks beside what practitioners use instead.

The package, in the order the notebook tells the story:

* `models`  memory models, in bytes per token, of storing, recomputing, checkpointing, offloading and inverting
            activations (the published formulas reproduced, then extended);
* `measure` the same techniques measured side by side one training step at a time, the models checked against the
            measurements, and the verdict in numbers.

Everything public is re-exported here: `from rev.chapters import landscape; landscape.sweep(...)`.
"""
from .models import (FRONTIER, FRONTIER_PLAN, GIB, H100_ASSUMED, LABELS, LN_STATS, TECHNIQUES, activation_bytes,
                     evaluate, forward_flops, Geometry, Hardware, host_bytes, layer_bytes, offload_ratio, Plan,
                     plans_for, profile_geometry, recompute_overhead, static_bytes, with_flash, working_set_bytes)
from .measure import (BY_NAME, SIZES, VARIANTS, build, chapter_sizes, check_leak, check_stored_block_bytes,
                      checkpoint_attention, CheckpointedAttention, crossover_depth, measure_point,
                      measured_figure, model_check, models_figure, per_layer, per_token, predicted_crossover,
                      Sizes, speed_ratio, summarise, sweep, Variant, variants_for)

__all__ = ["FRONTIER", "FRONTIER_PLAN", "GIB", "H100_ASSUMED", "LABELS", "LN_STATS", "TECHNIQUES", "activation_bytes",
           "evaluate", "forward_flops", "Geometry", "Hardware", "host_bytes", "layer_bytes", "offload_ratio", "Plan",
           "plans_for", "profile_geometry", "recompute_overhead", "static_bytes", "with_flash", "working_set_bytes",
           "BY_NAME", "SIZES", "VARIANTS", "build", "chapter_sizes", "check_leak", "check_stored_block_bytes",
           "checkpoint_attention", "CheckpointedAttention", "crossover_depth", "measure_point",
           "measured_figure", "model_check", "models_figure", "per_layer", "per_token", "predicted_crossover",
           "Sizes", "speed_ratio", "summarise", "sweep", "Variant", "variants_for"]
