"""Notebook 07 (report) and `python -m rev report`: what the runs add up to, and REPORT.md.

The package, in the order the notebook tells the story:

* `headline`   the headline in computed lines (a one-line conclusion; memory, loss with seeds, batch and whether it
               paid, throughput from the interleaved bench, not won, not measured), and each run's own speed drift;
* `evidence`   the report's tables: runs, headline figures, max-batch searches, the published comparison, the worst
               trained reconstruction;
* `writer`     REPORT.md with its figures, and the `report` command;
* `exercises`  the checks notebook 07's exercise cells call.

Everything public is re-exported here: `from rev.chapters import report; report.write_report(results, profile)`.
"""
from .headline import (batch_line, bench_speed, budget_reason, conclusion_line, drifted_runs, headline_lines,
                       loss_line, memory_line, mib, not_measured_line, not_won_line, spent_line, spent_of,
                       throughput_line)
from .evidence import (compare_with_published, format_headline, markdown_table, maxbatch_table, runs_table,
                       worst_reconstruction)
from .writer import add_arguments, broken_lines, corpus_used, report_markdown, run_cli, text_table, write_report
from .exercises import check_stored_bytes_per_layer, check_with_reconstruction_error, with_reconstruction_error

__all__ = ["batch_line", "bench_speed", "budget_reason", "conclusion_line", "drifted_runs", "headline_lines",
           "loss_line", "memory_line", "mib", "not_measured_line", "not_won_line", "spent_line", "spent_of",
           "throughput_line", "compare_with_published", "format_headline", "markdown_table", "maxbatch_table",
           "runs_table", "worst_reconstruction", "add_arguments", "broken_lines", "corpus_used", "report_markdown",
           "run_cli", "text_table", "write_report", "check_stored_bytes_per_layer", "check_with_reconstruction_error",
           "with_reconstruction_error"]
