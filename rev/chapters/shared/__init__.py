"""What several chapters share, each in one place, imported from its module (nothing is re-exported here):

* `exercises` `check` and `markdown`, which every notebook's exercise and takeaway cells call, and the conventions
              of an exercise check;
* `tables`    how every notebook shows a table (`tidy`, `format_number`), a measured check (`checked`) and a
              verdict table (`verdict_table`: claim, measured, bound, verdict);
* `verdicts`  every verdict's one rule (03-10 and REPORT.md): a loss tie with its value and its source (`Tie`),
              the boundary inside the tie; speed verdicts only from interleaved timing (`Spread`), runs timed
              apart "not comparable"; "too noisy to tell"; whether the machine's speed changed during a run;
* `record`    one record of a run, read from a summary or a results row, so a finding drawn from two runs (their
              losses at equal tokens) is computed once for the notebook and the report;
* `runs`      training a workbook run from a notebook (`train_run`: a finished run reused, an interrupted one
              resumed), its folder, its speed with its spread, its sample; used by 03 to 07b;
* `live_loss` the loss curve redrawn while a run trains;
* `run_log`   what one run's log.csv says (its losses at a point, its step speeds, whether it stalled);
* `results`   what the runs of a profile left behind, read into one frame (06, 07 and REPORT.md);
* `run_plots` the figures of runs side by side (04-06);
* `figures`   the figures drawn from the results frame (06, 07 and REPORT.md);
* `main_runs` the workbook's runs by folder name: the report's name for each, its legend label;
* `palette`   one colour per run, integrator, stream and backward across every figure of the book.
"""
