"""Notebook 05: the takeaways and computed findings, Markdown built from the results (so a run that turns out
otherwise reads otherwise).

Every verdict comes from `rev.chapters.shared.verdicts`: a speed verdict only from the interleaved bench (runs
timed apart read "not comparable: timed apart"), and a loss verdict of one seed each against the tie the caller
passes.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...core.model import stored_twin
from ...core.reversible import RECON_LIMIT
from .arms import bench_row
from .exercises import memory_split
from .seeds import seeds_reading, seeds_side
from ..shared.record import RunRecord, equal_tokens
from ..shared.runs import (bench_ratio, round_ratio, speed_ratio_between)
from ..shared.verdicts import (TIMED_APART, Spread, interval_side, loss_words, seed_tie,
                               side_of_tie, speed_verdict, speed_words)
from ...base.units import MIB


# --- takeaways: Markdown computed from the results --------------------------------------------------------

def _bullets(lines: list[str]) -> str:
    return "\n".join(f"- {line}" for line in lines if line)


# --- comparing timings and losses, with their spread ------------------------------------------------------

def against_prediction(ratio: Spread, predicted: float, stream: str = "fp32") -> str:
    """Whether an interleaved speed ratio (reversible / its stored twin, the reversible trunk on `stream`) agrees
    with the cost model's `predicted` one: inside its interval, or on which side (`verdicts.interval_side`)."""
    p = f"the prediction {predicted:.2f}"
    if speed_verdict(ratio) == TIMED_APART:
        return f"{p} cannot be tested on timings taken apart"
    side, against_one = interval_side(ratio.lo, ratio.hi, predicted), interval_side(ratio.lo, ratio.hi, 1.0)
    if side == 0:
        if against_one == 0:
            return f"{p} lies inside that interval too, so whether the cost model holds is just as hard to tell"
        return f"{p} lies inside the interval: the cost model holds on this machine"
    if side < 0:
        return (f"below {p} even at the top of its interval: the reversible step costs more than its extra FLOPs "
                f"(its backward walks the layers one at a time on small tensors"
                + ("" if stream == "fp32" else f" and converts each block's input from its {stream} stream")
                + ", work a FLOP count leaves out)")
    if against_one > 0:
        return (f"above {p} and above 1, though the reversible trunk does strictly more arithmetic: on this machine "
                f"something other than arithmetic (memory traffic, the allocator, other load) set the step time")
    return (f"above {p} even at the bottom of its interval: the extra forward cost less than its FLOPs say, or the "
            f"stored trunk paid for something the count leaves out (moving its kept activations through memory)")


def runs_line(runs: Spread) -> str:
    """The training runs' own speed ratio, shown for what it is: two runs timed apart, so no verdict."""
    return (f"The training runs: {runs.text()}: {TIMED_APART}. They ran minutes apart under whatever else this "
            f"machine was doing then (the evaluation passes and a busy neighbour land on one run and not the "
            f"other), so their ratio is no measurement of the trunks; the bench's rounds share their load.")


def _equal_tokens(a: dict, b: dict) -> tuple[int, float | None, float | None]:
    """(tokens, a's validation loss, b's) at the token count both runs reached (`record.equal_tokens`)."""
    return equal_tokens(RunRecord.of(a), RunRecord.of(b))


# --- notebook 05: the same batch ------------------------------------------------------------------------

@dataclass(frozen=True)
class SameBatchSpeed:
    """Run 2's speed three ways: the cost model's prediction (reversible over its stored twin: the same network,
    one extra trunk forward), the interleaved bench (one step of each trunk per round, so a slow moment hits all
    of them: `bench` reversible over residual, `twin` reversible over its stored twin, which is what the
    prediction is read against) and the two training runs, timed apart (a description, no verdict)."""
    predicted: float
    bench: Spread | None
    runs: Spread | None
    stream: str = "fp32"   # the reversible trunk's stream: conversions cost time only off fp32
    twin: Spread | None = None


def same_batch_speed(predicted: float, bench: dict | None, trunk: str, run1: dict, run2: dict) -> SameBatchSpeed:
    """The speed ratios of notebook 05 (`bench`: a `bench_trunks` result with residual, `trunk` and, where it
    timed it, `trunk`'s stored twin)."""
    return SameBatchSpeed(predicted, bench_ratio(bench, trunk) if bench else None, speed_ratio_between(run2, run1),
                          run2.get("stream", "fp32"), twin_ratio(bench, trunk) if bench else None)


def twin_ratio(bench: dict, trunk: str) -> Spread | None:
    """`trunk`'s speed over its stored twin's in the bench, round by round (`runs.round_ratio`), the reversible
    trunk on the whole batch as the twin runs it where the bench timed that (`arms.bench_row`), so the ratio has
    one cause; None when the bench did not time the twin."""
    rev, twin = bench_row(bench, trunk, whole=True), bench_row(bench, stored_twin(trunk))
    if rev is None or twin is None or not rev.get("step_times") or not twin.get("step_times"):
        return None
    return round_ratio(rev["step_times"], twin["step_times"])


def speed_table(speed: SameBatchSpeed):
    """The speed ratios, one row each, with their spread: the training runs' without an interval (timed apart)."""
    import pandas as pd

    rows = {"predicted (cost model)": {"ratio": speed.predicted, "low": None, "high": None, "spread": "none: a model",
                                       "verdict": "", "n": None}}
    for name, s in (("bench: reversible / stored twin", speed.twin), ("bench: reversible / residual", speed.bench),
                    ("training runs: run 2 / run 1", speed.runs)):
        if s is not None:
            rows[name] = {"ratio": s.value, "low": s.lo, "high": s.hi, "spread": s.kind,
                          "verdict": speed_verdict(s), "n": s.n}
    return pd.DataFrame(rows).T


def speed_finding(speed: SameBatchSpeed) -> str:
    """What the speed ratios say together: the prediction read against the bench's reversible / stored-twin ratio
    (the cost model's own comparison), the bench's reversible / residual verdict (run 2's trunk against run 1's,
    the report's throughput), and the training runs shown as timed apart."""
    lines = [f"Predicted by the cost model (reversible over its stored twin): {speed.predicted:.2f}."]
    if speed.twin is not None:
        lines.append(f"Interleaved bench, reversible against its stored twin (the same network, {speed.twin.n} "
                     f"rounds): {speed_words(speed.twin, 'the reversible step', 'the stored twin')}; "
                     f"{against_prediction(speed.twin, speed.predicted, speed.stream)}.")
    if speed.bench is not None:
        lines.append(f"Interleaved bench, reversible against the residual baseline (run 2's trunk against run 1's): "
                     f"{speed_words(speed.bench, 'the reversible step', 'the residual one')}"
                     + ("" if speed.twin is not None else
                        f"; {against_prediction(speed.bench, speed.predicted, speed.stream)} (no twin was timed, so "
                        f"this ratio mixes the architecture into the prediction's test)") + ".")
    if speed.runs is not None:
        lines.append(runs_line(speed.runs))
    return _bullets(lines)


def same_batch_takeaways(run1: dict, run2: dict, speed: SameBatchSpeed | None = None,
                         twin: dict | None = None, spread: dict | None = None) -> str:
    """Notebook 05's takeaways; `twin` (`arms.paired_twin` on run 2) puts the stored twin's measured loss and
    gradients where the loss gap is attributed; `spread` (`seeds.seed_spread`) reads the gap against the seeds."""
    mem = run2["peak_memory_bytes"] / run1["peak_memory_bytes"]
    act = memory_split(run2)["activations_MiB"] / memory_split(run1)["activations_MiB"]
    layers = run2["model_config"]["n_layer"]
    fair = None if speed is None else speed.twin or speed.bench
    if fair is not None:
        against = "its stored twin" if fair is speed.twin else "the residual baseline"
        speed_line = (f"Speed, from the interleaved bench against {against}: "
                      f"{speed_words(fair, 'the reversible step', against)}; "
                      f"{against_prediction(fair, speed.predicted, speed.stream)}. The training runs' own ratio is "
                      f"{TIMED_APART}.")
    else:
        speed_line = (f"Speed: no interleaved bench, and the training runs are {TIMED_APART}: no speed verdict "
                      f"here.")
    tokens, v2, v1 = _equal_tokens(run2, run1)
    slicing = run2.get("batch_slicing") or {}
    sliced = (f" Its step ran the batch as {slicing['described']} (`rev.measure.slicing`), so backward rebuilt one "
              f"slice's activations at a time: that is how the ratio can fall below 1/{layers}."
              if slicing.get("slices", 1) > 1 else "")
    seeds, tie = seeds_reading(spread), seed_tie(spread)   # one seed each: the measured seed tie where there is one
    gap_side = seeds_side(spread) if seeds else side_of_tie(v2 - v1, tie)
    return _bullets([
        f"At batch {run2['batch_size']} the reversible trunk peaked at {mem:.2f}x the baseline's memory "
        f"({run2['peak_memory_bytes'] / MIB:.1f} vs {run1['peak_memory_bytes'] / MIB:.1f} MiB); the part above "
        f"the static one (activations, temporaries, the loss's logits) was {act:.2f}x, where keeping one of the "
        f"{layers} layers' activations instead of all would give {1 / layers:.2f}x before what both trunks keep."
        + sliced,
        speed_line,
        f"Validation loss {v2:.3f} vs {v1:.3f} ({v2 - v1:+.3f} nats) at {tokens:,} tokens"
        + (f" on seed 0; {seeds}. " if seeds else
           f", one seed each: {loss_words(v2 - v1, 'the reversible trunk', 'the baseline', tie)} "
           f"({tie.source}). ")
        + _attribution(run2, twin, gap_side),
        f"The trained trunk rebuilds its input with relative error {run2['reconstruction_error']:.1e} "
        f"(limit {RECON_LIMIT:g}).",
    ])


def _attribution(run2: dict, twin: dict | None, gap_side: int = 1) -> str:
    """Whose gap the loss gap is: the architecture's, as far as the stored twin measured on run 2's weights shows;
    with `gap_side` 0 (the seeds, or the tie, do not separate the runs) there is no gap to attribute, and the twin
    says only that the memory-free backward moved nothing."""
    arch = f"{run2['trunk']}, h = {run2.get('h', '?')}, against a residual trunk"
    whose = (f"This gap is the architecture's ({arch})" if gap_side else
             "The runs are not separated, so there is no gap to attribute; had there been one, it would be the "
             f"architecture's ({arch})")
    if twin is None:
        return (f"{whose}, not the memory-free backward's: that one computes its stored twin's gradients (the twin "
                f"check above), so the stored {stored_twin(run2['trunk'])} would train to the same loss up to "
                f"round-off.")
    from .arms import GRAD_AGREE

    if twin["grad_rel_error"] >= GRAD_AGREE:
        return (f"On run 2's weights the stored {twin['twin']}'s gradients differ from the reversible trunk's by "
                f"{twin['grad_rel_error']:.1e} (relative), more than {GRAD_AGREE:g}: part of this gap may be the "
                f"rebuilt activations', not the architecture's alone.")
    d = twin["val_loss_reversible"] - twin["val_loss_stored"]
    same = "the reversible trunk's validation loss bit for bit" if d == 0 else \
        f"a validation loss {d:+.1e} nats from the reversible trunk's"
    return (f"{whose}: on run 2's weights the stored {twin['twin']} gives {same} and gradients "
            f"{twin['grad_rel_error']:.1e} apart (the three arms above), so the memory-free backward moved neither.")
