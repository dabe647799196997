"""`python -m rev report` and notebook 07: the findings in sentences, the report's tables, and REPORT.md.

`rev.chapters.shared.results` reads ``results/<profile>/`` and derives the numbers, `rev.chapters.shared.figures` draws them; this module
says what they mean (`findings`, `takeaways`), lays them out as Markdown with `evidence`'s tables (`report_markdown`) and
writes ``REPORT.md`` with ``plots/*.png`` beside it (`write_report`). Every number in the report is read from
the results folder, except the published reference figures, which are labelled as such wherever they appear.

Results made elsewhere (a Colab T4, say) come back as a zip made by ``python -m rev bundle --results PROFILE``;
``python -m rev report --merge ARCHIVE`` unpacks it next to the local results (`rev.base.results_folder.merge`) first.
Each row carries the run's `device`, so CPU and GPU rows can sit in one table.
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from ...base.cli import folder_arg
from ...base.files import check_output, swap_in, write_text
from ...base.results_folder import PLOTS_DIR, REPORT_NAME, merge
from ...core.optim import WARMUP_FLOOR_STEPS
from ..shared.figures import save_plots
from ..shared.run_log import PLATEAU_NATS, run_start
from ..shared.tables import counted, format_number, header, tidy
from .companions import companion_findings
from .qualifiers import recon_sentence, stream_confounds
from .headline import bench_speed, headline_lines, limits, mib
from .evidence import format_headline, markdown_table, runs_table
from ..shared.verdicts import TIMED_APART, seed_tie, side_of_tie, speed_verdict
from ..shared.results import (BASE, BASE_MAX, MIB, PUBLISHED_SOURCE, REV, REV_DEEP, REV_MAX, deep_capped,
                      deep_search, loss_head_finding, loss_head_table, max_batch_views, screening_check, stream_runs,
                      equal_tokens_val, format_value, headline, load_all, load_runs, main_reversible_trunk, main_run,
                      main_runs, max_batches_found, maxbatch_of, number, published_reference, unigram_loss)

UNIGRAM_MARGIN = 0.1     # a run ending this close to the context-free loss has learnt little context


# -------------------------------------------------------------------------------------------------------------
# Findings: sentences built from the measured numbers
# -------------------------------------------------------------------------------------------------------------

def _mib(b: Any) -> str:
    return mib(number(b))


def _finding_memory(base: pd.Series, rev: pd.Series) -> str | None:
    b, r = number(base["peak_memory_bytes"]), number(rev["peak_memory_bytes"])
    if not b or r is None:
        return None
    return (f"At batch {int(base['batch_size'])} the reversible trunk ({rev['trunk']}) used {r / b:.2f}x the "
            f"baseline's peak memory ({_mib(r)} vs {_mib(b)}).")


def _finding_maxbatch(mbs: tuple[int, int, int], rev_trunk: str) -> str:
    b, r, budget = mbs
    return (f"Under one budget of {_mib(budget)} the baseline fits batch {b} and the reversible trunk ({rev_trunk}) "
            f"batch {r}: {r / b:.2f}x.")


def _finding_val(base: pd.Series, rev: pd.Series, what: str) -> str | None:
    eq = equal_tokens_val(base, rev)
    if eq is None:
        return None
    tokens, b, r = eq
    out = (f"{what}, after {tokens:,} tokens the validation loss was {r:.3f} (reversible) vs {b:.3f} (baseline): "
           f"a difference of {r - b:+.3f} nats.")
    sb, sr = number(base.get("steps")), number(rev.get("steps"))
    if sb and sr and sb != sr:
        out += (f" The same tokens took {int(sr):,} optimizer steps (reversible) against {int(sb):,} (baseline): "
                f"at a fixed token budget a larger batch means fewer, less noisy steps, so the comparison mixes "
                f"the trunk with the step count.")
    return out


def _finding_recon(df: pd.DataFrame) -> str | None:
    sentence = recon_sentence(df)
    return None if sentence is None else sentence[0].upper() + sentence[1:]


def _finding_deep(base: pd.Series, deep: pd.Series, search: dict | None) -> str | None:
    """How much depth the saved memory bought (its loss against run 2 is the headline's Spent line)."""
    lb, ld = number(base["n_layer"]), number(deep["n_layer"])
    pb, pd_ = number(base["peak_memory_bytes"]), number(deep["peak_memory_bytes"])
    if lb is None or ld is None:
        return None
    if deep_capped(search):
        used = f", peaking at {_mib(pd_)} of the {_mib(pb)} allowed" if pb and pd_ else ""
        return (f"The depth search stopped at its cap of {int(ld)} layers (the chapter's `deep_max_layers`, which "
                f"bounds the deep run's training time), not at the memory limit{used}: {ld / lb:.2f}x the "
                f"baseline's {int(lb)} layers is a lower bound.")
    within = f" within {_mib(search['budget_bytes'])}" if search and search.get("budget_bytes") else ""
    mem = f", peaking at {_mib(pd_)}" if pd_ else ""
    return (f"The deepest reversible model{within} at batch {int(deep['batch_size'])} has {int(ld)} layers to "
            f"the baseline's {int(lb)} ({ld / lb:.2f}x{mem}).")


def stalled_start(run_dir, context_free: float | None, other_dir=None, label: str = "The reversible max-batch run") -> str | None:
    """Why a run can fall behind step for step, read from its log (`run_dir`): a stretch on the context-free line
    (at least a tenth of its steps, and 10), set beside its warm-up, its peak rate and its largest early gradient
    norm; `other_dir` (run 1b) gives a warm-up to compare. None when the run did not stall or its log or context-free
    loss is missing."""
    unigram = number(context_free)
    st = run_start(run_dir, unigram) if run_dir and unigram is not None else None
    if st is None or not st.stalled:
        return None
    ost = run_start(other_dir, unigram) if other_dir else None
    theirs = f" (run 1b's: {ost.warmup_steps})" if ost else ""
    return (f"{label} stalled: its running-mean training loss sat within {PLATEAU_NATS} nats of the context-free line "
            f"({unigram:.2f}) for {st.plateau_steps} consecutive steps of its {st.steps}, learning token frequencies and little "
            f"else. Its warm-up lasted {counted(st.warmup_steps, 'step')}{theirs} (the recipe's floor is "
            f"{WARMUP_FLOOR_STEPS}) up to its peak learning rate {st.peak_lr:.4f}, and its gradient norm peaked at "
            f"{st.max_grad_norm:.1f} at step {st.max_grad_step} ({st.max_grad_norm / st.median_grad_norm:.0f}x its "
            f"median). A few large steps at a high rate before Adam's moment estimates settle can leave a model on "
            f"that line; the recipe sweep above says which of rate and warm-up this batch needed.")


def _finding_stall(rev_max: pd.Series, base_max: pd.Series) -> str | None:
    """Whether the reversible max-batch run stalled on the context-free line, from its log."""
    if not rev_max.get("path"):
        return None
    return stalled_start(rev_max["path"], rev_max.get("unigram_val_loss"), base_max.get("path") or None,
                         label="The reversible max-batch run")


def _finding_unigram(df: pd.DataFrame) -> str | None:
    u = unigram_loss(df)
    if u is None:
        return None
    ended = [(r, float(r["final_val_loss"])) for _, r in main_runs(df).iterrows()
             if number(r.get("final_val_loss")) is not None]
    out = (f"A context-free model (each token by its training frequency) scores {u:.3f} nats: only what a run "
           f"ends below that comes from reading context.")
    near = [r for r, v in ended if v > u - UNIGRAM_MARGIN]
    if near:   # one sentence for all of them: the same lesson, said once, naming the shorter list
        def name(r: pd.Series) -> str:
            return f"{r['run']} ({int(r['steps']):,} steps)" if number(r.get("steps")) else str(r["run"])
        far = [r for r, _ in ended if all(r is not n for n in near)]
        each = (", ".join(name(r) for r in near) if len(near) <= len(far) or not far else
                "all but " + ", ".join(str(r["run"]) for r in far))
        out += (f" Within {UNIGRAM_MARGIN} nats of that line, {len(near)} of {len(ended)} runs ({each}) learnt token "
                f"frequencies and little else.")
    return out


def _finding_screening(df: pd.DataFrame) -> str | None:
    scr = df.attrs.get("screening") or {}
    chosen = scr.get("chosen")
    n = int(df["screening"].sum())
    if not chosen:
        return f"{n} screening runs present, no choice recorded." if n else None
    rows = scr.get("runs") or []
    return (f"The screening compared {counted(len(rows) or n, 'candidate')} on {counted(n, 'short run')}, one seed "
            f"each, and chose {chosen.get('trunk')} at h = {format_number(chosen.get('h'))} on the "
            f"{chosen.get('stream', 'fp32')} stream.")


def _on_gpu(df: pd.DataFrame) -> bool:
    return any("cuda" in str(d).lower() for d in main_runs(df)["device"].dropna())


def _finding_published(df: pd.DataFrame, mb: dict | None) -> str | None:
    """The measured ratios beside the published ones; without a GPU, the max batch and tokens/s ratios are left to
    `limits`, which names them as what this machine could not reproduce."""
    h = headline(df, mb).set_index("key")
    parts = []
    keys = (("peak_memory", "peak memory"), ("max_batch", "max batch"), ("tokens_per_s", "tokens/s"))
    for key, what in keys if _on_gpu(df) else keys[:1]:
        r = number(h.loc[key, "ratio"])
        if r is not None:   # tokens/s is the interleaved bench's (`results.headline`), with its verdict
            s = bench_speed(df.attrs.get("bench"), main_run(df, REV)) if key == "tokens_per_s" else None
            said = f"; {speed_verdict(s)}" if s is not None else ""
            parts.append(f"{what} {r:.2f}x (published {h.loc[key, 'published_ratio']:.2f}x{said})")
    # a cross-entropy's ratio means nothing across corpora: the loss gap is read in nats
    b, r = number(h.loc["val_loss", "baseline"]), number(h.loc["val_loss", "reversible"])
    if b is not None and r is not None:
        ref = published_reference().set_index("key").loc["val_loss"]
        parts.append(f"validation loss {r - b:+.3f} nats (published {ref['reversible'] - ref['baseline']:+.3f}, on "
                     f"another corpus and model)")
    if not parts:
        return None
    return f"Reversible against baseline, here and as published ({PUBLISHED_SOURCE}): " + "; ".join(parts) + "."


def _finding_streams(df: pd.DataFrame) -> str | None:
    """Run 3 against run 3b: one trunk at its own max batch on two streams; an unreliable run flagged."""
    t = stream_runs(df)
    if len(t) < 2:
        return None
    a, b = t.iloc[0], t.iloc[1]
    wide, narrow = (a, b) if a["stream"] != "fp32" else (b, a)
    loss = lambda r: format_value(r["final_val_loss"], "{:.3f}")  # noqa: E731
    out = (f"Run 3b ({wide['trunk']} on the {wide['stream']} stream at its own max batch) ended at {loss(wide)} "
           f"against {loss(narrow)} on {narrow['stream']}")
    if wide["batch"] and narrow["batch"]:
        out += f", at {wide['batch'] / narrow['batch']:.2f}x its batch (their speeds: {TIMED_APART})"
    out += "." + stream_confounds(df, a, b)
    for _, r in t.iterrows():
        if r["reliable"] is not None and not r["reliable"]:
            out += f" {r['run']} is {r['why']}."
    return out


def _finding_max_batch_views(df: pd.DataFrame) -> str | None:
    """What the equal-tokens / equal-steps table does not say by itself: the steps the runs took, and which ended
    on or above the context-free line (positive "below context free" = below it)."""
    v = max_batch_views(df)
    if len(v) < 2:
        return None
    out = f"The max-batch runs took {v['steps'].min():,.0f} to {v['steps'].max():,.0f} optimizer steps"
    above = v[v["below_context_free"].notna() & (v["below_context_free"] <= 0)]
    if len(above):
        each = ", ".join(f"{r['run']} {-r['below_context_free']:.3f} nats above it" for _, r in above.iterrows())
        return out + f"; ended on or above the context-free line: {each}."
    below = v["below_context_free"].dropna()
    return out + (f"; all ended {below.min():.3f} to {below.max():.3f} nats below the context-free line."
                  if len(below) else ".")


def _finding_screening_held(df: pd.DataFrame) -> str | None:
    t = screening_check(df)
    if len(t) < 2 or t["final_val_loss"].isna().any():
        return None
    pick, second = t.iloc[0], t.iloc[1]
    name = lambda r: f"{r['trunk']} h={r['h']:g} {r['stream']}"  # noqa: E731
    diff = pick["final_val_loss"] - second["final_val_loss"]
    tie = seed_tie(df.attrs.get("seeds"))   # one seed each: the tie the seed spread implies, where measured
    verdict = {-1: "held: the pick ended lower, beyond the tie margin", 0: "held within the tie margin",
               1: "did not hold: the runner-up ended lower, beyond the tie margin"}[side_of_tie(diff, tie)]
    verdict += f" ({tie.text()})"
    short = (f" (screening {format_value(pick['screening_val_loss'], '{:.3f}')} vs "
             f"{format_value(second['screening_val_loss'], '{:.3f}')})")
    return (f"At the full budget ({pick['tokens']:,.0f} tokens) the screening's pick {name(pick)} reached "
            f"{pick['final_val_loss']:.3f}, the runner-up {name(second)} {second['final_val_loss']:.3f}{short}: "
            f"the choice {verdict}.")


def findings(df: pd.DataFrame, maxbatch: dict | None = None, beside_headline: bool = False) -> list[str]:
    """Sentences stating what the runs measured; runs that are missing are named instead of guessed. With
    `beside_headline` (REPORT.md), the sentences its headline already says are left out: memory, speed and loss at
    the same batch, the max batch and what it bought; the published ratios stay (the headline does not give them)."""
    mb = maxbatch_of(df, maxbatch)
    if not len(df):
        return [f"No runs found for profile {df.attrs.get('profile', '?')!r} under "
                f"{df.attrs.get('results_dir', '?')}: run the training notebooks (or `python -m rev workbook`) "
                f"first.", *broken_lines(df)]
    base, rev = main_run(df, BASE), main_run(df, REV)
    base_max, rev_max, deep = main_run(df, BASE_MAX), main_run(df, REV_MAX), main_run(df, REV_DEEP)
    said = beside_headline   # the headline says these: REPORT.md says each thing once
    out: list[str | None] = [_finding_screening(df)]
    if base is not None and rev is not None and not said:
        out += [_finding_memory(base, rev), _finding_val(base, rev, "At the same batch")]
    mbs = max_batches_found(mb, main_reversible_trunk(df, mb))
    if mbs and not said:
        out.append(_finding_maxbatch(mbs, main_reversible_trunk(df, mb) or "reversible"))
    if base_max is not None and rev_max is not None:
        if not said:
            out.append(_finding_val(base_max, rev_max,
                                    f"Each at its own max batch ({int(base_max['batch_size'])} vs "
                                    f"{int(rev_max['batch_size'])})"))
        out.append(_finding_stall(rev_max, base_max))
    if not said:   # REPORT.md tables the max-batch runs two ways, with each run's place against the context-free line
        out.append(_finding_max_batch_views(df))
    out += [_finding_streams(df), loss_head_finding(df.attrs.get("loss_heads"))]
    if base is not None and deep is not None:
        out.append(_finding_deep(base, deep, deep_search(mb)))
    out.append(_finding_screening_held(df))
    out.append(_finding_recon(df))
    out.append(_finding_unigram(df))
    out.append(_finding_published(df, mb))
    devices = sorted(set(main_runs(df)["device"].dropna().astype(str)))
    if len(devices) > 1:
        out.append(f"Caution: the main runs come from {len(devices)} devices ({'; '.join(devices)}); memory and "
                   f"speed compare only within one device.")
    missing = df.attrs.get("missing") or []
    if missing:
        out.append("Not present (so not compared): " + ", ".join(missing) + ".")
    return [s for s in out + broken_lines(df) if s]


def broken_lines(df: pd.DataFrame) -> list[str]:
    """One sentence per run whose files could not be read (`load_runs`' ``broken``): left out of every table and
    comparison, named here with the file and why."""
    return [f"Broken, so left out: {why}" for why in (df.attrs.get("broken") or {}).values()]


def _depth_line(df: pd.DataFrame, maxbatch: dict | None) -> str | None:
    """Depth bought with the saved memory, and whether the deeper model ended lower than the shallow ones."""
    h = headline(df, maxbatch).set_index("key")
    ratio = number(h.loc["deep_layers", "ratio"])
    if ratio is None:
        return None
    out = f"**Depth**: {ratio:.2f}x the baseline's layers fit its memory at its batch"
    deep = main_run(df, REV_DEEP)
    others = [(r["label"], number(r["final_val_loss"])) for r in (main_run(df, BASE), main_run(df, REV))
              if r is not None and number(r["final_val_loss"]) is not None]
    if deep is not None and number(deep["final_val_loss"]) is not None and others:
        d, best = float(deep["final_val_loss"]), min(v for _, v in others)
        tie = seed_tie(df.attrs.get("seeds"))
        verdict = {-1: f"the lowest of them by more than the tie ({tie.text()})",
                   0: f"within the tie margin of the best ({tie.text()}), a tie",
                   1: "higher: depth did not pay on this budget"}[side_of_tie(d - best, tie)]
        out += (f"; the deep run ended at {d:.3f} against " + ", ".join(f"{lab} {v:.3f}" for lab, v in others)
                + f": {verdict}")
    return out + "."


def takeaways(df: pd.DataFrame, maxbatch: dict | None = None) -> list[str]:
    """Short lines for the end of notebook 07: the four headline lines (memory, loss, batch, throughput), then
    depth and exactness, each computed; comparisons whose runs are missing say so."""
    if main_run(df, BASE) is None and main_run(df, REV) is None:
        return ["No comparison possible yet: the baseline and reversible runs are not both present."]
    out = headline_lines(df, maxbatch) + [_depth_line(df, maxbatch), exactness_line(df)]
    return [s for s in out if s]


def exactness_line(df: pd.DataFrame) -> str | None:
    """The takeaway on exactness: the same sentence as the report's finding (`qualifiers.recon_sentence`)."""
    sentence = recon_sentence(df)
    return None if sentence is None else f"**Exactness**: {sentence}"


def takeaways_markdown(df: pd.DataFrame, maxbatch: dict | None = None) -> str:
    """`takeaways` as a Markdown section, for the end of notebook 07."""
    return "## Takeaways\n\n" + "\n".join(f"- {line}" for line in takeaways(df, maxbatch))


# -------------------------------------------------------------------------------------------------------------
# REPORT.md
# -------------------------------------------------------------------------------------------------------------

_FIGURES = [("loss_vs_tokens", "Loss against tokens"), ("val_loss", "Validation loss"),
            ("peak_memory", "Peak memory"), ("max_batch", "Max batch under one budget"),
            ("tokens_per_s", "Throughput"), ("reconstruction_error", "Reconstruction error")]


_LOSS_HEAD_FIGURE = [("loss_heads", "Max batch by loss head")]
REPORT_FIGURES = {f"{stem}.png" for stem, _ in _FIGURES + _LOSS_HEAD_FIGURE}   # what plots/ holds of the report's


def text_table(t: pd.DataFrame, fmts: dict[str, str] | None = None) -> pd.DataFrame:
    """`t` as text for a table: `tables.tidy` (whole numbers as integers, 4 significant figures, a dash where a
    value is missing); `fmts` (column -> format) only where a column needs its own, such as a signed difference."""
    out = tidy(t, headers=False)
    for c, f in (fmts or {}).items():
        if c in out:
            out[c] = [format_value(v, f) for v in t[c]]
    return out.rename(columns=header)


_SIGNED = {"below_context_free": "{:+.3f}"}
SECTIONS = ("views", "streams", "heads", "screening")


def assignment_sections(df: pd.DataFrame, parts: tuple[str, ...] = SECTIONS, level: int = 2,
                        tables: tuple[str, ...] = SECTIONS) -> list[str]:
    """REPORT.md's sections (Markdown lines) on the max-batch runs (both views), run 3b, the loss-head ablation
    and the screening's runner-up, those named in `parts`, with headings of `level`: each finding computed from
    its table, and the table itself for the parts named in `tables` (REPORT.md leaves out those whose rows its
    runs table or a figure shows already); a section whose runs are absent is left out."""
    h = "#" * level
    lines: list[str] = []
    table = lambda part, t: [markdown_table(t), ""] if part in tables else []  # noqa: E731
    views = max_batch_views(df) if "views" in parts else []
    if len(views):
        lines += [f"{h} Max-batch runs: equal tokens and equal steps", "", *table("views", text_table(views, _SIGNED)),
                  f"- {_finding_max_batch_views(df) or 'Only one max-batch run is present.'}", ""]
    streams = stream_runs(df) if "streams" in parts else []
    if len(streams):
        t = text_table(streams.drop(columns="why"))   # the reason is said once, in the finding, where it is not "reliable"
        t["reliable"] = ["—" if v is None else ("yes" if v else "NO") for v in streams["reliable"]]
        lines += [f"{h} Run 3b: one reversible trunk, two streams, each at its max batch", "", *table("streams", t),
                  f"- {_finding_streams(df) or 'Run 3b is not present yet (notebook 06).'}", ""]
    heads = loss_head_table(df.attrs.get("loss_heads") if "heads" in parts else None)
    if len(heads):
        budget = (df.attrs.get("loss_heads") or {}).get("budget_bytes")
        under = f" under {budget / MIB:,.0f} MiB" if budget else ""
        lines += [f"{h} Loss-head ablation: max batch by loss head{under}", "", *table("heads", text_table(heads)),
                  f"- {loss_head_finding(df.attrs.get('loss_heads')) or 'Not every head was searched.'}", ""]
    check = screening_check(df) if "screening" in parts else []
    if len(check) == 2:
        lines += [f"{h} Did the screening's choice hold at the full budget?", "", *table("screening", text_table(check)),
                  f"- {_finding_screening_held(df)}", ""]
    return lines


def corpus_used(df: pd.DataFrame) -> str:
    """The corpora the runs read, as their summaries record them (source and data folder), e.g. "`synthetic`
    (data folder `synthetic-instead-of-tinystories`)"; runs from before that was recorded are not named."""
    used = df[["data_source", "data"]].dropna().drop_duplicates() if len(df) else pd.DataFrame()
    return ", ".join(f"`{r.data_source}` (data folder `{r.data}`)" for r in used.itertuples()) or "not recorded"


def bullet_list(lines: list[str]) -> str:
    """`lines` as a Markdown list; a line ending in ":" heads the lines after it that start in lower case (the
    items it introduces), which are indented under it."""
    out, under = [], False
    for line in lines:
        under = under and line[:1].islower()
        out.append(("  - " if under else "- ") + line)
        under = under or line.endswith(":")
    return "\n".join(out)


def _section(title: str, lines: list[str]) -> list[str]:
    return [title, "", bullet_list(lines), ""] if lines else []


def report_markdown(df: pd.DataFrame, maxbatch: dict | None = None, all_runs: pd.DataFrame | None = None) -> str:
    """The text of REPORT.md (figures referenced as plots/<name>.png): the headline in computed lines, including
    what spending the saved memory did not win; the evidence (the runs, the findings the headline does not say,
    the max-batch runs two ways, the figures); one line per companion chapter; what this machine could not
    measure. Each thing is said once: notebooks 03, 06 and 07 show the screening, max-batch and other tables."""
    mb = maxbatch_of(df, maxbatch)
    profile = df.attrs.get("profile", "?")
    devices = sorted(set(df["device"].dropna().astype(str))) if len(df) else []
    lines = [f"# Report: profile `{profile}`", "",
             f"Measured by the runs in `{profile}/` ({', '.join(devices) if devices else 'no runs yet'}), except "
             f"figures marked *published* ({PUBLISHED_SOURCE}). Corpus: {corpus_used(df)}.", "",
             *_section("## Headline", headline_lines(df, mb)),
             "## Evidence", "",
             "### Runs", "", markdown_table(runs_table(main_runs(df))) if len(main_runs(df)) else "No main runs.", "",
             *_section("### Findings", findings(df, mb, beside_headline=True))]
    views = max_batch_views(df)
    if len(views) > 1:
        views = views.drop(columns=[c for c in ("tokens", "final_val_loss") if c in views])   # the runs table's
        lines += ["### Max-batch runs: equal tokens and equal steps", "", markdown_table(text_table(views, _SIGNED)),
                  ""]
    lines += ["### Figures", ""]
    for stem, title in _FIGURES + (_LOSS_HEAD_FIGURE if df.attrs.get("loss_heads") else []):
        lines += [f"![{title}]({PLOTS_DIR}/{stem}.png)", ""]
    if all_runs is not None and all_runs["profile"].nunique() > 1:
        t = runs_table(all_runs)
        t.insert(0, "profile", all_runs["profile"].tolist())
        lines += ["### All results in this folder (by device)", "", markdown_table(t), ""]
    folder = Path(df.attrs.get("results_dir") or ".") / str(profile)
    lines += [*_section("## Companion chapters", companion_findings(folder)),
              *_section("## Not measured on this machine", limits(df))]
    return "\n".join(lines)


def write_report(results_root: str | Path, profile: str, force: bool = False) -> Path:
    """Write results/<profile>/REPORT.md and plots/*.png; returns the REPORT.md path.

    The text is composed and the figures drawn into a temporary folder before anything is moved into place, so
    a failure leaves the previous report as it was. A folder without runs is an error; a run whose files cannot be
    read is named as broken and the rest is reported. plots/ is replaced whole: a file in it that is not one of
    the report's figures (`REPORT_FIGURES`) is replaced only with `force` (`rev.base.files.check_output`).
    """
    profile_dir = Path(results_root) / profile
    if not profile_dir.is_dir():
        raise ValueError(f"no results for profile {profile!r} under {results_root}: run the workbook "
                         f"(`python -m rev workbook --profile {profile}`) or merge an archive first")
    df = load_runs(results_root, profile)
    if not len(df) and not df.attrs["broken"]:
        raise ValueError(f"no runs in {profile_dir}: nothing to report; run the workbook (`python -m rev workbook "
                         f"--profile {profile}`) or merge an archive first")
    plots = profile_dir / PLOTS_DIR
    theirs = [p for p in plots.rglob("*") if p.is_file() and p.name not in REPORT_FIGURES] if plots.is_dir() else []
    check_output(profile_dir, theirs, force=force, what="--results")
    text = report_markdown(df, all_runs=load_all(results_root)) + "\n"
    tmp = Path(tempfile.mkdtemp(prefix=".report-", dir=profile_dir))
    try:
        save_plots(df, tmp / PLOTS_DIR)
        swap_in(tmp / PLOTS_DIR, profile_dir / PLOTS_DIR)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return write_text(profile_dir / REPORT_NAME, text)


# -------------------------------------------------------------------------------------------------------------
# Command line
# -------------------------------------------------------------------------------------------------------------

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default="auto",
                   help="profile folder under --results ('auto': the GPU profile with CUDA, else cpu; with "
                        "--merge, the archive's profile)")
    p.add_argument("--results", type=folder_arg, default=Path("results"), help="results root (default: results)")
    p.add_argument("--merge", type=Path, metavar="ARCHIVE", help="first unpack a results zip made on another machine")
    p.add_argument("--force", action="store_true", help="replace plots/ although it holds files that are not the "
                                                        "report's figures")


def _print_summary(df: pd.DataFrame, path: Path) -> None:
    print(format_headline(headline(df)).to_string(index=False))
    print()
    for s in findings(df):
        print(f"- {s}")
    print(f"\nwrote {path}")


def run_cli(args: argparse.Namespace) -> int:
    from ...base.profiles import resolve_profile_name

    profiles: list[str] = []
    if args.merge is not None:
        written = merge(args.merge, args.results)
        for d in written:
            print(f"merged {args.merge} into {d}")
        profiles = [d.name for d in written] if args.profile == "auto" else []
    if not profiles:
        name = args.profile
        if name == "auto" or not (args.results / name).is_dir():
            name = resolve_profile_name(name)
        profiles = [name]
    for profile in profiles:
        path = write_report(args.results, profile, args.force)
        _print_summary(load_runs(args.results, profile), path)

    return 0
