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


def read_notebook(path: str | Path):
    """The notebook at `path` (nbformat 4), or a ValueError naming the file when it is not one: JSON that is not a
    notebook (cells without metadata, say) raises jsonschema's error deep inside nbformat, which no command would
    otherwise report as a bad input."""
    import warnings

    import nbformat

    try:
        with warnings.catch_warnings():   # cells without ids: nbformat adds them in memory, which is all a reader needs
            warnings.simplefilter("ignore", nbformat.validator.MissingIDFieldWarning)
            return nbformat.read(str(path), as_version=4)
    except FileNotFoundError:
        raise ValueError(f"{path} does not exist") from None
    except (nbformat.ValidationError, ValueError, KeyError, TypeError, AttributeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"{path} is not a readable notebook ({first}): execute it again, or give the folder "
                         f"of a whole workbook run") from None
