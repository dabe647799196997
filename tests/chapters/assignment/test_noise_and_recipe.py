"""Notebook 06's predictions from the noise scale and the recipe sweep's reading, on hand-made run logs and rows."""
import csv

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

from rev.chapters.assignment.noise import (PREDICTION_NATS, predict, prediction_lines,  # noqa: E402
                                          prediction_tolerance, verdicts)
from rev.chapters.shared.verdicts import FALLBACK_TIE, Tie  # noqa: E402
from rev.chapters.assignment.recipe import CELLS, RECIPE, plot_sweep, sweep_finding  # noqa: E402

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
    lines = " ".join(prediction_lines([p], 10.0, SEQ))
    assert "worth 1.80 of run 1's" in lines and "below run 1 at equal steps" in lines

    hit = _run(tmp_path / "hit", batch=90, steps=100, val_at=lambda s: curve(1.8 * s) + PREDICTION_NATS / 2)
    miss = _run(tmp_path / "miss", batch=90, steps=100, val_at=lambda s: curve(1.8 * s) + 3 * PREDICTION_NATS)
    assert verdicts([p], hit).loc["run 1", "verdict"] == "held"
    assert verdicts([p], miss).loc["run 1", "verdict"].startswith("missed by 0.30 nats (worse")
    # a measured seed tie wider than the model's tolerance widens it: a 0.3-nat miss inside a 0.5-nat tie holds
    seeds = Tie(0.5, "the seed tie measured on runs 1 and 2 over 3 seeds", measured=True)
    assert verdicts([p], miss, seeds).loc["run 1", "verdict"] == "held"
    assert verdicts([p], miss, seeds).loc["run 1", "tolerance (nats)"] == 0.5
    assert prediction_tolerance(FALLBACK_TIE).nats == PREDICTION_NATS       # a narrower tie never tightens it


def test_a_miss_of_exactly_the_tolerance_holds(tmp_path):
    """A prediction of 5.0 against a measured 5.25 with a 0.25-nat seed tie (both exact in binary): held; the
    strict `<` would call it missed. A hair more is a miss."""
    flat = _run(tmp_path / "ref", batch=10, steps=400, val_at=lambda s: 5.0)
    p = predict(flat, "run 1", 10, 90, 100, SEQ, noise_scale=10.0)
    tie = Tie(0.25, "measured", measured=True)
    at = _run(tmp_path / "at", batch=90, steps=100, val_at=lambda s: 5.25)
    assert verdicts([p], at, tie).loc["run 1", "verdict"] == "held"
    beyond = _run(tmp_path / "beyond", batch=90, steps=100, val_at=lambda s: 5.25 + 2 ** -20)
    assert verdicts([p], beyond, tie).loc["run 1", "verdict"].startswith("missed by 0.25")


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
    lines = " ".join(prediction_lines([end, start], 10.0, SEQ))
    assert "Against run 1, step-0 scale (batch 10, B_simple 2.5)" in lines and "(batch 10, B_simple 10)" in lines
    assert "of run 1's and one of its tokens" in lines and "step-0 scale's and" not in lines   # the run, named
    broken = pd.DataFrame({B_SIMPLE: [float("inf"), 10.0]}, index=[RUN1_START, RUN1_END])
    assert [p.against for p in trajectory(ref, "run 1", 10, 90, 100, SEQ, broken)] == ["run 1"]


def test_a_point_beyond_the_reference_becomes_a_bound(tmp_path):
    ref = _run(tmp_path / "ref", batch=10, steps=50, val_at=lambda s: 6.0 - 0.01 * s)
    p = predict(ref, "run 1b", 10, 90, 100, SEQ, noise_scale=10.0)
    assert p.loss is None and p.bound == pytest.approx(5.5) and p.expected == p.bound


def _sweep(losses: dict, states: dict | None = None) -> pd.DataFrame:
    rows = []
    for cell in CELLS:
        state = (states or {}).get(cell.name, "learnt")
        rows.append({"cell": cell.name, "peak lr": 2e-3 if cell.lr_rule == "none" else 6e-3, "rate": cell.lr_rule,
                     "warm-up": "floor" if cell.floor else "tokens", "warm-up steps": 20 if cell.floor else 2,
                     "recipe": "the recipe" if cell == RECIPE else "", "val loss": losses[cell.name], "state": state})
    return pd.DataFrame(rows).set_index("cell")


def test_the_sweep_reading_follows_its_numbers():
    names = [c.name for c in CELLS]   # the recipe, the profile's rate, a token-counted warm-up
    assert names[0] == RECIPE.name and len(CELLS) == 3 and {c.lr_rule for c in CELLS} == {"none", "sqrt"}
    best = _sweep(dict(zip(names, [4.5, 4.9, 5.8])), {names[2]: "stalled"})
    text = sweep_finding(best, steps=30, seed=3)
    assert "recipe's cell ends lowest, at 4.500" in text and f"{names[2]} (stalled)" in text
    assert "one seed (3) and 30 steps" in text
    # the recipe (the sqrt rate, 6e-3, the highest tried) lowest: the sweep does not bracket the best rate
    assert "does not bracket the best rate" in text and "(0.0060)" in text
    worse = _sweep(dict(zip(names, [4.5, 4.4, 5.8])))
    assert "0.100 above the lowest (lr-none_warmup-floor" in sweep_finding(worse) and "lowest of 3" in sweep_finding(worse)
    assert "bracket" not in sweep_finding(worse)          # the lowest ran at the lower rate: a higher one was tried
    tie = _sweep(dict(zip(names, [4.5, 4.49, 5.8])))
    assert "a tie with the lowest (lr-none_warmup-floor, 0.010 below it)" in sweep_finding(tie)
    broke = _sweep(dict(zip(names, [float("nan"), 4.9, 5.8])), {RECIPE.name: "diverged"})
    assert "recipe's own cell diverged" in sweep_finding(broke)
    texts = [t.get_text() for t in plot_sweep(best).axes[0].texts]
    assert len(texts) == 4 and any(t.startswith("not run") for t in texts)


def test_the_miss_is_explained_by_how_much_the_noise_scale_grew():
    from rev.chapters.assignment.noise import RUN1_END, RUN1_START, noise_growth_line

    noise = pd.DataFrame({"B_simple (sequences)": [4.0, 80.0]}, index=[RUN1_START, RUN1_END])
    text = noise_growth_line(noise, 16, 160)
    # (1 + 80/16) / (1 + 80/160) = 4.00 at the end; (1 + 4/16) / (1 + 4/160) = 1.22 at the start
    assert "grew 20.0x" in text and "worth 4.00 of one at batch 16" in text and "1.22 by the start's" in text
    assert "the most a larger batch can buy" in text
    fell = noise_growth_line(noise.iloc[::-1].set_axis([RUN1_START, RUN1_END]), 16, 160)
    assert "fell to 0.05x its start" in fell and "no upper limit" in fell and "the most" not in fell
