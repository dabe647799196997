"""The workbook's chapters: one package per notebook (or tight group of notebooks), each telling its notebook's
story module by module in its `__init__`, and owning its sizes, findings, figures and exercise checks.

    00   setup         the corpus in tokens, what `load` refuses
    01   integrators   integrator theory on toy dynamics; 01b the memory-free backward built by hand
    02   checks        the project's tests run in the notebook, the measurements behind them, break-its
    03   screening     short runs of every reversible candidate, and the rule that picks one
    04-06 assignment   the baseline, the reversible trunk at the same batch and at its max batch
    07   report        what the runs add up to, and REPORT.md
    07b  landscape     reversible trunks beside checkpointing, offloading and their memory models
    08   thermo        training irreversibility: the four potentials of a finite step
    09   adaptive      the reversal defect as a reliability signal: checkpoints kept only where needed
    09b  lowrank       the reversal defect as a rank signal for a low-rank matrix ODE
    10   trace         a fine-tuning run walked back exactly from a kept trace of updates

`shared` holds what several chapters use (exercise `check`, table format, training and reading runs, run figures).
Chapters import every room below them (`rev.core` ... `rev.training`) and each other, never `rev.book` (the editions), which imports none of
them.
"""
