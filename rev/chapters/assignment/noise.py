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
what the seed alone moves a final loss by is no evidence (`prediction_tolerance`). `check_noise_scale` checks the
estimator a learner writes (exercise 06.4) against `rev.measure.noise_scale` on the same gradients. The measurements are cached in
``results/<profile>/noise_scale.json``.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

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
    """One row per reference: the factors, the run's predicted loss (run 3's, or 3b's) and its predicted gaps to the reference at equal
    steps and at equal tokens (negative: run 3 lower)."""
    return pd.DataFrame([{
        "against": p.against, "its batch": p.base_batch, "batch": p.batch, "step worth": p.steps_factor,
        "token worth": p.tokens_factor, "predicted": p.expected, "as": "a bound" if p.loss is None else "",
        "gap at equal steps": _gap(p.expected, p.reference_at_steps),
        "gap at equal tokens": _gap(p.expected, p.reference_at_tokens)} for p in preds]).set_index("against")


def prediction_tolerance(tie: Tie = FALLBACK_TIE) -> Tie:
    """How close a prediction must come to hold: `PREDICTION_NATS`, or the seed tie where that is wider (a miss
    inside what the seed alone moves a final loss by cannot refute a prediction)."""
    model = Tie(PREDICTION_NATS, "the model's stated tolerance (it ignores the lr schedules)", measured=False)
    if tie.wider_than(model):
        return Tie(tie.nats, f"{tie.source}, wider than the model's {PREDICTION_NATS} nats", tie.measured)
    return model



def prediction_check(preds: list[Prediction], run_dir: str | Path, tie: Tie = FALLBACK_TIE) -> pd.DataFrame:
    """The run's measured validation loss after each prediction's steps against it: the miss in nats and whether it
    holds within `prediction_tolerance(tie)` (`verdicts.side_of_tie`, the boundary inside; a bound holds when the
    run is at most the bound plus it); `holds` is None where the curve could not predict or the log cannot say."""
    tol = prediction_tolerance(tie)
    rows = []
    for p in preds:
        measured = val_loss_after_steps(run_dir, p.steps)
        miss = None if measured is None or p.expected is None else measured - p.expected
        holds = None if miss is None else side_of_tie(miss, tol) < 1 if p.loss is None else side_of_tie(miss, tol) == 0
        rows.append({"against": p.against, "predicted": p.expected, "as": "a bound" if p.loss is None else "a loss",
                     "measured": measured, "miss": miss, "tolerance": tol.nats, "holds": holds})
    return pd.DataFrame(rows).set_index("against")

def check_noise_scale(estimate: Callable[..., float]) -> str:
    """06.4: `estimate(model, get_batch, b_small, n_small, groups, seed)` must give `gradient_noise_scale`'s B_simple
    on the same gradients: a small regression whose noise and signal are known, drawn with the same generator."""
    torch.manual_seed(0)
    model = _Regression(6)
    truth = torch.randn(6)

    def get_batch(b: int, gen: torch.Generator):
        x = torch.randn(b, 6, generator=gen)
        return x, x @ truth + torch.randn(b, generator=gen)

    for b_small, n_small, groups in ((2, 4, 3), (1, 8, 2)):
        want = gradient_noise_scale(model, get_batch, b_small, n_small, groups, seed=1).b_simple
        got = estimate(model, get_batch, b_small, n_small, groups, seed=1)
        assert math.isclose(got, want, rel_tol=1e-9), (
            f"b_small={b_small}, n_small={n_small}, groups={groups}: got {got:.10g}, want {want:.10g}")
    return "your estimator gives rev.measure.noise_scale's B_simple on 2 cases."


class _Regression(torch.nn.Module):
    """A linear model whose call is its loss, as `GPT(x, y)`'s is: what `gradient_noise_scale` differentiates."""

    def __init__(self, width: int):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(width))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return ((x @ self.w - y) ** 2).mean()
