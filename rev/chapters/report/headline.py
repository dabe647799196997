"""Notebook 07 and REPORT.md: the run's headline in computed lines, the throughput verdicts that respect the
runs' spread, and what this machine could not measure.

Each line is built from the results (`rev.chapters.shared.results`), so it says the opposite when the results do: a memory
"cut" of more than 1x reads "no cut", a reversible run that ran faster reads "faster", and a throughput difference
whose bootstrap interval (`rev.measure.stats`, over the runs' logged steps) holds 0 reads "too noisy to tell on this
machine".
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ...measure.stats import median_difference_interval
from ..shared.results import (PUBLISHED_SOURCE, published_reference, read_json_or_note, row_spread, BASE, BASE_MAX, MIB, REV, REV_DEEP, REV_MAX, equal_tokens_val, main_reversible_trunk, main_run,
                      main_runs, max_batches_found, maxbatch_of, number)
from ..assignment.seeds import seed_tie
from ..screening.rule import LOSS_TIE
from ..shared.run_log import first_evaluation_from, step_speeds, val_loss_after_steps, val_loss_at
from ..shared.runs import bench_ratio

NOISY = "too noisy to tell on this machine"


def pct(ratio: float) -> str:
    """A ratio as a signed percentage change: 0.79 -> "-21.0%"."""
    return f"{(ratio - 1) * 100:+.1f}%"


def mib(b: float | None) -> str:
    return "?" if b is None else f"{b / MIB:,.1f} MiB"


# -------------------------------------------------------------------------------------------------------------
# Throughput against its spread
# -------------------------------------------------------------------------------------------------------------

Quartiles = tuple[float, float, float]


@dataclass(frozen=True)
class SpeedComparison:
    """Two runs' tokens/s (`load_runs`' column: the median step where the log has the steps), each run's per-step
    quartiles, and the 95% bootstrap interval for the difference of their median steps (rev minus base; None
    when a run logged too few steps), which is what the verdict reads."""
    base: float
    rev: float
    base_q: Quartiles | None
    rev_q: Quartiles | None
    interval: tuple[float, float] | None = None

    @property
    def ratio(self) -> float:
        return self.rev / self.base

    @property
    def noisy(self) -> bool | None:
        """True when the bootstrap interval for the difference holds 0: these timings cannot tell the two runs
        apart. None when a run recorded no per-step timings."""
        if self.interval is None:
            return None
        return self.interval[0] <= 0 <= self.interval[1]

    @property
    def verdict(self) -> str:
        """"slower", "faster" or `NOISY` ("slower"/"faster" alone when no per-step timings were recorded)."""
        if self.noisy:
            return NOISY
        if self.noisy is None:
            return "slower" if self.rev < self.base else "faster"
        return "slower" if self.interval[1] < 0 else "faster"

    def spread_text(self) -> str:
        if self.interval is None or self.base_q is None or self.rev_q is None:
            return "no per-step timings recorded, so no spread to judge the difference by"
        lo, hi = self.interval   # the statistic the verdict reads; the steps' own spread is in the throughput figure
        return f"median steps' difference {lo:+,.0f} to {hi:+,.0f} tokens/s, 95% bootstrap interval"


def _median_step_interval(base: pd.Series, rev: pd.Series) -> tuple[float, float] | None:
    """The bootstrap interval for rev's median step minus base's, from the runs' logs (None without them)."""
    paths = [row.get("path") for row in (base, rev)]
    if any(not isinstance(p, (str, Path)) or not Path(p).is_dir() for p in paths):
        return None
    b, r = (step_speeds(p) for p in paths)
    if len(b) < 2 or len(r) < 2:
        return None
    return median_difference_interval(r, b)


def compare_speed(base: pd.Series | None, rev: pd.Series | None) -> SpeedComparison | None:
    """`SpeedComparison` of two run rows (None when either is missing or has no tokens/s)."""
    if base is None or rev is None:
        return None
    b, r = number(base.get("tokens_per_s")), number(rev.get("tokens_per_s"))
    if not b or r is None:
        return None
    return SpeedComparison(b, r, row_spread(base), row_spread(rev), _median_step_interval(base, rev))


def speed_sentence(base: pd.Series, rev: pd.Series) -> str | None:
    """The same-batch throughput finding: the price of recomputation, or no measurable one."""
    c = compare_speed(base, rev)
    if c is None:
        return None
    why = {NOISY: "Whatever recomputation costs here is hidden by how much single steps vary",
           "slower": "That is the expected price of recomputing each block in backward",
           "faster": "Recomputing cannot make a step faster; the runs were timed one after another, so a change in "
                     "the machine's load between them is the likelier cause (`python -m rev bench` times the trunks "
                     "interleaved)"}[c.verdict]
    return (f"At batch {int(base['batch_size'])} the reversible trunk trained at {c.rev:,.0f} tokens/s against the "
            f"baseline's {c.base:,.0f} ({pct(c.ratio)}; {c.spread_text()}): {c.verdict}. {why}.")


def max_batch_speed_sentence(base_max: pd.Series, rev_max: pd.Series) -> str | None:
    """The max-batch throughput finding. It compares two batch sizes as much as two trunks, so it is read as what
    the larger batch did to tokens/s, never as the recomputation's price (the same-batch runs measure that)."""
    c = compare_speed(base_max, rev_max)
    if c is None:
        return None
    bb, rb = int(base_max["batch_size"]), int(rev_max["batch_size"])
    why = {NOISY: "Neither the larger batch nor the recomputation shows beyond the noise",
           "faster": f"The larger batch ({rb} against {bb}) more than paid for the recomputation, as a batch can "
                     f"spread each step's fixed costs over more tokens",
           "slower": f"Its larger batch ({rb} against {bb}) did not make up for the recomputation"}[c.verdict]
    return (f"Each at its own max batch ({bb} vs {rb}), the reversible trunk trained at {c.rev:,.0f} tokens/s "
            f"against the baseline's {c.base:,.0f} ({pct(c.ratio)}; {c.spread_text()}): {c.verdict}. {why}. This "
            f"compares batch sizes as much as trunks; the price of recomputing is the same-batch comparison.")


# -------------------------------------------------------------------------------------------------------------
# The headline: four lines
# -------------------------------------------------------------------------------------------------------------

def _missing(*names: str) -> str:
    return "not measured (needs " + " and ".join(f"`{n}`" for n in names) + ")."


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
    """Run 2 against run 1 at equal tokens; with notebook 05's seed spread (`spread`, 2 seeds or more) the verdict
    is the mean paired difference's t interval, otherwise one seed each against the screening's fixed tie."""
    eq = equal_tokens_val(base, rev) if base is not None and rev is not None else None
    if eq is None:
        return "**Loss**: " + _missing(BASE, REV)
    tokens, b, r = eq
    d = r - b
    head = (f"**Loss**: after {tokens:,} tokens the reversible run's validation loss was {r:.3f} against the "
            f"baseline's {b:.3f} ({d:+.3f} nats)")
    if spread and "diff_lo" in spread:
        lo, hi = spread["diff_lo"], spread["diff_hi"]
        verdict = ("kept, and lower on average beyond the seeds' spread" if hi < 0 else
                   "not kept: higher on average beyond the seeds' spread" if lo > 0 else
                   "kept: the seeds do not separate the two runs")
        return (head + f"; over {spread['seeds']} seeds the mean difference is {spread['diff_mean']:+.3f} nats "
                f"({spread['level']:.0%} t interval {lo:+.3f} to {hi:+.3f}): {verdict}.")
    verdict = (f"kept, within the {LOSS_TIE} nats the screening counts as a tie" if abs(d) <= LOSS_TIE else
               "kept, and lower" if d < 0 else f"not kept, higher by more than the {LOSS_TIE}-nat tie margin")
    return head + f", one seed each: {verdict}."


def batch_line(df: pd.DataFrame, maxbatch: dict | None = None) -> str:
    mb = maxbatch_of(df, maxbatch)
    found = max_batches_found(mb, main_reversible_trunk(df, mb))
    if not found:
        return "**Batch**: not measured (needs the max-batch searches, `maxbatch.json`)."
    b, r, budget = found
    verdict = f"{r / b:.2f}x the batch" if r > b else "no larger batch"
    return (f"**Batch**: under one budget of {mib(budget)} the reversible trunk fits batch {r} against the "
            f"baseline's {b}: {verdict}." + batch_bought(main_run(df, BASE), main_run(df, REV_MAX)))


def _bound_at_tokens(base: pd.Series, big: pd.Series) -> tuple[int, float, int, float] | None:
    """(run 1's tokens, its loss there, the tokens of run 3's first evaluation after that, run 3's loss there)."""
    tokens = number(base["tokens"])
    if not tokens or not base.get("path") or not big.get("path"):
        return None
    lb, later = val_loss_at(base["path"], tokens), first_evaluation_from(big["path"], tokens)
    return None if lb is None or later is None else (int(tokens), lb, *later)


def batch_bought(base: pd.Series | None, big: pd.Series | None) -> str:
    """What run 3's larger batch bought in time against run 1 (the profile's batch), on this machine; what a GPU
    would add is in `limits`, its loss in the Spent line (against run 2)."""
    c = compare_speed(base, big)
    if c is None:
        return ""
    return (f" Run 3 trained at {c.rev:,.0f} tokens/s against run 1's {c.base:,.0f} here ({pct(c.ratio)}, "
            f"{c.spread_text()}).")


def bench_speed(bench: dict | None, rev: pd.Series | None):
    """Run 2's trunk over the residual in notebook 05's interleaved bench (`bench_ratio`: the median of the rounds'
    ratios and its bootstrap interval), when the bench timed that trunk at run 2's batch; else None."""
    if not bench or rev is None or number(bench.get("batch")) != number(rev.get("batch_size")):
        return None
    return bench_ratio(bench, rev.get("trunk"))


def _price(verdict: str, ratio: float, interleaved: bool) -> str:
    """What a same-batch speed verdict says of recomputation's price. A faster reversible step means something
    other than arithmetic set the time: in an interleaved bench the machine itself, between runs timed minutes
    apart most likely a change of load."""
    faster = ("faster: on this machine something other than arithmetic set the step time (moving the stored "
              "trunk's kept activations through memory, the allocator), and it outweighed the recomputation"
              if interleaved else
              "faster, which recomputing cannot make a step: the runs were timed minutes apart, so a change in the "
              "machine's load is the likelier cause, and no price was measured here (notebook 05's interleaved "
              "bench times the two steps side by side)")
    return {NOISY: NOISY + " whether anything was paid",
            "slower": f"slower by {(1 - ratio) * 100:.0f}%, the price of recomputing each block",
            "faster": faster}[verdict]


def throughput_line(base: pd.Series | None, rev: pd.Series | None, bench: dict | None = None) -> str:
    """The price of recomputation at the same batch: read from notebook 05's interleaved bench when it timed run
    2's trunk (each round steps both trunks under the same load), else from the two runs, timed minutes apart."""
    s = bench_speed(bench, rev)
    if s is not None:
        verdict = {-1: "slower", 1: "faster", 0: NOISY}[s.side(1.0)]
        return (f"**Throughput**: at batch {int(rev['batch_size'])}, timed side by side (notebook 05's bench, one "
                f"step of each trunk per round), the reversible trunk ran at {s.value:.2f}x the baseline's tokens/s "
                f"({s.kind} {s.lo:.2f}-{s.hi:.2f}): {_price(verdict, s.value, interleaved=True)}.")
    c = compare_speed(base, rev)
    if c is None:
        return "**Throughput**: " + _missing(BASE, REV)
    return (f"**Throughput**: at batch {int(base['batch_size'])} the reversible trunk trained at {c.rev:,.0f} "
            f"tokens/s against {c.base:,.0f} ({pct(c.ratio)}, {c.spread_text()}): "
            f"{_price(c.verdict, c.ratio, interleaved=False)}.")


def headline_lines(df: pd.DataFrame, maxbatch: dict | None = None) -> list[str]:
    """The run's headline: memory cut, loss kept, batch gained, throughput paid, and what spending the saved memory
    bought (when the runs that spend it are present) -- one line each, computed."""
    base, rev = main_run(df, BASE), main_run(df, REV)
    lines = [memory_line(base, rev), loss_line(base, rev, df.attrs.get("seeds")), batch_line(df, maxbatch),
             throughput_line(base, rev, df.attrs.get("bench"))]
    return lines + [line for line in (spent_line(df),) if line]


def _gap_to(ref: pd.Series, run: pd.Series) -> tuple[float, bool] | None:
    """run's loss minus ref's at ref's final tokens (both reached them), and whether it is only a lower bound
    (run's first evaluation after that point: more tokens, a loss no higher)."""
    eq = equal_tokens_val(run, ref)
    if eq is not None:
        return eq[1] - eq[2], False
    bound = _bound_at_tokens(ref, run)
    return None if bound is None else (bound[3] - bound[1], True)


def _noise_scale(df: pd.DataFrame) -> float | None:
    """Run 1's gradient noise scale at its end (sequences), as notebook 06 recorded it; None where it did not."""
    from ..assignment.noise import NOISE_FILE, RUN1_END

    path = Path(df.attrs.get("results_dir") or ".") / str(df.attrs.get("profile", "")) / NOISE_FILE
    entry = (read_json_or_note(path, []) or {}).get(RUN1_END)   # a damaged file is no measurement
    value = number(entry.get("b_simple")) if isinstance(entry, dict) else None
    return value if value and value > 0 else None


def _why_batch_lost(df: pd.DataFrame, rev: pd.Series, big: pd.Series) -> str:
    """Why spending the memory on batch lost at a fixed token budget: the steps it gave up, and where its batch
    stands against the measured noise scale (past it, a larger batch stops cutting the steps a loss needs)."""
    s2, s3 = number(rev.get("steps")), number(big.get("steps"))
    if not s2 or not s3:
        return ""
    out = f"run 3 took {int(s3):,} optimizer steps to run 2's {int(s2):,}"
    b_noise = _noise_scale(df)
    if b_noise:
        side = "above" if number(big["batch_size"]) > b_noise else "below"
        out += (f", at a batch {number(big['batch_size']) / b_noise:.1f}x the measured noise scale (B_noise "
                f"{b_noise:.0f} sequences, {side} it)")
    return out


def spent_line(df: pd.DataFrame, label: str = "Spent") -> str | None:
    """What the saved memory bought when it was spent: on batch (run 3) and on depth (run 4), each against run 2
    (the same trunk at the profile's batch and depth) at equal tokens, and, where the batch lost, why. The
    headline says what was not won too; notebook 06 leads its takeaways with it, under its own `label`."""
    rev = main_run(df, REV)
    spent = [(what, main_run(df, name)) for what, name in (("batch", REV_MAX), ("depth", REV_DEEP))]
    spent = [(what, r) for what, r in spent if r is not None]
    if rev is None or not spent:
        return None
    tie, source = seed_tie(df.attrs.get("seeds"))
    parts, won, why = [], [], ""
    for what, r in spent:
        gap = _gap_to(rev, r)
        if gap is None:
            continue
        d, bound = gap
        size = f"batch {int(r['batch_size'])}" if what == "batch" else f"{int(r['n_layer'])} layers"
        parts.append(f"on {what} ({size}) {'at least ' if bound else ''}{d:+.3f} nats")
        if d < -tie and not bound:
            won.append(what)
        elif what == "batch":
            why = _why_batch_lost(df, rev, r)
    if not parts:
        return None
    verdict = (f"it paid on {' and '.join(won)}" if won else
               "neither spending beat the reversible trunk at the profile's batch and depth on this token budget")
    return (f"**{label}**: the saved memory against run 2 at equal tokens (one seed each; a gain must beat the "
            f"{tie:.3f}-nat tie, {source}): " + "; ".join(parts) + f": {verdict}"
            + (f"; {why}." if why else "."))


# -------------------------------------------------------------------------------------------------------------
# What this machine could not measure
# -------------------------------------------------------------------------------------------------------------

def _spreads(df: pd.DataFrame) -> list[tuple[str, float]]:
    """(run, interquartile range / median of its per-step tokens/s) for every main run with per-step timings."""
    out = []
    for _, r in main_runs(df).iterrows():
        q = row_spread(r)
        if q and q[1] > 0:
            out.append((str(r["run"]), (q[2] - q[0]) / q[1]))
    return out


def _seeds(df: pd.DataFrame) -> set:
    """The seeds the main runs trained with (`load_runs` reads each run's from its files)."""
    return {int(s) for s in main_runs(df)["seed"].dropna()} if "seed" in df else set()


def timing_note(df: pd.DataFrame) -> str:
    """What the runs' timings cannot see: each run was timed alone, one after another, and its own steps varied by
    the computed spread."""
    spreads = _spreads(df)
    text = "Runs were timed one after another, so a change in the machine's load between them is in no spread"
    if spreads:
        lo, hi = min(s for _, s in spreads), max(s for _, s in spreads)
        text += (f" (within a run, the interquartile range of per-step tokens/s was {lo:.0%} to {hi:.0%} of the "
                 f"median)")
    return text + "."


def throughput_caveat(df: pd.DataFrame) -> str:
    """Why the runs' tokens/s do not compare as the bars suggest (`timing_note`), and the verdicts of the two
    trunk comparisons against that spread."""
    text = timing_note(df)
    verdicts = [(what, c) for what, c in (("at the same batch", compare_speed(main_run(df, BASE), main_run(df, REV))),
                                          ("at the max batches", compare_speed(main_run(df, BASE_MAX),
                                                                               main_run(df, REV_MAX))))
                if c is not None]
    if verdicts:
        text += " Reversible against baseline: " + "; ".join(f"{what} {pct(c.ratio)}, {c.verdict}"
                                                              for what, c in verdicts) + "."
    return text


def _gpu_gain(df: pd.DataFrame) -> str:
    """What run 3's batch could buy on a GPU whose step time barely grows with the batch (not measured here)."""
    base, big = main_run(df, BASE), main_run(df, REV_MAX)
    b, r = (number(x.get("batch_size")) if x is not None else None for x in (base, big))
    if not b or not r or r <= b:
        return ""
    return (f", where run 3, at {r / b:.1f}x run 1's batch, could take up to {r / b:.1f}x fewer seconds per token "
            f"if its slices keep the GPU busy")


def limits(df: pd.DataFrame, timing: bool = True) -> list[str]:
    """What this machine could not measure, from the runs' own records (devices, timings, seeds); `timing=False`
    leaves out `timing_note` (for a page that shows `throughput_caveat` beside the throughput figure already)."""
    runs = main_runs(df)
    if not len(runs):
        return ["Nothing measured yet: no main runs."]
    devices = sorted(set(runs["device"].dropna().astype(str)))
    out = []
    if not any("cuda" in d.lower() for d in devices):
        ref = published_reference().set_index("key")
        out.append(f"No GPU: every main run ran on {', '.join(devices) or 'an unrecorded device'}. Expected on a GPU, "
                   f"*not measured* here (run the workbook there, colab/README.md, then `python -m rev report "
                   f"--merge`):")
        out += [f"the reference's {ref.loc['tokens_per_s', 'ratio']:.2f}x tokens/s at the same batch with "
                f"{ref.loc['max_batch', 'ratio']:.1f}x the max batch ({PUBLISHED_SOURCE}): on a CPU a step's time "
                f"grows with its batch, on a GPU much less until its cores are busy;",
                "batch slicing: a GPU runs the fewest slices its memory allows, not the CPU's 1,024 rows "
                f"(`python -m rev gpucheck` times both){_gpu_gain(df)};",
                "the allocator's reserved memory above the live bytes counted here, so a max batch found here is an "
                "upper bound there;",
                "bf16 autocast, which halves the stored trunk's activations but not an fp32 or fp64 stream's state."]
    if timing:
        out.append(timing_note(df))
    seeds, spread = _seeds(df), df.attrs.get("seeds")
    if spread and spread.get("tie") is not None:
        out.append(f"Runs 1 and 2 trained on {spread['seeds']} seeds (a final loss moves by {spread['sd']:.3f} nats "
                   f"from seed to seed); every other run trained once, read against the {spread['tie']:.3f}-nat tie "
                   f"that spread implies.")
    elif len(seeds) == 1:
        out.append(f"Every main run trained once, with seed {next(iter(seeds))}: no seed-to-seed spread of the loss "
                   f"was measured, so a loss difference within the {LOSS_TIE}-nat tie margin is a tie by rule, not "
                   f"by measurement.")
    return out
