"""Notebook 10 (fine-tune trace and rollback): an exact trace of fine-tuning, and the walk back along it.

A fine-tuning run is irreversible only because its trace is thrown away. `TraceRecorder` hooks an optimizer
and keeps, for every step, what is needed to undo it bit for bit; `rollback` walks the weights (and, if asked,
the optimizer state) back to any recorded step and `replay` walks forward again.

The package, one concern a module, in the order a reader meets them:

| module | holds |
|---|---|
| `codec` | one tensor's change kept exactly: float difference + sparse ulp corrections, byte-plane compression |
| `records` | `Trace` and `StepRecord` (header, ledger), hashes and the model fingerprint, `locate` |
| `walk` | `rollback`, `replay`, `walk_back_measuring` (weights and optimizer state) |
| `recorder` | `TraceRecorder`: the optimizer hooks that write the records |
| `lossy` | what people keep instead: bf16 / float differences (`degrade_trace`), dropped steps (`prune_trace`) |
| `verdict` | `reversibility_score`, the three checks, and `assess`, which gathers them into a verdict |
| `storage` | bytes per step against a checkpoint, what sets them (`size_breakdown`), `compression_ablation` |
| `tracefile` | `save_trace` / `load_trace`: one file, fingerprint and checksum, written atomically |
| `sizes` | the chapter's run on each profile (`SIZES`, `chapter_sizes`): steps, stories, the model it starts from |
| `finetune` | the chapter's prefix fine-tuning with the recorder on, sized per profile |
| `pretrain` | the pretrained start: a finished residual run reused, or a short one made |
| `scenarios` | branches that break a condition on purpose, the results table |
| `exercises` | the checks of the notebook's exercises |

Its AdamW and lr schedule are `rev.core.optim`'s. That schedule counts steps from 0 while a trace counts
optimizer steps from 1, so trace step n runs at `schedule.lr_at(n - 1)`.
"""
from ...core.optim import Schedule
from .verdict import (DEFAULT_SCORE_THRESHOLD, DEFAULT_UPDATE_THRESHOLD, Assessment, Check, Score, assess,
                      check_bounded, check_complete, check_lr_schedule, reversibility_score)
from .codec import Blob, apply_exact, encode_exact, encode_ulp, ulp_distance
from .exercises import check_adamw_undo, check_corruption_refused
from .sizes import SIZES, TraceSize, chapter_sizes, model_profile
from .finetune import (DEFAULT_PREFIX, FinetuneConfig, PrefixData, finetune_config,
                       finetune_with_trace, prefix_finetune_tokens, prefix_logprob, prefix_rate, sample_texts)
from .lossy import degrade_trace, degrade_traces, prune_trace
from .pretrain import PRETRAIN_RUN, find_checkpoint, pretrained_model
from .recorder import TraceRecorder
from .records import (BF16DIFF, DROPPED, EXACT, F32DIFF, FORMAT, VERSION, StepRecord, Trace, check_model,
                      fingerprint, hash_tensors, locate, weights_hash)
from .scenarios import rerun_from, scenario, scenario_rows, switch_branch
from .storage import compression_ablation, size_breakdown, storage_report
from .tracefile import MAGIC, load_trace, save_trace
from .walk import replay, rollback, walk_back_measuring

__all__ = [
    "Schedule",
    "DEFAULT_SCORE_THRESHOLD", "DEFAULT_UPDATE_THRESHOLD", "Assessment", "Check", "Score", "assess",
    "check_bounded", "check_complete", "check_lr_schedule", "reversibility_score",
    "Blob", "apply_exact", "encode_exact", "encode_ulp", "ulp_distance",
    "check_adamw_undo", "check_corruption_refused",
    "DEFAULT_PREFIX", "FinetuneConfig", "PrefixData", "TraceSize", "finetune_config", "finetune_with_trace",
    "prefix_finetune_tokens", "prefix_logprob", "prefix_rate", "sample_texts", "TraceSize", "chapter_sizes", "model_profile", "SIZES",
    "degrade_trace", "degrade_traces", "prune_trace",
    "PRETRAIN_RUN", "find_checkpoint", "pretrained_model",
    "TraceRecorder",
    "BF16DIFF", "DROPPED", "EXACT", "F32DIFF", "FORMAT", "VERSION", "StepRecord", "Trace", "check_model",
    "fingerprint", "hash_tensors", "locate", "weights_hash",
    "rerun_from", "scenario", "scenario_rows", "switch_branch",
    "compression_ablation", "size_breakdown", "storage_report",
    "MAGIC", "load_trace", "save_trace",
    "replay", "rollback", "walk_back_measuring",
]
