"""Notebook 06, before run 3: what a larger batch should buy, predicted from the gradient noise scale of run 1.

`measure_noise` evaluates the simple noise scale B_simple = tr(Sigma)/|G|^2 (`rev.measure.noise_scale`: gradient
evaluations only, no update), with a bootstrap interval over its groups, at run 1's first weights (the seeded
initialisation run 1 started from), at run 1's end and at run 2's end (the chosen reversible trunk, same batch and
tokens). B_simple is McCandlish et al.'s cheap stand-in for the critical batch B_noise (which needs the Hessian),
and it is used as that here, said so. `predict` turns the scale at run 1's end into what run 3 should reach, from
run 1's and run 1b's own curves and the trade-off

    S = S_min (1 + B_simple / B)  (steps),        E = E_min (1 + B / B_simple)  (tokens):

run 3 after s steps stands where run 1 stood after s * S(B1)/S(B3) steps, and after t tokens where run 1 stood
after t * E(B1)/E(B3) tokens. The model leaves out the learning-rate schedules (each run's cosine ends at its own
last step), so a prediction is stated to within `PREDICTION_NATS`, and never tighter than the seed tie: a miss inside
what the seed alone moves a final loss by is no evidence (`prediction_tolerance`). `verdicts` sets run 3's measured
losses beside the predictions, once run 3 has trained. The measurements are cached in
``results/<profile>/noise_scale.json``.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd
import torch

from ...core.model import GPT, GPTConfig
from ...base.files import read_json, write_json
from ...measure.noise_scale import gradient_noise_scale, steps_ratio, tokens_ratio
from ...base.profiles import ProfileLike, get_profile
from ...training.loop import ensure_data
from ...training.checkpoint import load_model
from ..shared.run_log import read_log, val_loss_after_steps, val_loss_at
from ..shared.runs import profile_dir
from ..shared.verdicts import FALLBACK_TIE, Tie, side_of_tie

NOISE_FILE = "noise_scale.json"
PREDICTION_NATS = 0.1   # how close a prediction that ignores the lr schedules is expected to come, at least
B_SIMPLE = "B_simple (sequences)"   # the noise table's column the predictions read
RUN1_START, RUN1_END = "run 1, step 0", "run 1, end"  # run 1's measured points; the predictions use its end


@dataclass(frozen=True)
class NoiseSizes:
    """Gradient evaluations per measured point: `groups` big batches of `n_small` small ones of `b_small`."""

    b_small: int
    n_small: int
    groups: int


NOISE_SIZES = {"smoke": NoiseSizes(2, 4, 2), "cpu": NoiseSizes(4, 8, 4), "t4": NoiseSizes(4, 8, 4),
               "full": NoiseSizes(4, 8, 8)}


def noise_sizes(profile: ProfileLike) -> NoiseSizes:
    return NOISE_SIZES.get(get_profile(profile).name, NOISE_SIZES["t4"])


def _points(profile: ProfileLike, results: str | Path) -> list[tuple[str, str, Path | None]]:
    """(label, run, checkpoint folder or None for run 1's initial weights) of each point that can be measured."""
    folder = profile_dir(results, profile)
    points = [(RUN1_START, "run1_baseline", None), (RUN1_END, "run1_baseline", folder / "run1_baseline")]
    if (folder / "run2_reversible_same_batch" / "ckpt.pt").exists():
        points.append(("run 2, end", "run2_reversible_same_batch", folder / "run2_reversible_same_batch"))
    return points


def _initial_model(run_dir: Path) -> GPT:
    """Run 1's weights before its first update: `train` seeds torch with the run's seed, then builds the model."""
    cfg = read_json(run_dir / "config.json")
    torch.manual_seed(cfg["train"]["seed"])
    return GPT(GPTConfig.from_dict(cfg["model"]))


def measure_noise(profile: ProfileLike, results: str | Path = "results", data_dir: str | Path = "data",
                  seed: int = 0) -> pd.DataFrame:
    """B_simple at each point of `_points` (in sequences and in tokens, with its bootstrap interval over the groups,
    `NoiseScale.interval`), measured once and cached."""
    prof = get_profile(profile)
    sz = noise_sizes(prof)
    path = profile_dir(results, prof) / NOISE_FILE
    cached = read_json(path) if path.exists() else {}
    data = ensure_data(prof, Path(data_dir), progress=False)
    run1 = profile_dir(results, prof) / "run1_baseline"
    rows = []
    for label, run, folder in _points(prof, results):
        key = {"run": run, "steps": read_json(run1.parent / run / "summary.json").get("steps") if folder else 0,
               "sizes": asdict(sz), "seed": seed, "interval": "bootstrap over groups"}
        hit = cached.get(label)
        if hit is None or hit.get("key") != key:
            model = load_model(folder) if folder is not None else _initial_model(run1)
            ns = gradient_noise_scale(model, lambda b, g: data.get_batch("train", b, prof.seq_len, g),
                                      sz.b_small, sz.n_small, sz.groups, seed=seed)
            lo, hi = ns.interval(seed=seed)
            hit = {"key": key, "trunk": model.cfg.trunk, "loss": ns.loss, "grad_sq": ns.grad_sq,
                   "trace": ns.trace, "b_simple": ns.b_simple, "b_simple_lo": lo, "b_simple_hi": hi}
            cached[label] = hit
            write_json(path, cached)
        rows.append({"point": label, "trunk": hit["trunk"], "training loss": hit["loss"],
                     "|G|^2": hit["grad_sq"], "tr(Sigma)": hit["trace"], B_SIMPLE: hit["b_simple"],
                     "95% interval over groups": f"{hit['b_simple_lo']:.3g}-{hit['b_simple_hi']:.3g}",
                     "B_simple (tokens)": hit["b_simple"] * prof.seq_len})
    return pd.DataFrame(rows).set_index("point")


def noise_scale_for_predictions(noise: pd.DataFrame) -> float:
    """The B_simple the predictions use: run 1's at its end (it grows as the loss falls; run 3 spends most of its
    steps nearer run 1's end than its start)."""
    value = float(noise.loc[RUN1_END, B_SIMPLE])
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"run 1's measured noise scale is {value}: measure with more groups (NOISE_SIZES)")
    return value


@dataclass(frozen=True)
class Prediction:
    """What run 3 (batch `batch`, after `steps` steps) should reach, read off one reference run's curve.

    The trade-off model puts run 3's point at one point of the reference's curve, whichever view is taken (a step
    of run 3 is worth `steps_factor` of the reference's, a token `tokens_factor` of one, and steps x batch =
    tokens): `loss` is the reference's validation loss there, or, when that point lies beyond the reference's last
    evaluation, `bound` (its last loss, which run 3 should be at or below)."""

    against: str
    base_batch: int
    batch: int
    noise_scale: float
    steps: int
    tokens: int
    loss: float | None
    bound: float | None
    reference_at_steps: float | None   # the reference's own loss after run 3's step count
    reference_at_tokens: float | None  # ... and after run 3's token count
    reference: str = ""                # the reference run's name, where `against` labels the prediction itself

    def __post_init__(self) -> None:
        if not self.reference:
            object.__setattr__(self, "reference", self.against)

    @property
    def steps_factor(self) -> float:
        return 1 / steps_ratio(self.batch, self.base_batch, self.noise_scale)

    @property
    def tokens_factor(self) -> float:
        return 1 / tokens_ratio(self.batch, self.base_batch, self.noise_scale)

    @property
    def expected(self) -> float | None:
        return self.loss if self.loss is not None else self.bound


def predict(reference_dir: str | Path, name: str, base_batch: int, batch: int, steps: int, seq_len: int,
            noise_scale: float, reference: str = "") -> Prediction:
    """Run 3's validation loss after `steps` steps at `batch`, from the reference run's curve (`name` labels the
    prediction; `reference` names the run, `name` by default)."""
    tokens = steps * batch * seq_len
    loss = val_loss_after_steps(reference_dir, steps / steps_ratio(batch, base_batch, noise_scale))
    evals = read_log(reference_dir).dropna(subset=["val_loss"])["val_loss"]
    bound = float(evals.iloc[-1]) if loss is None and len(evals) else None
    return Prediction(name, base_batch, batch, noise_scale, steps, tokens, loss, bound,
                      val_loss_after_steps(reference_dir, steps), val_loss_at(reference_dir, tokens), reference)


def trajectory(reference_dir: str | Path, name: str, base_batch: int, batch: int, steps: int, seq_len: int,
               noise: pd.DataFrame) -> list[Prediction]:
    """`predict` from each end of the scale's measured trajectory during run 1: its value at run 1's end (`name`)
    and at its first weights (`name`, step-0 scale). B_simple moves as the loss falls, and run 3's steps span that
    move, so the two predictions bracket what the model can say; neither is chosen after the fact."""
    scales = ((name, float(noise.loc[RUN1_END, B_SIMPLE])), (f"{name}, step-0 scale", float(noise.loc[RUN1_START, B_SIMPLE])))
    return [predict(reference_dir, label, base_batch, batch, steps, seq_len, b, reference=name) for label, b in scales
            if math.isfinite(b) and b > 0]


def _gap(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def prediction_table(preds: list[Prediction]) -> pd.DataFrame:
    """One row per reference: the factors, run 3's predicted loss and its predicted gaps to the reference at equal
    steps and at equal tokens (negative: run 3 lower)."""
    return pd.DataFrame([{
        "against": p.against, "its batch": p.base_batch, "run 3's batch": p.batch, "step worth": p.steps_factor,
        "token worth": p.tokens_factor, "run 3 predicted": p.expected, "as": "a bound" if p.loss is None else "",
        "gap at equal steps": _gap(p.expected, p.reference_at_steps),
        "gap at equal tokens": _gap(p.expected, p.reference_at_tokens)} for p in preds]).set_index("against")


def prediction_lines(preds: list[Prediction], noise_scale: float, seq_len: int) -> list[str]:
    """The predictions in words, written before run 3 trains."""
    lines = [f"Run 1's simple noise scale at its end is B_simple = {noise_scale:.0f} sequences "
             f"({noise_scale * seq_len:,.0f} tokens), taken for the critical batch B_noise."]
    for p in preds:
        side = "above" if p.batch > p.noise_scale else "below"
        where = (f"about {p.loss:.2f} nats" if p.loss is not None else
                 f"at most {p.bound:.2f} nats (its equivalent point lies beyond {p.reference}'s last evaluation)"
                 if p.bound is not None else "where the curve cannot say")
        gaps = []
        for view, ref in (("equal steps", p.reference_at_steps), ("equal tokens", p.reference_at_tokens)):
            g = _gap(p.expected, ref)
            if g is not None:
                gaps.append(f"{abs(g):.2f} nats {'below' if g < 0 else 'above'} {p.reference} at {view}")
        lines.append(
            f"Against {p.against} (batch {p.base_batch}, B_simple {p.noise_scale:.3g}): run 3's batch {p.batch} is "
            f"{side} it, so one of its "
            f"steps is worth {p.steps_factor:.2f} of {p.reference}'s and one of its tokens {p.tokens_factor:.2f}. "
            f"After its {p.steps} steps run 3 should stand at {where}, to within {PREDICTION_NATS} nats (or the seed "
            f"tie, where that is wider)"
            + (f": {' and '.join(gaps)}." if gaps else "."))
    return lines


def prediction_tolerance(tie: Tie = FALLBACK_TIE) -> Tie:
    """How close a prediction must come to hold: `PREDICTION_NATS`, or the seed tie where that is wider (a miss
    inside what the seed alone moves a final loss by cannot refute a prediction)."""
    model = Tie(PREDICTION_NATS, "the model's stated tolerance (it ignores the lr schedules)", measured=False)
    if tie.wider_than(model):
        return Tie(tie.nats, f"{tie.source}, wider than the model's {PREDICTION_NATS} nats", tie.measured)
    return model


def verdicts(preds: list[Prediction], run3_dir: str | Path, tie: Tie = FALLBACK_TIE) -> pd.DataFrame:
    """Run 3's measured validation loss after its steps against each prediction: the miss in nats and whether it
    held, within `prediction_tolerance(tie)` (`verdicts.side_of_tie`; at most the bound plus it where the
    prediction is one), and the measured gaps."""
    measured = val_loss_after_steps(run3_dir, preds[0].steps) if preds else None
    tol = prediction_tolerance(tie)
    rows = []
    for p in preds:
        want = p.expected
        if measured is None or want is None:
            verdict, miss = "not predictable", None
        elif p.loss is None:
            miss = measured - want
            verdict = "held (at most the bound)" if side_of_tie(miss, tol) < 1 else f"missed: {miss:.2f} nats above"
        else:
            miss = measured - want
            verdict = ("held" if side_of_tie(miss, tol) == 0 else
                       f"missed by {abs(miss):.2f} nats ({'worse' if miss > 0 else 'better'} than predicted)")
        rows.append({"against": p.against, "predicted": want, "measured": measured, "miss (nats)": miss,
                     "tolerance (nats)": tol.nats, "verdict": verdict,
                     "gap at equal steps": _gap(measured, p.reference_at_steps),
                     "gap at equal tokens": _gap(measured, p.reference_at_tokens)})
    return pd.DataFrame(rows).set_index("against")


def noise_growth_line(noise: pd.DataFrame, base_batch: int, batch: int) -> str:
    """Why a prediction can miss: B_simple moves as the loss falls (it usually grows), and the predictions take its
    value at run 1's end; run 3 spends its first steps where the scale was its start's, so a step of `batch` bought
    what the start's scale says there."""
    col = B_SIMPLE
    first, last = float(noise.loc[RUN1_START, col]), float(noise.loc[RUN1_END, col])
    at_start, at_end = (1 / steps_ratio(batch, base_batch, b) for b in (first, last))
    moved = (f"grew {last / first:.1f}x" if last >= first else f"fell to {last / first:.2f}x its start")
    direction = ("the most a larger batch can buy; run 3 spends its first steps where the noise scale is small and "
                 "its extra sequences buy little, so it should land above that prediction, by more the larger its "
                 "batch, and nearer the step-0 scale's"
                 if at_end >= at_start else
                 "less than a step bought at the start; that prediction is then no upper limit, and run 3 can land "
                 "on either side of it, the step-0 scale's marking the other end")
    return (f"Why a prediction can miss: B_simple {moved} during run 1 ({first:.1f} sequences at its first weights, "
            f"{last:.1f} at its end). A step at batch {batch} is worth {at_end:.2f} of one at batch {base_batch} by "
            f"the end's B_simple and {at_start:.2f} by the start's. The end's scale gives {direction}.")
