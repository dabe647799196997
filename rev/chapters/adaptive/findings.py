"""Notebook 09 (adaptive checkpointing): the figures that need more than a few lines, and the computed takeaways.

`frontier_figure` draws fidelity against memory (every fixed spacing, the tightest uniform spacing per count,
the settled adaptive layouts); `training_figure` the four panels of the training comparison; `takeaways` writes
the closing Markdown from the numbers the notebook measured.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..shared.palette import ARMS, OTHER, STREAMS
from ..shared.tables import counted
from .placement import uniform_layout
from .policy import AdaptivePolicy
from .sizes import ChapterSizes
from .training import training_verdict
from ..shared.verdicts import TIMED_APART, inside_by


def _frontier_panel(ax, rows: Sequence[dict], key: str, n_layer: int) -> None:
    # gradient error is drawn as 1 - cos (floored at 1e-9), reconstruction error as is (floored at 1e-12)
    value = (lambda r: max(1 - r[key], 1e-9)) if key == "grad_cos_min" else (lambda r: max(r[key], 1e-12))
    fixed = [r for r in rows if r["kind"] == "fixed"]
    ax.semilogy([r["n_kept"] for r in fixed], [value(r) for r in fixed], "s", color="0.7", label="any fixed spacing")
    equal = {r["keep"]: r for r in fixed}
    uni = [equal[uniform_layout(n_layer, k)] for k in sorted({r["n_kept"] for r in fixed})]
    ax.semilogy([r["n_kept"] for r in uni], [value(r) for r in uni], "s-", color=ARMS["control"],
                label="fixed spacing, tightest that fits")
    rival = [r for r in rows if r["kind"] == "boundary 1"]
    if rival:   # the layout a defect at layer 0 calls for: the rival to beat there, in the control's colour, hollow
        ax.semilogy([r["n_kept"] for r in rival], [value(r) for r in rival], "D", mfc="none", color=ARMS["control"],
                    label="fixed, keeping boundary 1")
    groups: dict[tuple, list[dict]] = {}
    for r in (r for r in rows if r["kind"] == "adaptive"):
        groups.setdefault(r["keep"], []).append(r)   # several thresholds often settle on one layout: one marker
    for i, (keep, rs) in enumerate(groups.items()):
        taus = sorted(r["setting"] for r in rs)
        ax.semilogy(rs[0]["n_kept"], value(rs[0]), "o", ms=10, mfc="none", color=ARMS["policy"],
                    label="adaptive (tau_warn)" if i == 0 else None)
        tag = f"{taus[0]:.0e}" if len(taus) == 1 else f"{taus[0]:.0e}..{taus[-1]:.0e}"
        ax.annotate(f"{tag} {list(keep)}", (rs[0]["n_kept"], value(rs[0])), fontsize=7, xytext=(6, 4),
                    textcoords="offset points")


def frontier_figure(fronts: Mapping[str, Sequence[dict]], n_layer: int, target_cos: float) -> plt.Figure:
    """One row per trunk of `frontier` rows: gradient error (left) and worst rebuilt-state error (right)
    against the number of kept states."""
    fig, axes = plt.subplots(len(fronts), 2, figsize=(11, 3.6 * len(fronts)), squeeze=False)
    for row, (trunk, rows) in enumerate(fronts.items()):
        axes[row, 0].axhspan(1e-9, 1e-6, color="0.93", label="below 1e-6: fp32 noise")
        _frontier_panel(axes[row, 0], rows, "grad_cos_min", n_layer)
        axes[row, 0].axhline(1 - target_cos, color="k", ls=":", lw=1, label="target")
        axes[row, 0].set(title=f"{trunk}: gradient error", xlabel="kept states", ylabel="1 - cos (worst parameter)")
        _frontier_panel(axes[row, 1], rows, "max_recon_error", n_layer)
        axes[row, 1].set(title=f"{trunk}: reconstruction", xlabel="kept states", ylabel="worst rebuilt-state error")
        for ax in axes[row]:
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def variant_colour(label: str) -> str:
    """A `compare_training` variant's colour: the adaptive policy, its fixed control, or the stream it runs on."""
    if "adaptive" in label:
        return ARMS["policy"]
    if label.startswith("fp32 fixed"):
        return ARMS["control"]
    return next((c for stream, c in (("fp64", STREAMS["fp64"]), ("fixed-point", STREAMS["fixed"])) if stream in label),
                OTHER)


def training_figure(run_logs: Mapping[str, Sequence[dict]], target_cos: float) -> plt.Figure:
    """Loss, largest probed defect, kept states and the fidelity checks of each variant of `compare_training`."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 6.5))
    styles = ["-", "--", "-.", ":", (0, (5, 1))]   # identical runs overlap exactly: the styles keep both visible
    for (label, rows), ls in zip(run_logs.items(), styles):
        df, c = pd.DataFrame(rows), variant_colour(label)
        axes[0, 0].plot(df["step"], df["loss"].rolling(4, min_periods=1).mean(), ls=ls, color=c, label=label)
        probes = df.dropna(subset=["defect_max"]) if "defect_max" in df else df.iloc[:0]
        if len(probes):
            axes[0, 1].semilogy(probes["step"], np.maximum(probes["defect_max"].astype(float), 1e-18), marker="o",
                                ls=ls, color=c, label=label)
        axes[1, 0].step(df["step"], df["n_kept"], where="post", ls=ls, color=c, label=label)
        checks = df.dropna(subset=["grad_cos_min"]) if "grad_cos_min" in df else df.iloc[:0]
        if len(checks):
            axes[1, 1].semilogy(checks["step"], np.maximum(1 - checks["grad_cos_min"].astype(float), 1e-9),
                                marker="o", ls=ls, color=c, label=label)
    axes[1, 1].axhline(1 - target_cos, color="k", ls=":", lw=1)
    axes[0, 0].set(title="training loss (4-step mean)", xlabel="step")
    axes[0, 1].set(title="largest span defect at the probes (exact 0 drawn at 1e-18)", xlabel="step")
    axes[1, 0].set(title="kept states", xlabel="step")
    axes[1, 1].set(title="1 - cos (worst parameter) at the fidelity checks", xlabel="step")
    for ax in axes.flat:
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _layout_lines(sizes: ChapterSizes, layouts: Mapping[str, Mapping[str, dict]], gains: Mapping[str, float],
                  calibrated: Mapping[str, AdaptivePolicy], verdicts: Mapping[str, dict],
                  target_cos: float) -> list[str]:
    lines = []
    for trunk, rep in layouts.items():
        none, ada, fix = rep["none"], rep["adaptive"], rep["fixed"]
        lines.append(f"* **{trunk}** (trained {sizes.pretrain_steps} steps, then expanded with gain {gains[trunk]:g}): "
                     f"with no kept states the rebuilt input misses by {none['recon_error'][0]:.2g} and the worst "
                     f"parameter's gradient cosine is {none['grad_cos_min']:.5f}; the calibrated adaptive policy "
                     f"(tau_warn = {calibrated[trunk].tau_warn:.2g}) keeps {counted(ada['n_kept'], 'state')} at "
                     f"{list(ada['keep'])} ({ada['kept_bytes']:,} bytes on the probe) and reaches "
                     f"{ada['grad_cos_min']:.6f}; fixed spacing with the same memory ({list(fix['keep'])}) reaches "
                     f"{fix['grad_cos_min']:.6f}.")
    lines += [frontier_line(trunk, v) for trunk, v in verdicts.items()]
    lines.append(_threshold_line(calibrated, {t: rep["adaptive"]["grad_cos_min"] for t, rep in layouts.items()},
                                 target_cos))
    return lines


_OUTCOME = {"win": "beat", "tie": "tied with", "loss": "lost to"}


def _taus(taus: Sequence[float]) -> str:
    return ", ".join(f"{t:.0e}" for t in sorted(taus, reverse=True))


def frontier_line(trunk: str, v: dict) -> str:
    """One takeaway on `frontier_verdict` for a trunk, counted once per distinct layout the thresholds chose (a
    layout several thresholds settle on is one result, not several), and saying when a layout *is* the fixed one."""
    lays, n_taus = v["layouts"], len(v["points"])
    head = (f"all {n_taus} thresholds chose the same layout {lays[0]['keep']}" if len(lays) == 1 else
            f"the {n_taus} thresholds chose {len(lays)} distinct layouts")
    parts = []
    for lay in lays:
        who = ("that one layout" if len(lays) == 1 else
               f"{lay['keep']} (tau_warn {_taus(lay['tau_warns'])})")
        if lay["same_as_fixed"]:
            parts.append(f"{who} is the fixed-spacing layout at its memory, a tie by construction")
        else:
            parts.append(f"{who} {_OUTCOME[lay['grad']]} the best fixed layout {lay['fixed_keep']} at equal memory on "
                         f"gradient error and {_OUTCOME[lay['recon']]} it on the worst rebuilt-state error")
    counts = ""
    if len(lays) > 1:
        counts = (f" Counted once per layout: on gradient error win {v['layout_grad_win']}, tie "
                  f"{v['layout_grad_tie']}, lose {v['layout_grad_loss']} of {len(lays)}; on the worst rebuilt-state "
                  f"error win {v['layout_recon_win']}, tie {v['layout_recon_tie']}, lose {v['layout_recon_loss']}.")
    where = (f" Scored on the {v['scored_on']}" + (", not the one that chose the layouts" if v["scored_on"] ==
                                                   "held-out batch" else ", the one that chose the layouts: in-sample")
             + "; the rivals are every fixed spacing and the layouts that keep boundary 1.")
    return f"* Fidelity against memory, {trunk}: {head}; " + "; ".join(parts) + "." + counts + where


def _threshold_line(calibrated: Mapping[str, AdaptivePolicy], cos_min: Mapping[str, float], target_cos: float) -> str:
    """Whether one threshold served every trunk, and whether the calibrated thresholds met the cosine target."""
    taus = {t: p.tau_warn for t, p in calibrated.items()}
    missed = [t for t, c in cos_min.items() if c < target_cos]
    if missed:
        return (f"* Calibration ran out of rounds before the cosine target {target_cos} was met for "
                f"{', '.join(missed)} (worst cosine " + ", ".join(f"{cos_min[t]:.6f}" for t in missed)
                + "): the defect threshold alone did not reach the target there.")
    if len(set(taus.values())) > 1:
        return ("* The threshold is not universal: meeting the cosine target took tau_warn = "
                + ", ".join(f"{v:.2g} for {t}" for t, v in taus.items())
                + ". The same defect means a different gradient error for a different integrator; the periodic "
                "fidelity check is what calibrates the signal.")
    return (f"* One threshold, tau_warn = {next(iter(taus.values())):.2g}, met the cosine target for "
            f"{'both trunks' if len(taus) == 2 else 'every trunk'} here; the fidelity check is what tells you so.")


def _rate(s: Mapping) -> str:
    if "tokens_per_s_median" not in s:
        return f"{s['tokens_per_s']:.0f}"
    return f"{s['tokens_per_s_median']:.0f} ({s['tokens_per_s_q1']:.0f}..{s['tokens_per_s_q3']:.0f})"


def speed_line(a: Mapping, f: Mapping, f64: Mapping, fxp: Mapping) -> str:
    """The speed takeaway: tokens/s of each variant with the interquartile range of its steps; the variants were
    trained one after another, so adaptive against fixed gets no speed verdict (`verdicts.TIMED_APART`)."""
    judged = (f"{TIMED_APART} (the variants trained one after another, so a change of the machine's load between "
              f"them would read as a difference of speed; both do the same trunk arithmetic per step)")
    return (f"* Speed (tokens/s, the median step and the interquartile range of the steps): adaptive {_rate(a)}, "
            f"fixed spacing "
            f"{_rate(f)}, fp64 stream {_rate(f64)}, fixed-point stream {_rate(fxp)}. Adaptive against fixed: "
            f"{judged}; the adaptive policy's probes cost {_pct(a['probe_overhead'])} of step time on top (fixed "
            f"spacing needs none).")


def _dominant_stream(f64: dict, fp32_arms: Sequence[dict], target_cos: float) -> str | None:
    """The fp64 stream against both fp32 policies: when it meets the target within the budget with nothing kept
    and no probes, it is the comparison's answer, whatever adaptive against fixed says."""
    if f64["grad_cos_min"] < target_cos or f64["trunk_state_bytes"] > f64["budget_bytes"]:
        return None
    if any(f64["grad_cos_min"] < arm["grad_cos_min"] for arm in fp32_arms):
        return None
    speed = min(f64["tokens_per_s"] / arm["tokens_per_s"] for arm in fp32_arms if arm.get("tokens_per_s"))
    return (f"* The fp64 stream dominates both fp32 policies here: worst cosine {f64['grad_cos_min']:.5f}, no kept "
            f"state and no defect probe, its doubled state inside the same budget ({f64['trunk_state_bytes']:,} of "
            f"{f64['budget_bytes']:,} bytes), at {speed:.2f}x the faster fp32 arm's tokens/s. Placement policies "
            f"matter where a wider stream does not fit.")


NOTE_SEEDS, NOTE_P = 8, 0.17   # the research note's own benchmark of adaptive against fixed spacing (published)
TIE_INSIDE = 10               # both gradient errors this many times inside the target: a tie


def replication_line(rows: Sequence[dict]) -> str:
    """What the replication over data orders says, by its evidence: on how many the adaptive policy came out ahead
    of fixed spacing (`training_verdict`), how many it did worse on, and the exact sign-flip p of the best case
    (every seed ahead), beside the idea's own benchmark (`NOTE_SEEDS` seeds, p = `NOTE_P`)."""
    n, ahead, worse = len(rows), sum(bool(r["ahead"]) for r in rows), sum(bool(r["worse"]) for r in rows)
    best_p = 2 / 2 ** n   # two-sided exact sign-flip p when every seed agrees: the most these seeds can show
    verdict = ("not shown either way: the seeds disagree" if 0 < ahead < n or worse else
               f"ahead on every one, which at {n} seeds is still p = {best_p:.2f} at best" if ahead == n else
               "ahead on none")
    return (f"Over {n} data orders the adaptive policy came out ahead of fixed spacing on {ahead}, with a gradient "
            f"error 1.5x larger on {worse}: {verdict}. The idea's own benchmark, over {NOTE_SEEDS} seeds, found no "
            f"significant win either (p = {NOTE_P}).")


def overheads_line(a: dict, f: dict) -> str:
    """Each arm's overheads from its training row, and which of them the policy itself needs: the adaptive
    policy needs its defect probes; the fixed arm's probes only log; the fidelity checks measure both arms and
    neither policy needs them."""
    return (f"* Overheads, as fractions of step time: defect probes {_pct(a['probe_overhead'])} adaptive (the policy "
            f"needs them) and {_pct(f['probe_overhead'])} fixed spacing (logging only: a deployed fixed layout runs "
            f"none); fidelity checks {_pct(a['fidelity_overhead'])} and {_pct(f['fidelity_overhead'])} (this "
            f"chapter's measurement, needed by neither); hooks {_pct(a['hook_overhead'])} and "
            f"{_pct(f['hook_overhead'])}. As deployed, the adaptive policy pays its probes and fixed spacing nothing.")


def _training_lines(sizes: ChapterSizes, summaries: Sequence[dict], run_logs: Mapping[str, Sequence[dict]],
                    budget_states: int, target_cos: float) -> list[str]:
    verdict = training_verdict(summaries, target_cos)
    by = {s["variant"]: s for s in summaries}
    a, f = by["fp32 adaptive"], next(s for s in summaries if s["variant"].startswith("fp32 fixed"))
    none, f64, fxp = by["fp32, no kept states"], by["fp64 stream"], by["fixed-point stream"]
    noise = abs(f64["val_loss"] - fxp["val_loss"])
    spread = max(s["val_loss"] for s in summaries) - min(s["val_loss"] for s in summaries)
    lines = [
        f"* Training ({sizes.finetune_steps} steps, budget {a['budget_bytes']:,} trunk-state bytes = final state "
        f"+ {budget_states} kept fp32 states): worst gradient cosine {a['grad_cos_min']:.5f} adaptive (mean "
        f"{a['kept_mean']:.2f} kept states), {f['grad_cos_min']:.5f} fixed spacing ({f['kept_mean']:.2f}), "
        f"{none['grad_cos_min']:.5f} with nothing kept, {f64['grad_cos_min']:.5f} fp64 stream, "
        f"{fxp['grad_cos_min']:.5f} fixed-point stream.",
        f"* Validation loss: fp64 {f64['val_loss']:.3f}, fixed-point {fxp['val_loss']:.3f}, fixed spacing "
        f"{f['val_loss']:.3f}, adaptive {a['val_loss']:.3f}, nothing kept {none['val_loss']:.3f}. The two exact "
        f"streams alone differ by {noise:.3f} and all five span {spread:.3f}: in a run this short, loss does not "
        f"rank the methods (see the caution above); the gradient cosines do.",
        speed_line(a, f, f64, fxp)]
    if verdict["fewer_kept_states"] and a.get("kept_max") is not None and a["kept_max"] >= f.get("kept_max", 0):
        lines.append(f"* Fewer kept states on average ({a['kept_mean']:.2f} against {f['kept_mean']:.2f}) saves no "
                     f"peak memory: at its most the adaptive policy kept {a['kept_max']} states, fixed spacing "
                     f"{f['kept_max']}, and the budget is set by the most.")
    dominant = _dominant_stream(f64, (a, f), target_cos)
    if dominant:
        lines.append(dominant)
    lines.append(overheads_line(a, f))
    one = (f"One seed, {sizes.finetune_steps} steps and one stress level: a measurement, not a law. The research "
           f"note's own benchmark of this comparison, over {NOTE_SEEDS} seeds, found no significant win for the "
           f"adaptive policy (p = {NOTE_P:.2f}; the note's figure, not measured here).")
    err_a, err_f = 1 - a["grad_cos_min"], 1 - f["grad_cos_min"]
    inside = all(inside_by(e, 1 - target_cos, TIE_INSIDE) for e in (err_a, err_f))
    if verdict["adaptive_beats_fixed"] and inside and not verdict["fewer_kept_states"]:
        lines.append(f"* **Verdict: a tie.** Both policies' gradient errors ({err_a:.1e} adaptive, {err_f:.1e} fixed "
                     f"spacing) lie at least {TIE_INSIDE:g}x inside the target's {1 - target_cos:.0e}: a smaller error "
                     f"there buys nothing a training run can use. {one}")
    elif verdict["adaptive_beats_fixed"]:
        why = "it kept fewer states" if verdict["fewer_kept_states"] else "its gradients were closer to the reference"
        if verdict["fewer_kept_states"] and verdict["better_fidelity"]:
            why = "it kept fewer states and its gradients were closer to the reference"
        lines.append(f"* **Verdict: in this run the adaptive policy came out ahead of fixed spacing** — {why} "
                     f"({a['kept_mean']:.2f} against {f['kept_mean']:.2f} kept states; worst cosine "
                     f"{a['grad_cos_min']:.5f} against {f['grad_cos_min']:.5f}). {one}")
    else:
        adaptive_keeps = {r["keep"] for r in run_logs["fp32 adaptive"] if "keep" in r}
        fixed_keeps = {r["keep"] for r in run_logs[f["variant"]] if "keep" in r}
        how = ("used the same layout throughout" if adaptive_keeps == fixed_keeps else
               f"kept {a['kept_mean']:.2f} states on average against {f['kept_mean']:.2f}")
        fid = ("further from the reference" if verdict["worse_fidelity"] else
               "closer to the reference" if verdict["better_fidelity"] else "no closer to the reference (within 1.5x)")
        lines.append(f"* **Verdict: in this run the adaptive policy does not beat fixed spacing.** "
                     f"Under the same budget it {how} and its gradients were {fid}. {one}")
    return lines


def takeaways(sizes: ChapterSizes, layouts: Mapping[str, Mapping[str, dict]], gains: Mapping[str, float],
              calibrated: Mapping[str, AdaptivePolicy], verdicts: Mapping[str, dict], summaries: Sequence[dict],
              run_logs: Mapping[str, Sequence[dict]], budget_states: int, target_cos: float) -> str:
    """The notebook's closing Markdown, every number taken from its measurements: the layouts per trunk
    (`layout_report` of none / fixed / adaptive), the frontier verdicts, and the training comparison."""
    lines = ["## Takeaways", "", *_layout_lines(sizes, layouts, gains, calibrated, verdicts, target_cos),
             *_training_lines(sizes, summaries, run_logs, budget_states, target_cos)]
    where = [t for t, v in verdicts.items() if v["layout_grad_win"] + v["layout_recon_win"]]
    if where:
        lines.append("* Where it does win: placement at equal memory on fixed weights (" + ", ".join(where) + "), against "
                     "the best fixed layout, boundary 1 kept or not. "
                     "When the defect is concentrated in a few spans, halving where it is large puts the kept states "
                     "there; uniform spacing cannot.")
    else:
        lines.append("* It won no comparison at equal memory on fixed weights either: here the defect is spread "
                     "evenly enough that uniform spacing already puts the states where they are needed.")
    return "\n".join(lines)
