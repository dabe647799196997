"""Notebook 07 and REPORT.md: the run's headline in computed lines, in the reference's form: memory; loss with its
seeds; the batch and whether spending it paid (with why the max-batch ratio follows the budget); throughput from
the interleaved bench alone; one line of what was not won; one line of what was not measured.

Each line is built from the results (`rev.chapters.shared.results`), so it says the opposite when the results do,
and each verdict comes from `rev.chapters.shared.verdicts`: a memory "cut" of more than 1x reads "no cut", a loss
gap inside its tie reads "a tie", a bench interval holding 1 reads "too noisy to tell". The training runs were timed
one after another, so their speeds are never compared here: throughput is notebook 05's interleaved bench or
nothing.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..assignment.seeds import seeds_reading, seeds_side
from ..assignment.spending import Spending, memory_spent
from ..shared.results import (BASE, MIB, REV, REV_DEEP, REV_MAX, equal_tokens_val, loss_and_time,
                              main_reversible_trunk, main_run, main_runs, max_batches_found, maxbatch_of, number,
                              published_reference)
from ..shared.runs import bench_ratio
from ...core.model import stored_twin
from ..shared.run_log import step_speeds
from ..shared.verdicts import (FASTER, HIGHER, LOWER, SLOWER, TIED, TOO_NOISY, Drift, Spread,
                               loss_side_word, loss_words, machine_drift, seed_tie, speed_verdict)


def mib(b: float | None) -> str:
    return "?" if b is None else f"{b / MIB:,.1f} MiB"


def _missing(*names: str) -> str:
    return "not measured (needs " + " and ".join(f"`{n}`" for n in names) + ")."


# -------------------------------------------------------------------------------------------------------------
# The headline
# -------------------------------------------------------------------------------------------------------------

def memory_line(base: pd.Series | None, rev: pd.Series | None) -> str:
    b = number(base.get("peak_memory_bytes")) if base is not None else None
    r = number(rev.get("peak_memory_bytes")) if rev is not None else None
    if not b or r is None:
        return "**Memory**: " + _missing(BASE, REV)
    ratio = r / b
    verdict = f"a cut of {(1 - ratio) * 100:.0f}%" if ratio < 1 else "no cut"
    return (f"**Memory**: at batch {int(base['batch_size'])} the reversible trunk's training step peaked at "
            f"{mib(r)} against the baseline's {mib(b)}: {ratio:.2f}x, {verdict}.")


def loss_line(base: pd.Series | None, rev: pd.Series | None, spread: dict | None = None) -> str:
    """Run 2 against run 1 at equal tokens; with notebook 05's seeds (`spread`) the verdict is the mean paired
    difference's t interval over the seeds the screening did not select (`seeds.seeds_reading`, the sentence
    notebook 05 prints), otherwise one seed each against the seed tie, or the stated fallback."""
    eq = equal_tokens_val(base, rev) if base is not None and rev is not None else None
    if eq is None:
        return "**Loss**: " + _missing(BASE, REV)
    tokens, b, r = eq
    head = (f"**Loss**: after {tokens:,} tokens the reversible run's validation loss was {r:.3f} against the "
            f"baseline's {b:.3f} ({r - b:+.3f} nats)")
    seeds = seeds_reading(spread)
    if seeds:
        return head + f"; {seeds}."
    tie = seed_tie(spread)
    return head + f"; one seed each: {loss_words(r - b, 'run 2', 'run 1', tie)}, the tie being {tie.source}."


def budget_reason(df: pd.DataFrame, budget: int | None, b: int) -> str:
    """Why the max-batch ratio is what it is: it follows the budget. A budget below the baseline's own step at
    the profile's batch leaves the baseline a small batch and the ratio large; a larger budget (a GPU's) gives a
    smaller ratio, as the published figure's."""
    base = main_run(df, BASE)
    peak = number(base.get("peak_memory_bytes")) if base is not None else None
    if not budget or not peak:
        return ""
    ref = published_reference().set_index("key").loc["max_batch", "ratio"]
    where = (f"below the baseline's own {mib(peak)} step at batch {int(base['batch_size'])}, so the baseline fits "
             f"only batch {b}" if budget < peak else
             f"above the baseline's own {mib(peak)} step at batch {int(base['batch_size'])}")
    return (f" The ratio follows the budget ({mib(budget)} sits {where}): a larger budget gives a smaller ratio "
            f"(published {ref:.1f}x on a GPU).")


def spent_of(df: pd.DataFrame, maxbatch: dict | None = None) -> Spending | None:
    """`spending.memory_spent` on the report's rows: runs 3 and 4 against run 2, one tie (the seed tie where measured)."""
    rev = main_run(df, REV)
    if rev is None:
        return None
    return memory_spent(rev, "run 2", main_run(df, REV_MAX), main_run(df, REV_DEEP), seed_tie(df.attrs.get("seeds")),
                    maxbatch_of(df, maxbatch))


def _paid(spent: Spending | None, what: str) -> str:
    """Whether spending the memory on `what` paid, in one clause, or "" when it was not measured."""
    arm = next((a for a in spent.arms if a.what == what), None) if spent else None
    if arm is None:
        return ""
    side = arm.side(spent.tie)
    said = {-1: "it paid", 0: "it bought nothing one seed can see", 1: "it did not pay",
            None: "a lower bound that cannot say"}[side]
    bound = "at least " if arm.gap.bound else ""
    return (f" Spent on {what} ({arm.run}) against {spent.ref} at {arm.gap.tokens:,} tokens: "
            f"{bound}{arm.gap.diff:+.3f} nats, {said}.")


def batch_line(df: pd.DataFrame, maxbatch: dict | None = None) -> str:
    mb = maxbatch_of(df, maxbatch)
    found = max_batches_found(mb, main_reversible_trunk(df, mb))
    if not found:
        return "**Batch**: not measured (needs the max-batch searches, `maxbatch.json`)."
    b, r, budget = found
    verdict = f"{r / b:.2f}x the batch" if r > b else "no larger batch"
    return (f"**Batch**: under one budget of {mib(budget)} the reversible trunk fits batch {r} against the "
            f"baseline's {b}: {verdict}." + budget_reason(df, budget, b) + _paid(spent_of(df, mb), "batch"))


def bench_speed(bench: dict | None, rev: pd.Series | None, against: str = "residual") -> Spread | None:
    """Run 2's trunk over the residual (or over its stored twin, `against="twin"`, both on the whole batch) in
    notebook 05's interleaved bench (`bench_ratio`: the median of the rounds' ratios and its bootstrap interval),
    when the bench timed that trunk at run 2's batch; else None."""
    if not bench or rev is None or number(bench.get("batch")) != number(rev.get("batch_size")):
        return None
    if against == "twin":
        return bench_ratio(bench, rev.get("trunk"), stored_twin(rev.get("trunk")), whole=True)
    return bench_ratio(bench, rev.get("trunk"))


def _price(verdict: str, ratio: float) -> str:
    """What an interleaved same-batch speed verdict says of recomputation's price: a faster reversible step means
    something other than arithmetic set the step time on this machine."""
    return {TOO_NOISY: TOO_NOISY,
            SLOWER: f"slower by {(1 - ratio) * 100:.0f}%, the price of recomputing each block",
            FASTER: FASTER}[verdict]   # faster: something other than arithmetic set this machine's step time


def throughput_line(base: pd.Series | None, rev: pd.Series | None, bench: dict | None = None) -> str:
    """The price of recomputation at the same batch, from notebook 05's interleaved bench alone (each round steps
    both trunks under the same load); the training runs, timed minutes apart, are never compared."""
    s = bench_speed(bench, rev)
    if s is None:
        # notebook 05 writes the bench (`same_batch_bench.json`); the training runs, timed apart, never stand in
        return "**Throughput**: not measured: no interleaved bench at run 2's batch."
    verdict = speed_verdict(s)
    said = (f"{verdict} by {abs(1 - s.value) * 100:.0f}%, recomputation and the trunk's architecture together"
            if verdict in (SLOWER, FASTER) else verdict)
    line = (f"**Throughput**: at batch {int(rev['batch_size'])}, timed side by side (notebook 05's bench, one step of "
            f"each trunk per round), the reversible trunk ran at {s.value:.2f}x the baseline's tokens/s "
            f"({s.kind} {s.lo:.2f}-{s.hi:.2f}): {said}")
    twin = bench_speed(bench, rev, against="twin")   # the same network with an ordinary backward: one cause
    if twin is not None:
        line += (f"; against its stored twin, both on the whole batch, {twin.value:.2f}x ({twin.lo:.2f}-{twin.hi:.2f}):"
                 f" {_price(speed_verdict(twin), twin.value)}")
    return line + "."


def not_won_line(df: pd.DataFrame, maxbatch: dict | None = None) -> str | None:
    """One line: what spending the saved memory did not win against run 2 at equal tokens, and the run that ended
    lowest at those tokens when it is not a reversible one (None when there is nothing the trunk did not win)."""
    spent = spent_of(df, maxbatch)
    missed = [a for a in spent.arms if a.side(spent.tie) != -1] if spent else []
    race = loss_and_time(df).dropna(subset=["val_loss"])   # every main run at the one shared token count, lowest first
    low = race.iloc[0] if len(race) and race.iloc[0]["run"] not in (REV, REV_MAX, REV_DEEP) else None
    if not missed and low is None:
        return None
    parts = [f"on {a.what} ({a.size}) {'at least ' if a.gap.bound else ''}{a.gap.diff:+.3f} nats" for a in missed]
    said = [f"spent against run 2 at equal tokens (one seed each, tie {spent.tie.nats:.3g} nats): "
            + "; ".join(parts) + "."] if missed else []
    if low is not None:
        tokens, label, batch, loss = int(low["tokens"]), low["label"], low["batch"], low["val_loss"]
        said.append(f"Lowest at {tokens:,} tokens: {label} (batch {batch}), {loss:.3f}.")
    return "**Not won**: " + " ".join(said)


def not_measured_line(df: pd.DataFrame) -> str:
    """One line: what this machine could not measure (the section at the end of REPORT.md says more)."""
    runs = main_runs(df)
    gpu = any("cuda" in str(d).lower() for d in runs["device"].dropna()) if len(runs) else False
    parts = [] if gpu else ["throughput and max batch on a GPU", "bf16 autocast"]
    spread = df.attrs.get("seeds")
    if not (isinstance(spread, dict) and spread.get("tie") is not None):
        parts.append("the seed-to-seed spread of the loss")
    parts.append("runs 3 and 4 over more than one seed")
    return "**Not measured**: " + ", ".join(parts) + "."


def conclusion_line(df: pd.DataFrame, maxbatch: dict | None = None) -> str | None:
    """REPORT.md's first line: memory, throughput and loss at the same batch, then whether spending the freed
    memory paid, each from the same verdict as its headline line (None without runs 1 and 2)."""
    base, rev = main_run(df, BASE), main_run(df, REV)
    eq = equal_tokens_val(base, rev) if base is not None and rev is not None else None
    b, r = (number(x.get("peak_memory_bytes")) if x is not None else None for x in (base, rev))
    if eq is None or not b or r is None:
        return None
    spread = df.attrs.get("seeds")
    side = seeds_side(spread)
    loss = {-1: LOWER, 0: TIED, 1: HIGHER}[side] if side is not None else loss_side_word(eq[2] - eq[1],
                                                                                         seed_tie(spread))
    s = bench_speed(df.attrs.get("bench"), rev)
    speed = f"{s.value:.2f}x the tokens/s ({speed_verdict(s)})" if s else "unmeasured tokens/s"
    spent = spent_of(df, maxbatch)
    paid = "" if spent is None else (f"; spent on {' and '.join(spent.won())}, the freed memory paid" if spent.won()
                                     else "; spent on batch or depth, the freed memory did not pay")
    return f"**In one line**: {r / b:.2f}x the memory, {speed}, loss against the baseline's: {loss}{paid}."


def headline_lines(df: pd.DataFrame, maxbatch: dict | None = None) -> list[str]:
    """The run's headline, one line each, computed: memory, loss with its seeds, batch and whether it paid,
    throughput from the bench, what was not won, what was not measured."""
    base, rev = main_run(df, BASE), main_run(df, REV)
    lines = [memory_line(base, rev), loss_line(base, rev, df.attrs.get("seeds")), batch_line(df, maxbatch),
             throughput_line(base, rev, df.attrs.get("bench")), not_won_line(df, maxbatch), not_measured_line(df)]
    return [line for line in lines if line]


def spent_line(df: pd.DataFrame, label: str = "Spent") -> str | None:
    """What the saved memory bought when it was spent: on batch (run 3) and on depth (run 4), each against run 2 at
    equal tokens (`spending.memory_spent`, as notebook 06 reads it), and whether it paid; notebook 06 leads its takeaways with
    it, under its own `label`."""
    spent = spent_of(df)
    if spent is None:
        return None
    parts = [f"on {a.what} ({a.size}) {'at least ' if a.gap.bound else ''}{a.gap.diff:+.3f} nats" for a in spent.arms]
    won = spent.won()
    verdict = (f"it paid on {' and '.join(won)}" if won else
               "neither spending beat the reversible trunk at the profile's batch and depth on this token budget")
    return (f"**{label}**: the saved memory against run 2 at equal tokens (one seed each; a gain must beat the "
            f"{spent.tie.text()}): " + "; ".join(parts) + f": {verdict}.")


def drifted_runs(df: pd.DataFrame) -> list[tuple[str, Drift]]:
    """(run, `verdicts.Drift`) for every main run whose log has enough timed steps to tell, in workbook order."""
    out = []
    for _, r in main_runs(df).iterrows():
        path = r.get("path")
        drift = machine_drift(step_speeds(path).tolist()) if isinstance(path, str) and Path(path).is_dir() else None
        if drift is not None:
            out.append((str(r["run"]), drift))
    return out
