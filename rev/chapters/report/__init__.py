"""Notebook 07 (report) and `python -m rev report`: what the runs add up to, and REPORT.md.

The package, in the order the notebook tells the story:

* `headline`   the headline in computed lines (memory, loss with seeds, batch and whether it paid, throughput from the
               interleaved bench, not won, not measured) and what the machine's timings cannot say;
* `evidence`   the report's tables: runs, headline figures, max-batch searches, the published comparison;
* `writer`     the findings in sentences, REPORT.md with its figures, the `report` command;
* `summaries`  notebook 07's readings of exactness per stream and of loss against time at equal tokens;
* `qualifiers` the sentences that qualify a finding: the worst trained reconstruction, what moved with the stream;
* `companions` REPORT.md's section on the companion chapters (07b-10), read from the files they leave behind;
* `exercises`  the reference answers of notebook 07's exercises and the checks their cells call.

Everything public is re-exported here: `from rev.chapters import report; report.write_report(results, profile)`.
"""
from .headline import (batch_line, bench_speed, budget_reason, drifted_runs, headline_lines, limits, loss_line,
                       memory_line, mib, not_measured_line, not_won_line, pct, spent_line, spent_of,
                       throughput_caveat, throughput_line, timing_note)
from .evidence import compare_with_published, format_headline, markdown_table, maxbatch_table, runs_table
from .writer import (SECTIONS, UNIGRAM_MARGIN, add_arguments, assignment_sections, bullet_list, corpus_used, findings,
                     report_markdown, run_cli, takeaways, takeaways_markdown, text_table, write_report)
from .summaries import loss_and_time_summary, reconstruction_summary
from .companions import CHAPTERS, TRACE_DOC_LIMIT, TRACE_MAGIC, UNDECIDED, chapter_finding, companion_findings
from .exercises import (MAX_BATCH_RUNS, changed_findings, check_stored_bytes_per_layer,
                        check_with_reconstruction_error, race_answer, stored_trunk_markdown, with_reconstruction_error)

__all__ = ["batch_line", "bench_speed", "budget_reason", "drifted_runs", "headline_lines", "limits", "loss_line",
           "memory_line", "mib", "not_measured_line", "not_won_line", "pct", "spent_line", "spent_of",
           "throughput_caveat", "throughput_line", "timing_note", "SECTIONS", "UNIGRAM_MARGIN", "add_arguments", "assignment_sections", "bullet_list",
           "compare_with_published", "corpus_used", "findings", "format_headline", "loss_and_time_summary",
           "markdown_table", "maxbatch_table", "reconstruction_summary", "report_markdown", "run_cli", "runs_table",
           "takeaways", "takeaways_markdown", "text_table", "write_report", "CHAPTERS", "TRACE_DOC_LIMIT",
           "TRACE_MAGIC", "UNDECIDED", "chapter_finding", "companion_findings", "MAX_BATCH_RUNS", "changed_findings",
           "check_stored_bytes_per_layer", "check_with_reconstruction_error", "race_answer", "stored_trunk_markdown",
           "with_reconstruction_error"]
