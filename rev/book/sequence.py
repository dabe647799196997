"""The workbook's notebooks, in reading order, and where they live: what the workbook run, the reference outputs,
the site and the course all walk (one list, so a new chapter is added once).
"""
from __future__ import annotations

from pathlib import Path

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
SEQUENCE = (
    "00_setup", "01_integrator_theory", "01b_build_the_backward", "02_tests", "03_screening", "04_run1_baseline",
    "05_run2_reversible_same_batch", "06_run3_reversible_max_batch", "07_report",
    "07b_where_reversible_stands", "08_training_irreversibility", "09_adaptive_checkpointing", "09b_adaptive_rank",
    "10_finetune_trace_rollback",
)
