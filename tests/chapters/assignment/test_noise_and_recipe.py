"""Notebook 06's predictions from the noise scale, their check against a run, the estimator exercise's check and the
recipe sweep's cells, on hand-made run logs and rows."""
import csv

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

from rev.chapters.assignment.noise import (PREDICTION_NATS, check_noise_scale, predict,  # noqa: E402
                                          prediction_check, prediction_tolerance)
from rev.chapters.shared.verdicts import FALLBACK_TIE, Tie  # noqa: E402
from rev.chapters.assignment.recipe import CELLS, RECIPE, plot_sweep  # noqa: E402

SEQ = 16


def _run(folder, batch, steps, val_at):
    """A log whose validation loss after s steps is val_at(s), evaluated every step."""
    folder.mkdir(parents=True)
    with open(folder / "log.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "tokens", "loss", "lr", "grad_norm", "tokens_per_s", "val_loss"])
        for s in range(steps):
            w.writerow([s, (s + 1) * batch * SEQ, val_at(s + 1), 1e-3, 1.0, 1000, val_at(s + 1)])
    return folder


def test_run_3_is_placed_on_the_reference_curve_at_the_step_the_trade_off_makes_equivalent(tmp_path):
    curve = lambda s: 6.0 - 0.002 * s           # noqa: E731  the reference: 0.002 nats per step
    ref = _run(tmp_path / "ref", batch=10, steps=1000, val_at=curve)
    # B_noise = 10 = the reference's batch: S(10) = 2 S_min, S(90) = 10/9 S_min; one step of batch 90 is worth 1.8
    p = predict(ref, "run 1", 10, 90, 100, SEQ, noise_scale=10.0)
    assert p.steps_factor == pytest.approx(1.8) and p.loss == pytest.approx(curve(180))
    assert p.tokens_factor == pytest.approx(0.2)          # 1.8 steps' worth of tokens out of 9
    assert p.reference_at_steps == pytest.approx(curve(100)) and p.reference_at_tokens == pytest.approx(curve(900))

    hit = _run(tmp_path / "hit", batch=90, steps=100, val_at=lambda s: curve(1.8 * s) + PREDICTION_NATS / 2)
    miss = _run(tmp_path / "miss", batch=90, steps=100, val_at=lambda s: curve(1.8 * s) + 3 * PREDICTION_NATS)
    assert prediction_check([p], hit).loc["run 1", "holds"] == True   # noqa: E712
    missed = prediction_check([p], miss).loc["run 1"]
    assert missed["holds"] == False and missed["miss"] == pytest.approx(0.3)   # noqa: E712
    # a measured seed tie wider than the model's tolerance widens it: a 0.3-nat miss inside a 0.5-nat tie holds
    seeds = Tie(0.5, "the seed tie measured on runs 1 and 2 over 3 seeds", measured=True)
    assert prediction_check([p], miss, seeds).loc["run 1", "holds"] == True   # noqa: E712
    assert prediction_check([p], miss, seeds).loc["run 1", "tolerance"] == 0.5
    assert prediction_tolerance(FALLBACK_TIE).nats == PREDICTION_NATS       # a narrower tie never tightens it


def test_a_miss_of_exactly_the_tolerance_holds(tmp_path):
    """A prediction of 5.0 against a measured 5.25 (or 4.75) with a 0.25-nat seed tie (all exact in binary): held;
    the strict `<` would call it missed. A hair further either way is a miss."""
    flat = _run(tmp_path / "ref", batch=10, steps=400, val_at=lambda s: 5.0)
    p = predict(flat, "run 1", 10, 90, 100, SEQ, noise_scale=10.0)
    tie = Tie(0.25, "measured", measured=True)
    at = _run(tmp_path / "at", batch=90, steps=100, val_at=lambda s: 5.25)
    assert prediction_check([p], at, tie).loc["run 1", "holds"] == True   # noqa: E712
    beyond = _run(tmp_path / "beyond", batch=90, steps=100, val_at=lambda s: 5.25 + 2 ** -20)
    assert prediction_check([p], beyond, tie).loc["run 1", "holds"] == False   # noqa: E712
    # a loss prediction is two-sided: a run far better than predicted misses it too (the model failed), at 4.75 not
    at_low = _run(tmp_path / "at_low", batch=90, steps=100, val_at=lambda s: 4.75)
    assert prediction_check([p], at_low, tie).loc["run 1", "holds"] == True   # noqa: E712
    better = _run(tmp_path / "better", batch=90, steps=100, val_at=lambda s: 4.75 - 2 ** -20)
    assert prediction_check([p], better, tie).loc["run 1", "holds"] == False   # noqa: E712


def test_the_scale_s_trajectory_gives_two_predictions_from_its_two_ends(tmp_path):
    """B_simple at run 1's end (10) and at its first weights (2.5): two predictions, labelled, one per end; a step
    of batch 90 is worth 1.8 of one at batch 10 by the end's scale and (1 + 0.25)/(1 + 2.5/90) = 1.22 by the
    start's."""
    from rev.chapters.assignment.noise import B_SIMPLE, RUN1_END, RUN1_START, trajectory

    curve = lambda s: 6.0 - 0.002 * s           # noqa: E731
    ref = _run(tmp_path / "ref", batch=10, steps=1000, val_at=curve)
    noise = pd.DataFrame({B_SIMPLE: [2.5, 10.0]}, index=[RUN1_START, RUN1_END])
    end, start = trajectory(ref, "run 1", 10, 90, 100, SEQ, noise)
    assert (end.against, start.against) == ("run 1", "run 1, step-0 scale")
    assert end.steps_factor == pytest.approx(1.8) and start.steps_factor == pytest.approx(1.25 / (1 + 2.5 / 90))
    assert start.loss == pytest.approx(curve(100 * start.steps_factor))
    assert (end.reference, start.reference) == ("run 1", "run 1")   # the run, named, not the label
    broken = pd.DataFrame({B_SIMPLE: [float("inf"), 10.0]}, index=[RUN1_START, RUN1_END])
    assert [p.against for p in trajectory(ref, "run 1", 10, 90, 100, SEQ, broken)] == ["run 1"]


def test_a_point_beyond_the_reference_becomes_a_bound(tmp_path):
    ref = _run(tmp_path / "ref", batch=10, steps=50, val_at=lambda s: 6.0 - 0.01 * s)
    p = predict(ref, "run 1b", 10, 90, 100, SEQ, noise_scale=10.0)
    assert p.loss is None and p.bound == pytest.approx(5.5) and p.expected == p.bound
    # a bound holds for any run at or below it (plus the tolerance), however far below: 4.0 is no miss
    below = _run(tmp_path / "below", batch=90, steps=100, val_at=lambda s: 4.0)
    above = _run(tmp_path / "above", batch=90, steps=100, val_at=lambda s: 5.5 + 2 * PREDICTION_NATS)
    assert prediction_check([p], below).loc["run 1b", "holds"] == True   # noqa: E712
    assert prediction_check([p], above).loc["run 1b", "holds"] == False   # noqa: E712


def _sweep(losses: dict, states: dict | None = None) -> pd.DataFrame:
    rows = []
    for cell in CELLS:
        state = (states or {}).get(cell.name, "learnt")
        rows.append({"cell": cell.name, "peak lr": 2e-3 if cell.lr_rule == "none" else 6e-3, "rate": cell.lr_rule,
                     "warm-up": "floor" if cell.floor else "tokens", "warm-up steps": 20 if cell.floor else 2,
                     "recipe": "the recipe" if cell == RECIPE else "", "val loss": losses[cell.name], "state": state})
    return pd.DataFrame(rows).set_index("cell")


def test_the_sweep_brackets_the_recipe_s_rate_from_both_sides_and_plots_every_cell():
    """The recipe, the profile's (lower) rate, the linear rule's (higher) rate, a token-counted warm-up: one factor at
    a time, and the rates tried lie on both sides of the recipe's, so a lowest recipe cell is not its own ceiling."""
    names = [c.name for c in CELLS]
    assert names[0] == RECIPE.name and len(CELLS) == 4
    assert {c.lr_rule for c in CELLS if c.floor} == {"none", "sqrt", "linear"}
    assert [c for c in CELLS if not c.floor] == [CELLS[-1]] and CELLS[-1].lr_rule == RECIPE.lr_rule
    rows = _sweep(dict(zip(names, [4.5, 4.9, 4.7, 5.8])), {names[3]: "stalled"})
    texts = [t.get_text() for t in plot_sweep(rows).axes[0].texts]
    # 4 cells and the 2 corners not run (the profile's and the linear rate with a token-counted warm-up)
    assert len(texts) == 6 and sum(t == "not run" for t in texts) == 2 and any("stalled" in t for t in texts)


def test_the_estimator_check_passes_the_library_s_estimator_and_catches_a_biased_one():
    """06.4's check: a learner's estimator that equals `gradient_noise_scale` passes; one that forgets to remove
    the noise's bias from |G|^2 (takes the big batch's squared norm as |G|^2) is caught."""
    from rev.measure.noise_scale import gradient_noise_scale

    def library(model, get_batch, b_small, n_small, groups, seed=0):
        return gradient_noise_scale(model, get_batch, b_small, n_small, groups, seed).b_simple

    def biased(model, get_batch, b_small, n_small, groups, seed=0):
        ns = gradient_noise_scale(model, get_batch, b_small, n_small, groups, seed)
        return ns.trace / (sum(ns.group_big_sq) / groups)

    assert "2 cases" in check_noise_scale(library)
    with pytest.raises(AssertionError, match="b_small=2, n_small=4, groups=3"):
        check_noise_scale(biased)
