"""`python -m rev plan`: what a profile's workbook will run, before it runs, on any machine.

* `cost`        FLOPs per token of a GPT step, the `Work` a notebook does, its estimated time on a Colab T4 (a
                stated throughput model), and on a GPU the rates measured there;
* `workbook`    every training run of the workbook (screening, runs 1-4 with 1b, 3b, the seeds, the recipe sweep, the
                runner-up) and every measurement that trains steps, sized by notebook 06's searches replayed on the
                memory ledger's predicted steps;
* `companions`  the companion chapters' runs (07b, 08, 09, 09b, 10), from their own sizes;
* `command`     the command: the table, the totals per notebook, `--json`.
"""
from .cost import T4_FLOPS, Work, forward_flops, train_flops
from .workbook import Machine, Search, WorkbookPlan, machine_for, plan_workbook

__all__ = ["T4_FLOPS", "Work", "forward_flops", "train_flops", "Machine", "Search", "WorkbookPlan", "machine_for",
           "plan_workbook"]
