"""Notebook 06: the takeaways and computed findings, Markdown built from the results (so a run that turns out
otherwise reads otherwise).

Every verdict comes from `rev.chapters.shared.verdicts`: a speed verdict only from the interleaved bench (runs
timed apart read "not comparable: timed apart"), and a loss verdict of one seed each against the tie the caller
passes (notebook 06 passes the seed tie notebook 05 measured; the stated fallback otherwise).
"""
from __future__ import annotations

from ...core.reversible import RECON_LIMIT
from ...measure.maxbatch import MaxDepth
from ...measure.noise_scale import steps_ratio, tokens_ratio
from ...core.optim import WARMUP_FLOOR_STEPS
from ..shared.results import deep_capped, loss_head_finding, number, stream_reliability
from ..shared.tables import counted
from ..shared.run_log import PLATEAU_NATS, run_start
from .spending import Spent, memory_spent
from ..shared.record import RunRecord, equal_tokens
from ..shared.runs import RUN3B, SPIKE_K, SPIKE_RISE, SPIKE_SMOOTH, SPIKE_WINDOW, loss_spikes, run_dir_of
from ..shared.verdicts import FALLBACK_TIE, TIMED_APART, Tie, loss_words, side_of_tie
from ...base.units import MIB


# --- takeaways: Markdown computed from the results --------------------------------------------------------

def _bullets(lines: list[str]) -> str:
    return "\n".join(f"- {line}" for line in lines if line)


# --- comparing timings and losses, with their spread ------------------------------------------------------

def _equal_tokens(a: dict, b: dict) -> tuple[int, float | None, float | None]:
    """(tokens, a's validation loss, b's) at the token count both runs reached (`record.equal_tokens`)."""
    return equal_tokens(RunRecord.of(a), RunRecord.of(b))


# --- notebook 06: the max batch, depth, spikes ------------------------------------------------------------

def depth_finding(run1: dict, run2: dict | None, run4: dict, deep: MaxDepth, tie: Tie = FALLBACK_TIE) -> str:
    """Run 4 (the reversible trunk made as deep as the baseline's memory allows) against run 2 (the same trunk at
    the profile's depth, same batch and tokens) and against the baseline: did spending the memory on depth pay.
    The runs were timed apart, so what a token cost is not compared (notebook 05's bench times trunks)."""
    capped = " (the search's cap, not the memory limit)" if deep_capped(deep.to_dict()) else ""
    t1, v4, v1 = _equal_tokens(run4, run1)
    head = (f"Spending the memory on depth: run 4 ({deep.n_layer} reversible layers{capped}, in the baseline's memory "
            f"at batch {deep.batch}) reached {v4:.3f} at {t1:,} tokens. Against the baseline's {v1:.3f}: "
            f"{loss_words(v4 - v1, 'the deep run', 'the baseline', tie)}.")
    if run2 is None:
        return head + " Run 2 (notebook 05, the same trunk at the profile's depth) is not in the results."
    t2, v4b, v2 = _equal_tokens(run4, run2)
    d = v4b - v2
    why = {1: f"the deeper model lost by {d:.3f} nats: at {t2:,} tokens its extra layers had not paid for "
              f"themselves (depth pays once a budget is large enough to train the layers it adds)",
           -1: f"the deeper model won by {-d:.3f} nats: the saved memory bought a lower loss at the same tokens",
           0: f"a tie, within {tie.nats:.3g} nats: at this budget the extra layers bought nothing one seed can "
              f"see"}[side_of_tie(d, tie)]
    return (f"{head} Against run 2, the same trunk with {run2['n_layer']} layers, at {v2:.3f}: {why}. Per token, "
            f"the two runs' speeds are {TIMED_APART}." + _horizon_caveat(run2, run4))


def _horizon_caveat(run2: dict, run4: dict) -> str:
    """Run 4 keeps the step h: more layers integrate for longer (L h), so depth and horizon change together."""
    h2, h4 = run2.get("h"), run4.get("h")
    if h2 is None or h4 is None or h2 != h4 or run4["n_layer"] == run2["n_layer"]:
        return ""
    return (f" Run 4 keeps h = {h4:g}, so its integration horizon L h grew with its depth "
            f"({run2['n_layer']} x {h2:g} = {run2['n_layer'] * h2:g} to {run4['n_layer']} x {h4:g} = "
            f"{run4['n_layer'] * h4:g}): depth and horizon changed together, and this one run cannot tell them apart.")


def batch_lesson(run1b: dict, run3: dict, views=None, run1: dict | None = None, run2: dict | None = None,
                 tie: Tie = FALLBACK_TIE) -> str:
    """Run 3's lesson, computed: at a fixed token budget the larger batch takes fewer steps; what a step bought
    (the equal-steps view, `views` = `max_batch_views(...)`); how much of the gap the trunk could explain
    (run 2 vs run 1 at the same batch); what the larger batch would buy on a GPU (labelled: not measured)."""
    b3, b1 = run3["batch_size"], run1b["batch_size"]
    s3, s1 = run3["steps"], run1b["steps"]
    tokens, v3, v1 = _equal_tokens(run3, run1b)
    d = v3 - v1
    lines = [f"At a fixed token budget a larger batch takes fewer steps: run 3 at batch {b3} took {s3:,} optimizer "
             f"steps, run 1b at batch {b1} took {s1:,} ({s1 / s3:.1f}x as many). At {tokens:,} tokens run 3 is at "
             f"{v3:.3f}, run 1b at {v1:.3f} ({d:+.3f} nats): {loss_words(d, 'the larger batch', 'the smaller', tie)}."]
    if views is not None and len(views):
        v = views.set_index("run")
        at3, at1 = (number(v.loc[n, "val_loss_at_equal_steps"]) if n in v.index else None
                    for n in ("run3_reversible_max_batch", "run1b_baseline_maxbatch"))
        steps = int(v["equal_steps"].iloc[0])
        if at3 is not None and at1 is not None:
            ds = at3 - at1
            what = {-1: "step for step the larger batch was ahead: each of its steps averaged the gradient over more "
                        "sequences, a less noisy step" + ("; it lost at equal tokens for lack of steps, not of data"
                                                         if side_of_tie(d, tie) > 0 else ""),
                    1: "even step for step the larger batch was behind: its extra sequences per step bought nothing "
                       "here",
                    0: f"step for step the two are a tie (within {tie.nats:.3g} nats)"}[side_of_tie(ds, tie)]
            lines.append(f"After {steps} steps each: run 3 at {at3:.3f}, run 1b at {at1:.3f} ({ds:+.3f}): {what}.")
        else:
            lines.append(f"After {steps} steps each the logs cannot tell (see the table's note).")
    stall = stalled_start(run_dir_of(run3), run3.get("unigram_val_loss"), run_dir_of(run1b))
    if stall:
        lines.append(stall)
    if run1 is not None and run2 is not None:
        dt = run2["final_val_loss"] - run1["final_val_loss"]
        lines.append(f"Runs 3 and 1b differ in trunk too; at one batch the trunks ended {dt:+.3f} nats apart (run 2 vs "
                     f"run 1), " + ("less than the gap here, so the batch, not the trunk, accounts for most of it."
                                    if abs(dt) < abs(d) else "as much as the gap here: the trunk may explain it."))
    r = b3 / b1
    lines.append(f"**On a GPU (a statement about GPUs, not a measurement of this workbook):** a GPU with memory to "
                 f"spare runs batch {b3} in about the time of batch {b1} as long as the smaller batch leaves its "
                 f"parallel units idle; time per token then falls about {r:.1f}x, and in the time run 1b takes its "
                 f"{s1:,} steps the larger batch takes as many, on {r:.1f}x the tokens, provided its step runs the "
                 f"batch in slices large enough to keep the GPU busy (on a GPU the fewest slices its memory allows, "
                 f"`rev.measure.slicing`; `python -m rev gpucheck` times that). A CPU has no idle units to fill once "
                 f"its cores are busy: time per step grows with the batch. On this machine runs 3 and 1b were timed "
                 f"one after the other: their speeds are {TIMED_APART}.")
    return _bullets(lines)


def _spent_said(a: Spent, ref: str, tie: Tie) -> str:
    """One spending's gap in words: a lower bound where its run had no evaluation by the tokens compared."""
    if a.gap.bound:
        return (f"at least {a.gap.diff:+.3f} nats (it had no evaluation by {a.gap.tokens:,} tokens; its first one "
                f"came later, on more tokens)")
    return f"{a.gap.diff:+.3f} nats, {loss_words(a.gap.diff, a.run, ref, tie)}"


def memory_spend_finding(noise_scale: float, run1: dict, run2: dict | None, run3: dict, run4: dict,
                         deep: MaxDepth, tie: Tie = FALLBACK_TIE, maxbatch: dict | None = None) -> str:
    """Where the freed memory should go, batch (run 3) or depth (run 4): the noise-scale model's reason first, then
    both runs at equal tokens against the run that differs from each in that one thing, run 2 (the same trunk at
    the profile's batch and depth; run 1 when run 2 is missing, which changes the trunk too), read by
    `spending.memory_spent` as REPORT.md's headline reads it; the two are set against each other only where they
    spent the same memory (`maxbatch`: maxbatch.json's budget; `deep`: the depth search's)."""
    b1, b3 = run1["batch_size"], run3["batch_size"]
    steps_cut = 1 / steps_ratio(b3, b1, noise_scale)      # how many of run 1's steps one of run 3's is worth
    token_cost = tokens_ratio(b3, b1, noise_scale)        # how many of run 1's tokens run 3 needs per one
    side = "above" if b3 > noise_scale else "below"
    lines = [f"The noise scale says where the memory pays. Run 1's simple noise scale B_simple is {noise_scale:.0f} "
             f"sequences; run 3's batch {b3} is {side} it, so one of its steps is worth {steps_cut:.2f} of a step at "
             f"batch {b1}, but it needs {token_cost:.2f}x the tokens for the same loss. Spent on batch, the memory "
             f"buys fewer steps (time, where a step's time barely grows with the batch) and costs tokens; spent on "
             f"depth, at batch {b1}, every token keeps its worth and the question is only whether {deep.n_layer} "
             f"layers learn more from them than {run1['n_layer']}."]
    ref, name = (run2, "run 2") if run2 is not None else (run1, "run 1 (a different trunk as well)")
    short = name.split(" (")[0]
    spent = memory_spent(ref, short, run3, run4, tie, {**(maxbatch or {}), "deep": deep.to_dict()})
    if spent is None or len(spent.arms) < 2:
        lines.append(f"The logs cannot set both runs beside {name} at equal tokens.")
        return _bullets(lines)
    batch, depth = spent.arms
    lines.append(f"Measured at equal tokens against {name}, one seed each: the batch (run 3, at {batch.gap.tokens:,} "
                 f"tokens) {_spent_said(batch, short, tie)}; the depth (run 4, at {depth.gap.tokens:,} tokens) "
                 f"{_spent_said(depth, short, tie)}.")
    better = spent.head_to_head()
    if not spent.same_budget():
        lines.append(f"The two spent different memory (batch: {batch.budget_text()}; depth: {depth.budget_text()}), "
                     f"so they are not set against each other: each is read against {short} alone.")
    elif better is None:
        lines.append("The bound cannot say which spending was better at a fixed token budget.")
    elif better == 0:
        lines.append(f"Neither spending beat the other by more than {tie.nats:.3g} nats at a fixed token budget.")
    else:
        gap = abs(batch.gap.diff - depth.gap.diff)
        lines.append(f"At a fixed token budget and the same memory, the memory was better spent on "
                     f"{'depth' if better > 0 else 'batch'}, by {gap:.3f} nats.")
    return _bullets(lines)


def stalled_start(run_dir, context_free: float | None, other_dir=None, label: str = "Run 3") -> str | None:
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


def spike_finding(runs: dict[str, dict]) -> str:
    """Every loss spike in the given runs' logs ({name: summary}), where it happened and what it points at: the
    learning rate and gradient norm there, whether the loss came back, and whether the trunk's gradients can be
    suspected (a reversible trunk above `RECON_LIMIT`) or not."""
    window, k, rise = SPIKE_WINDOW, SPIKE_K, SPIKE_RISE
    top_lr = max((s["lr"] for s in runs.values() if s.get("lr")), default=None)
    lines = []
    for name, s in runs.items():
        run_dir = run_dir_of(s)
        for sp in (loss_spikes(run_dir) if run_dir else []):
            back = (f"the plotted curve was back near that level {counted(sp.recovered_after, 'step')} later"
                    if sp.recovered_after is not None else "it had not come back to that level by the end of the run")
            err = number(s.get("reconstruction_error"))
            if s.get("trunk") == "residual" or err is None:
                grads = "A stored trunk's gradients are exact backprop: the spike is the optimizer's step"
            elif err <= RECON_LIMIT:
                grads = (f"Its trunk rebuilt its input within RECON_LIMIT ({err:.1e}), so its gradients were exact "
                         f"backprop up to rounding: the spike is the optimizer's step, not the memory-free backward")
            else:
                grads = (f"Its trunk's reconstruction error {err:.1e} is above RECON_LIMIT: suspect its rebuilt "
                         f"gradients first")
            lr = (" (the largest learning rate of these runs: the rule that scales it with the batch gave this run "
                  "the biggest steps)" if top_lr and s.get("lr") == top_lr and len(runs) > 1 else "")
            lines.append(f"**{name}**: its training loss jumped to {sp.loss:.3f} at {sp.tokens:,} tokens (step "
                         f"{sp.step}), {sp.loss - sp.level:+.3f} nats above its level in the {window} steps before; "
                         f"the learning rate there was {sp.lr:.2g}, {sp.lr / sp.peak_lr:.0%} of the run's peak"
                         f"{lr}, and the gradient norm {sp.grad_norm_ratio:.1f}x the run's median; {back}. {grads}.")
    if not lines:
        return (f"No loss spike: in none of {', '.join(runs)} did a step's training loss rise more than {k:g} robust "
                f"standard deviations (and {rise:g} nats) above the median of the {window} steps before it, nor the "
                f"plotted curve ({SPIKE_SMOOTH}-step mean) as far above its lowest point of the {window} steps before.")
    return _bullets(lines)


def max_batch_takeaways(mb: dict, chosen: dict, runs: dict[str, dict], deep: MaxDepth,
                        ablation: dict | None = None, tie: Tie = FALLBACK_TIE) -> str:
    """`runs`: the summaries of run1_baseline, run1b_baseline_maxbatch, run3_reversible_max_batch and
    run4_reversible_deep (and run 3b, `RUN3B`, and run2_reversible_same_batch when they ran), by name;
    `ablation`: `loss_head_ablation`'s result."""
    b_base, b_rev = mb["residual"]["batch"], mb[chosen["trunk"]]["batch"]
    run1, run1b = runs["run1_baseline"], runs["run1b_baseline_maxbatch"]
    run3, run4 = runs["run3_reversible_max_batch"], runs["run4_reversible_deep"]
    run2 = runs.get("run2_reversible_same_batch")
    tokens, v3, v1b = _equal_tokens(run3, run1b)
    unigram = f"; a context-free model scores {run3['unigram_val_loss']:.3f}" if run3.get("unigram_val_loss") else ""
    lines = [
        f"Under {mb['budget_bytes'] / MIB:.0f} MiB the reversible trunk fits batch {b_rev} against the "
        f"baseline's {b_base}: {b_rev / b_base:.2f}x.",
        f"At their max batches and {tokens:,} tokens: validation loss {v3:.3f} (reversible) vs {v1b:.3f} (baseline), "
        f"{loss_words(v3 - v1b, 'run 3', 'run 1b', tie)}; the same tokens took {run3['steps']:,} vs "
        f"{run1b['steps']:,} optimizer steps{unigram}. Their speeds are {TIMED_APART}.",
    ]
    stall = stalled_start(run_dir_of(run3), run3.get("unigram_val_loss"), run_dir_of(run1b))
    if stall:
        lines.append(stall.split(". Its warm-up")[0] + " (run 3's lesson above says how it began).")
    run3b = runs.get(RUN3B)
    if run3b:
        ok, why = stream_reliability(run3b["stream"], run3b["reconstruction_error"])
        ok3, why3 = stream_reliability(run3["stream"], run3["reconstruction_error"])
        lines.append(f"Run 3b, the same trunk on {run3b['stream']} at its own max batch {run3b['batch_size']}: "
                     f"validation loss {run3b['final_val_loss']:.3f}; run 3b is {why}; run 3 is {why3}.")
    lines.append(depth_finding(run1, run2, run4, deep, tie))
    spiked = [n for n, s in runs.items() if run_dir_of(s) and loss_spikes(run_dir_of(s))]
    lines.append(f"Loss spikes (see the runs side by side): in {', '.join(spiked)}." if spiked else
                 "No run's training loss spiked.")
    if loss_head_finding(ablation):
        lines.append(loss_head_finding(ablation))
    return _bullets(lines)
