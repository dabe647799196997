"""Notebook 07 (and `python -m rev report`): the report's figures, one function each, each returning a matplotlib
Figure drawn from the frame `rev.chapters.shared.results.load_runs` reads; `plots` gives them all by file stem.

A run that is missing leaves its bar or curve out, and an empty panel says what is not there.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...core.model import TRUNKS
from ...core.reversible import RECON_LIMIT
from .results import (BASE, BASE_MAX, MIB, REV, REV_DEEP, REV_MAX, REV_MAX_STREAM, RUNNER_UP, deep_capped,
                      format_value, loss_head_table, main_runs, maxbatch_of, number, unigram_loss)
from .palette import SCREENING, integrator_colour, run_colour
from .run_log import read_log

# one colour per run across the book (`palette`): blues for the baseline, warm colours for the reversible runs
_COLOURS = {run: run_colour(run) for run in (BASE, BASE_MAX, REV, REV_MAX, REV_DEEP, REV_MAX_STREAM, RUNNER_UP)}
_SCREEN_COLOUR = SCREENING


def zero_aware_log_axis(ax, values, axis: str = "y") -> None:
    """Log-like axis that can also show exact zeros: symlog, linear only below the smallest nonzero value.

    log(0) is undefined, yet "exactly 0" is often the point (the fixed stream, a gradient equal to its twin's),
    so zeros sit on the axis floor instead of vanishing from the plot.
    """
    vals = np.abs(np.asarray(values, dtype=float).ravel())
    positive = vals[vals > 0]
    floor = 10.0 ** (np.floor(np.log10(positive.min())) - 1) if positive.size else 1e-18
    top = None if positive.size else 1e-15  # all zeros: keep a few decades visible above the floor
    if axis == "y":
        ax.set_yscale("symlog", linthresh=floor, linscale=0.3)
        ax.set_ylim(bottom=0, top=top)
    else:
        ax.set_xscale("symlog", linthresh=floor, linscale=0.3)
        ax.set_xlim(left=0, right=top)


def _plt():
    import matplotlib.pyplot as plt  # imported late: `python -m rev report --help` stays fast
    return plt


def _empty(ax, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="grey")
    ax.set_xticks([])
    ax.set_yticks([])


def _colour(run: str) -> str:
    return _COLOURS.get(run, _SCREEN_COLOUR)


def _bar_labels(df: pd.DataFrame) -> list[str]:
    return [f"{lab}\n{trunk}, b={format_value(b, '{:.0f}')}"
            for lab, trunk, b in zip(df["label"], df["trunk"], df["batch_size"])]


def token_axis(ax) -> None:
    """Tick labels like 200k and 1.5M on a tokens x-axis (raw counts overlap)."""
    from matplotlib.ticker import FuncFormatter

    def fmt(x: float, _pos: int) -> str:
        return f"{x / 1e6:g}M" if abs(x) >= 1e6 else f"{x / 1e3:g}k" if abs(x) >= 1e3 else f"{x:g}"
    ax.xaxis.set_major_formatter(FuncFormatter(fmt))


def plot_loss_vs_tokens(df: pd.DataFrame, smooth: int = 10):
    """Training loss (smoothed) and validation loss against tokens seen, for every main run; a third panel zooms
    on the second half of the runs at the baseline's batch, whose curves end too close together to read apart
    on the full scale."""
    plt = _plt()
    fig, (ax_t, ax_v, ax_z) = plt.subplots(1, 3, figsize=(15, 4), gridspec_kw={"width_ratios": (1, 1, 0.8)})
    runs = main_runs(df)
    base = runs[runs["run"] == BASE]
    batch = int(base["batch_size"].iloc[0]) if len(base) else None
    zoomed = []
    for _, r in runs.iterrows():
        log = read_log(r["path"])
        if log.empty:
            continue
        c, lab = _colour(r["run"]), f"{r['label']} ({r['trunk']}, b={int(r['batch_size'])})"
        ax_t.plot(log["tokens"], log["loss"], color=c, alpha=0.2, lw=0.8)
        ax_t.plot(log["tokens"], log["loss"].rolling(smooth, min_periods=1).mean(), color=c, label=lab)
        ev = log.dropna(subset=["val_loss"])
        ax_v.plot(ev["tokens"], ev["val_loss"], "o-", color=c, label=lab, ms=4)
        if batch is not None and int(r["batch_size"]) == batch and len(ev):
            late = ev[ev["tokens"] >= ev["tokens"].max() / 2]
            ax_z.plot(late["tokens"], late["val_loss"], "o-", color=c, ms=5)
            zoomed.append((float(late["tokens"].iloc[-1]), float(late["val_loss"].iloc[-1]), c))
    if not len(runs):
        _empty(ax_t, "no main runs present")
        _empty(ax_v, "no main runs present")
    if not zoomed:
        _empty(ax_z, "no run at the baseline's batch")
    _end_labels(ax_z, zoomed)
    unigram = unigram_loss(df)
    if unigram is not None:
        for ax in (ax_t, ax_v):
            ax.axhline(unigram, color="k", ls=":", lw=1, label="context-free (unigram) model")
    ax_t.set(title="training loss (faint: raw, solid: running mean)", xlabel="tokens", ylabel="loss (nats/token)")
    ax_v.set(title="validation loss", xlabel="tokens", ylabel="loss (nats/token)")
    ax_z.set(title=f"zoom: validation, batch {batch}, second half" if batch else "zoom", xlabel="tokens")
    ax_z.margins(x=0.15)
    for ax in (ax_t, ax_v, ax_z):
        token_axis(ax)
    handles, labels = ax_v.get_legend_handles_labels()
    if labels:  # below the panels, where it hides no curve
        fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06 * ((len(labels) + 2) // 3), 1, 1))
    return fig


def _end_labels(ax, ends: list[tuple[float, float, str]]) -> None:
    """Label each curve's last value just right of it, in its colour, nudged apart where two end close together
    (call after the curves are drawn: the nudge is a share of the axis' range)."""
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    gap, placed = 0.06 * (y1 - y0), []
    for x, y, c in sorted(ends, key=lambda e: e[1]):
        at = max(y, placed[-1] + gap) if placed else y
        placed.append(at)
        ax.text(x + 0.02 * (x1 - x0), at, f"{y:.3f}", color=c, fontsize=8, va="center", ha="left")


def _bars(df: pd.DataFrame, col: str, title: str, ylabel: str, fmt: str, empty: str, log: bool = False):
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(df) + 2), 4))
    vals = pd.to_numeric(df[col], errors="coerce") if len(df) else pd.Series(dtype=float)
    present = df[vals.notna()] if len(df) else df
    if not len(present):
        _empty(ax, empty)
    else:
        v = vals[vals.notna()]
        x = np.arange(len(present))
        colours = [_colour(r) for r in present["run"]]
        ax.set_xticks(x, _bar_labels(present), fontsize=8)
        if col == "final_val_loss" or log:
            # dots: a loss axis zoomed to the runs' range, or a log axis, has no zero a bar's length could start at
            ax.scatter(x, v, color=colours, s=40, zorder=3)
            for xi, y in zip(x, v):
                ax.annotate(fmt.format(y), (xi, y), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
            ax.grid(axis="y", alpha=0.3)
            if log:
                ax.set_yscale("log")
            else:
                lo, hi = float(v.min()), float(v.max())
                pad = max(0.05, (hi - lo) * 0.15)
                ax.set_ylim(max(0.0, lo - pad), hi + 2 * pad)
        else:
            bars = ax.bar(x, v, color=colours)
            ax.bar_label(bars, labels=[fmt.format(y) for y in v], fontsize=8)
            ax.set_ylim(0, float(v.max()) * 1.15)
    ax.set(title=title, ylabel=ylabel)
    fig.tight_layout()
    return fig


def plot_val_loss(df: pd.DataFrame):
    """Final validation loss of each main run."""
    runs = main_runs(df)
    tok = ", ".join(f"{t:,}" for t in sorted({int(t) for t in runs["tokens"].dropna()})) if len(runs) else ""
    return _bars(runs, "final_val_loss", f"final validation loss (tokens: {tok})" if tok else "final validation loss",
                 "loss (nats/token)", "{:.3f}", "no validation loss yet")


def _bench_label(row: dict, stored: bool) -> str:
    """A bench bar's label: its trunk, and how it ran where one trunk was timed twice (sliced and whole)."""
    how = "\n(stored twin)" if stored else ""
    if row.get("batch_slice"):
        how += f"\n(slices of {row['batch_slice']})"
    elif row.get("batch_slice") == 0:
        how += "\n(whole batch)"
    return row["trunk"] + how


def plot_tokens_per_s(df: pd.DataFrame):
    """Training throughput from notebook 05's interleaved bench (`same_batch_bench.json`), the only timing that
    compares trunks: each trunk's median step as tokens/s at run 2's batch, its whisker the interquartile range of
    its rounds (one step of every trunk per round, so a slow moment hits them all). The training runs were timed
    one after another and are not drawn: their bars would invite a comparison no verdict may draw."""
    plt = _plt()
    bench = df.attrs.get("bench") or {}
    rows = [r for r in bench.get("runs") or [] if r.get("step_times")]
    seq_len, batch = number(bench.get("seq_len")), number(bench.get("batch"))
    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(rows) + 2), 4))
    if not rows or not seq_len or not batch:
        _empty(ax, "no interleaved bench (notebook 05): runs timed apart are not compared")
        ax.set(title="training throughput")
        fig.tight_layout()
        return fig
    speeds = [[batch * seq_len / t for t in r["step_times"]] for r in rows]
    med = np.array([np.median(v) for v in speeds])
    lo, hi = (np.array([np.percentile(v, q) for v in speeds]) for q in (25, 75))
    x = np.arange(len(rows))
    stored = [TRUNKS[r["trunk"]].backward == "stored" and r["trunk"] != "residual" for r in rows]
    bars = ax.bar(x, med, color=[integrator_colour(r["trunk"]) for r in rows],
                  hatch=["//" if st else None for st in stored], edgecolor="white")
    ax.errorbar(x, med, yerr=[med - lo, hi - med], fmt="none", color="k", capsize=4,
                label="rounds: interquartile range")
    ax.bar_label(bars, labels=[f"{v:,.0f}" for v in med], fontsize=8, padding=8)
    ax.set_xticks(x, [_bench_label(r, st) for r, st in zip(rows, stored)], fontsize=8)
    ax.set_ylim(0, float(hi.max()) * 1.2)
    ax.legend(fontsize=8, loc="upper right")
    ax.set(ylabel="tokens/s (median step)",
           title=f"training throughput, interleaved bench at batch {int(batch)} ({len(speeds[0])} rounds)")
    ax.title.set_fontsize(9)
    fig.tight_layout()
    return fig


def plot_peak_memory(df: pd.DataFrame, maxbatch: dict | None = None):
    """Peak memory of a training step of each main run, with the max-batch budget when known."""
    mb = maxbatch_of(df, maxbatch)
    fig = _bars(main_runs(df), "peak_memory_mib", "peak memory of one training step", "MiB", "{:,.1f}",
                "no memory measurement yet")
    budget = number((mb or {}).get("budget_bytes"))
    if budget and len(main_runs(df)):
        ax = fig.axes[0]
        ax.axhline(budget / MIB, color="k", ls="--", lw=1, label=f"max-batch budget {_mib_short(budget)}")
        ax.set_ylim(0, max(ax.get_ylim()[1], budget / MIB * 1.1))
        ax.legend(fontsize=8)
    return fig


def _probe_points(ax, probes: list[dict], colour: Any, name: str) -> None:
    """Probes as measured: circles fit the budget, crosses do not (a probe that ran out of memory has no peak).
    A depth search's probes are placed at their layer count (`n_layer`; results written before it had its own
    key stored the layer count under `batch`)."""
    def x(p: dict) -> int:
        return p["n_layer"] if "n_layer" in p else p["batch"]

    probes = sorted(probes or [], key=x)
    fit = [(x(p), p["peak_bytes"] / MIB) for p in probes if p.get("fits") and p.get("peak_bytes")]
    miss = [(x(p), p["peak_bytes"] / MIB) for p in probes if not p.get("fits") and p.get("peak_bytes")]
    if fit:
        ax.plot(*zip(*fit), "o-", color=colour, label=f"{name}: fits")
    if miss:
        ax.plot(*zip(*miss), "x", color=colour, ms=8, label=f"{name}: over budget")


def _mib_short(b: float) -> str:
    v = b / MIB
    return f"{v:,.0f} MiB" if v >= 100 else f"{v:.1f} MiB"


def _budget_line(ax, budget: float | None) -> None:
    if budget:
        ax.axhline(budget / MIB, color="k", ls="--", lw=1, label=f"budget {_mib_short(budget)}")


def _search_colour(key: str) -> str:
    """A max-batch search in the colour of the run it sets: the residual's run 1b, the chosen trunk's run 3, the
    other stream's run 3b (its key names the stream: `midpoint_rev_fp64`)."""
    if key == "residual":
        return _COLOURS[BASE_MAX]
    return _COLOURS[REV_MAX_STREAM] if key.endswith(("_fp64", "_fp32", "_fixed")) else _COLOURS[REV_MAX]


def plot_max_batch(maxbatch: dict | None):
    """The max-batch searches: every probe's measured peak against its batch, and the batches found; when
    maxbatch.json also holds the depth search ('deep'), its probes against the layer count."""
    plt = _plt()
    mb = maxbatch or {}
    # "deep" is a search over the layer count at the baseline's batch, not over the batch: its own panel
    searches = {k: v for k, v in mb.items() if isinstance(v, dict) and "batch" in v and k != "deep"}
    deep = mb.get("deep") if isinstance(mb.get("deep"), dict) else None
    fig, axes = plt.subplots(1, 3 if deep else 2, figsize=(15 if deep else 11, 4))
    ax_p, ax_b = axes[0], axes[1]
    if not searches:
        _empty(ax_p, "no max-batch search (maxbatch.json)")
        _empty(ax_b, "no max-batch search (maxbatch.json)")
    else:
        colours = {k: _search_colour(k) for k in searches}
        for key, v in searches.items():
            _probe_points(ax_p, v.get("probes"), colours[key], key)
        budget = number(mb.get("budget_bytes")) or number(next(iter(searches.values())).get("budget_bytes"))
        _budget_line(ax_p, budget)
        ax_p.set(title="max-batch probes (real optimizer steps)", xlabel="batch", ylabel="peak MiB")
        ax_p.legend(fontsize=8)
        names = list(searches)
        vals = [int(searches[k]["batch"]) for k in names]
        bars = ax_b.bar(names, vals, color=[colours[k] for k in names])
        base = searches.get("residual", {}).get("batch")
        ax_b.bar_label(bars, labels=[f"{v}" + (f" ({v / base:.2f}x)" if base and k != "residual" else "")
                                     for k, v in zip(names, vals)], fontsize=8)
        ax_b.set_ylim(0, max(vals) * 1.15)
        ax_b.set(title="largest batch that fits" + (f" {_mib_short(budget)}" if budget else ""), ylabel="batch")
    if deep:
        ax_d = axes[2]
        _probe_points(ax_d, deep.get("probes"), _COLOURS[REV_DEEP], deep.get("trunk", "deep"))
        _budget_line(ax_d, number(deep.get("budget_bytes")))
        found = f"{deep.get('n_layer', '?')} layers" + (" (the search's cap)" if deep_capped(deep) else "")
        ax_d.set(title=f"depth probes at batch {deep.get('batch', '?')}\ndeepest fitting: {found}",
                 xlabel="layers", ylabel="peak MiB")
        from matplotlib.ticker import MaxNLocator
        ax_d.xaxis.set_major_locator(MaxNLocator(integer=True))   # a layer count has no fractions
        ax_d.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_reconstruction_error(df: pd.DataFrame):
    """Relative reconstruction error of every trained reversible trunk (screening runs in grey): dots on a log
    scale, an exact 0 a hollow dot on the floor, labelled."""
    plt = _plt()
    rev = df[pd.to_numeric(df["reconstruction_error"], errors="coerce").notna()] if len(df) else df
    fig, ax = plt.subplots(figsize=(max(5, 1.4 * len(rev) + 2), 4))
    if not len(rev):
        _empty(ax, "no reversible runs present")
    else:
        raw = pd.to_numeric(rev["reconstruction_error"])
        positive = raw[raw > 0]
        floor = (float(positive.min()) if len(positive) else RECON_LIMIT) / 30   # where an exact 0 is drawn
        x = np.arange(len(rev))
        colours = [_SCREEN_COLOUR if scr else _colour(r) for r, scr in zip(rev["run"], rev["screening"])]
        for xi, e, c in zip(x, raw, colours):   # dots on the log axis; an exact 0 hollow on the floor
            ax.plot([xi], [e if e > 0 else floor], "o", color=c, mfc=c if e > 0 else "white", ms=7, clip_on=False)
            ax.annotate("exactly 0" if e == 0 else f"{e:.1e}", (xi, e if e > 0 else floor), textcoords="offset points",
                        xytext=(0, 7), ha="center", fontsize=8)
        ax.set_xticks(x, [f"{lab}\n{t} h={h:g} {s}" for lab, t, h, s in zip(rev["label"], rev["trunk"], rev["h"],
                                                                            rev["stream"])], fontsize=7, rotation=20)
        ax.axhline(RECON_LIMIT, color="k", ls="--", lw=1, label=f"warning threshold {RECON_LIMIT:g}")
        ax.set_yscale("log")
        ax.set_ylim(floor / 2, RECON_LIMIT * 30)   # room above the threshold for the labels of the largest errors
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    ax.set(title="reconstruction error of the trained trunk (relative)", ylabel="|x - inverse(forward(x))| / |x|")
    fig.tight_layout()
    return fig


def plot_loss_heads(ablation: dict | None):
    """The loss-head ablation: max batch of each trunk with each loss head, grouped by head, each bar labelled
    with its batch (and the reversible / residual ratio above the reversible bar)."""
    plt = _plt()
    t = loss_head_table(ablation)
    fig, ax = plt.subplots(figsize=(7, 4))
    trunks = [c for c in t.columns if c not in ("loss_head", "reversible / residual")]
    if not trunks:
        _empty(ax, "no loss-head ablation (loss_heads.json)")
        return fig
    x, w = np.arange(len(t)), 0.8 / len(trunks)
    for i, trunk in enumerate(trunks):
        colour = _search_colour(trunk)   # as in the max-batch figure: the runs these batches set
        bars = ax.bar(x + (i - (len(trunks) - 1) / 2) * w, t[trunk], w, color=colour, label=trunk)
        ratio = t.get("reversible / residual") if trunk != "residual" else None
        ax.bar_label(bars, labels=[f"{b:.0f}" + (f" ({r:.2f}x)" if ratio is not None else "")
                                   for b, r in zip(t[trunk], ratio if ratio is not None else t[trunk])], fontsize=8)
    budget = number((ablation or {}).get("budget_bytes"))
    ax.set_xticks(x, [f"{h} head" for h in t["loss_head"]])
    ax.set_ylim(0, float(t[trunks].max().max()) * 1.2)
    ax.set(ylabel="max batch", title="max batch by loss head" + (f" under {_mib_short(budget)}" if budget else ""))
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


LEDGER_PARTS = ("state", "state gradients", "final norm", "loss head", "remainder")
_LEDGER_COLOURS = dict(zip(LEDGER_PARTS, ("#4c72b0", "#8fb0e0", "#55a868", "#c8a83c", "#b0b0b0")))


def _ledger_bars(ax, ledger: pd.DataFrame) -> None:
    names, left = list(ledger.index), np.zeros(len(ledger))
    for part in LEDGER_PARTS:
        if part in ledger:
            width = pd.to_numeric(ledger[part], errors="coerce").fillna(0.0).clip(lower=0).to_numpy()
            ax.barh(names, width, left=left, color=_LEDGER_COLOURS[part], label=part)
            left += width
    for y, total in enumerate(pd.to_numeric(ledger["measured"])):
        ax.text(left[y], y, f" {total:.2f} measured", va="center", fontsize=8)
    ax.set_xlim(0, float(left.max()) * 1.45)
    ax.invert_yaxis()
    ax.set_xlabel("MiB per sequence")


def plot_ledger(ledger: pd.DataFrame):
    """`searches.memory_ledgers` as one stacked bar per trunk: the parts the ledger models at the step's peak, then
    the measured remainder (for a stored trunk, the activations autograd keeps; a negative one, where the model
    counts more than was measured, draws nothing), the measured total labelled. Right: the trunks that recompute,
    on their own scale."""
    plt = _plt()
    recomputing = ledger[[TRUNKS[t].backward != "stored" for t in ledger["trunk"]]]
    fig, axes = plt.subplots(1, 2, figsize=(11, 1.2 + 0.6 * len(ledger)))
    _ledger_bars(axes[0], ledger)
    axes[0].set_title("where one more sequence's memory goes")
    _ledger_bars(axes[1], recomputing)
    axes[1].set_title("the trunks that recompute, on their own scale")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, ncol=len(labels), loc="lower center", frameon=False)
    fig.tight_layout(rect=(0, 0.1, 1, 1))  # room below the axes for the legend: it covers no bar
    return fig


def plots(df: pd.DataFrame, maxbatch: dict | None = None) -> dict[str, Any]:
    """Every report figure, by file stem (the loss-head ablation's only when it ran)."""
    mb = maxbatch_of(df, maxbatch)
    out = {"loss_vs_tokens": plot_loss_vs_tokens(df), "val_loss": plot_val_loss(df),
           "tokens_per_s": plot_tokens_per_s(df), "peak_memory": plot_peak_memory(df, mb),
           "max_batch": plot_max_batch(mb), "reconstruction_error": plot_reconstruction_error(df)}
    if df.attrs.get("loss_heads"):
        out["loss_heads"] = plot_loss_heads(df.attrs["loss_heads"])
    return out


def save_plots(df: pd.DataFrame, folder: str | Path, maxbatch: dict | None = None, dpi: int = 110) -> list[Path]:
    """Every report figure as ``folder/<stem>.png`` (the folder is created); returns the files written."""
    plt = _plt()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, fig in plots(df, maxbatch).items():
        fig.savefig(folder / f"{stem}.png", dpi=dpi)
        plt.close(fig)
        written.append(folder / f"{stem}.png")
    return written
