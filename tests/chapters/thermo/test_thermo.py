"""Checks of the irreversibility chapter: exact identities to rounding, O(eta) convergence, the task generator."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from rev.chapters import thermo as th


@pytest.fixture(autouse=True)
def _one_thread():
    # the problems are tiny: threads only add overhead
    with th.torch_threads(1):
        yield


# --- time-reversal defect ----------------------------------------------------------------------------------

@pytest.mark.parametrize("eta", [0.5, 0.1, 0.013])
def test_quadratic_round_trip_is_exactly_minus_eta2_a2_theta(eta):
    pb = th.quadratic_problem(dim=6, seed=3)
    theta = pb.theta0
    got = th.round_trip(pb.update, theta, eta)
    want = th.quadratic_round_trip_prediction(pb.hessian, theta, eta)
    assert torch.allclose(got, want, rtol=0, atol=1e-14 * float(theta.abs().max()))
    # and the defect is exactly -2 eta grad(phi) with phi = (eta/4)|U|^2
    defect = got - theta
    assert torch.allclose(defect, -2 * eta * th.grad_phi(pb, theta, eta), rtol=1e-12, atol=1e-15)


def test_quadratic_ta_and_st_ratios_are_one_to_rounding():
    pb = th.quadratic_problem()
    r = th.measure_potentials(pb, 0.1, 1.0, n_points=3, k_tr=2, n_sub=4)
    for pot in ("TA", "ST"):
        assert abs(r[pot].ratio - 1) < 1e-12
        assert r[pot].error < 1e-12
    assert 0.01 < r["DE"].error < 0.1                       # DE and TR do carry an O(eta) correction


# --- ratios approach 1 with slope one in eta -----------------------------------------------------------------

@pytest.mark.parametrize("make", [th.logistic_problem, th.mlp_problem])
def test_measured_over_predicted_approaches_one_as_eta_halves(make):
    pb = make()
    eta0 = 0.2 / th.top_curvature(pb)
    etas = [eta0, eta0 / 2, eta0 / 4]
    errs = {p: [] for p in th.POTENTIALS}
    for eta in etas:
        r = th.measure_potentials(pb, eta, 4 * eta0, n_points=2, k_tr=3, n_sub=4)
        for p in th.POTENTIALS:
            errs[p].append(r[p].error)
            assert abs(r[p].ratio - 1) <= r[p].error + 1e-15     # the projection is never further off
    for p, e in errs.items():
        assert e[-1] < 0.02, (p, e)
        halvings = [e[i + 1] / e[i] for i in range(len(e) - 1)]
        assert all(0.3 < h < 0.7 for h in halvings), (p, e)
        assert 0.75 < th.loglog_slope(etas, e) < 1.3, (p, e)


def test_gd_follows_the_modified_flow_to_third_order():
    pb = th.logistic_problem()
    etas = [0.4, 0.2, 0.1]
    gd = [th.gd_trajectory(pb, e, 1)[-1] for e in etas]
    bare = [float((th.flow_rk4(pb.update, pb.theta0, e, 8) - g).norm()) for e, g in zip(etas, gd)]
    modified = [float((th.flow_rk4(th.modified_update(pb, e), pb.theta0, e, 8) - g).norm())
                for e, g in zip(etas, gd)]
    assert th.loglog_slope(etas, bare) == pytest.approx(2, abs=0.1)
    assert th.loglog_slope(etas, modified) == pytest.approx(3, abs=0.15)


def test_loglog_slope_and_rounding_level():
    etas = [0.1, 0.05, 0.025]
    assert th.loglog_slope(etas, [3e-2, 1.5e-2, 7.5e-3]) == pytest.approx(1.0)
    assert th.loglog_slope(etas, [1e-15, 2e-16, 3e-15]) is None
    assert th.loglog_slope(etas + [0.2], [3e-2, 1.5e-2, 7.5e-3, 1.0], tail=3) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        th.loglog_slope([0.1], [0.1])


# --- renormalisation ----------------------------------------------------------------------------------------

def test_coupling_recursion_matches_closed_form_and_limits():
    for k in range(-8, 25):
        assert th.coupling_recursion(k) == pytest.approx(th.coupling(k), abs=1e-15)
    assert th.coupling(0) == 0.0
    assert th.coupling(1) == 0.125
    assert abs(th.coupling_recursion(60) - 0.25) < 1e-15          # continuum limit
    assert th.coupling_recursion(-40) < -1e10                      # coarse-graining runs away
    # one refinement halves the distance to the fixed point 1/4
    assert (0.25 - th.coupling(7)) / (0.25 - th.coupling(6)) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        th.coupling_recursion(1.5)


def test_step_halving_measures_the_coupling():
    pb = th.quadratic_problem(dim=5, seed=1)
    ks = [-2, -1, 1, 2, 5]
    got = th.measure_coupling(pb, 1e-3, ks)
    for k, g in zip(ks, got):
        assert g == pytest.approx(th.coupling(k), abs=2e-3 * max(1, 2 ** -k))


def test_renormalised_potential_is_l_plus_g_eta_u2():
    pb = th.mlp_problem()
    theta = pb.theta0.clone().requires_grad_(True)
    u2 = float(pb.update(pb.theta0).pow(2).sum())
    loss0 = float(pb.loss(pb.theta0))
    misses = {}
    for k in (1, 2, 3):
        misses[k] = []
        for eta in (1e-2, 5e-3):
            f_k = float(th.renormalised_potential(pb.loss, eta, k)(theta).detach())
            misses[k].append(abs((f_k - loss0) / (eta * u2) - th.coupling(k)))
    assert max(misses[1]) < 1e-12                      # F_1 = L + (eta/8)|U|^2 exactly: g(1) = 1/8
    for k in (2, 3):
        m = misses[k]
        assert m[0] < 0.02 and 0.4 < m[1] / m[0] < 0.6, m   # g(k) + O(eta)


def test_renormalised_field_raises_the_order_of_the_mismatch():
    pb = th.logistic_problem()
    etas = [0.2, 0.1, 0.05]
    bare = [th.renormalisation_mismatch(pb, e, 2, renormalised=False) for e in etas]
    ren = [th.renormalisation_mismatch(pb, e, 2, renormalised=True) for e in etas]
    assert th.loglog_slope(etas, bare) == pytest.approx(2, abs=0.15)
    assert th.loglog_slope(etas, ren) == pytest.approx(3, abs=0.2)


# --- stochastic thermodynamics ------------------------------------------------------------------------------

@pytest.mark.parametrize("temperature", [1e-6, 0.3, 5.0])
def test_entropy_production_identity_holds_to_machine_precision(temperature):
    g = torch.Generator().manual_seed(0)
    shape = (64, 7)          # a batch of random transitions with random (not gradient) fields
    theta, u, u_next = (torch.randn(shape, generator=g, dtype=torch.float64) for _ in range(3))
    eta = 0.37
    theta_next = theta - eta * u + math.sqrt(2 * eta * temperature) * torch.randn(shape, generator=g,
                                                                                   dtype=torch.float64)
    sigma = th.entropy_production(theta, theta_next, u, u_next, eta, temperature)
    ident = th.entropy_production_identity(theta, theta_next, u, u_next, eta)
    scale = ident.abs().max()
    assert torch.allclose(temperature * sigma, ident, rtol=0, atol=1e-12 * float(scale))


def test_stochastic_ratio_tends_to_its_zero_temperature_value():
    pb = th.logistic_problem()
    df = th.stochastic_limit(pb, 0.2, 2.0, [1e-3, 1e-5, 1e-9, 0.0])
    gap = (df["error"] - df["error"].iloc[-1]).abs().to_numpy()
    assert gap[0] > gap[1] > gap[2]
    assert gap[2] < 1e-3


# --- symmetry ------------------------------------------------------------------------------------------------

def test_gd_charge_shrinks_by_exactly_one_minus_eta2_lprime2_and_flow_conserves_it():
    eta = 0.1
    r = th.balance_drift(eta, 50)
    factors = r["d_gd"][1:] / r["d_gd"][:-1]
    assert np.allclose(factors, 1 - eta ** 2 * r["lprime"][:-1] ** 2, rtol=0, atol=1e-13)
    assert np.allclose(r["d_flow"], r["d_flow"][0], rtol=1e-9)
    assert r["d_gd"][-1] < r["d_gd"][0]                         # toward balance |a| = |b|


def test_drift_rate_matches_modified_flow_prediction():
    errs = [abs(th.drift_rate_ratio(eta, int(round(5 / eta))) - 1) for eta in (0.2, 0.1)]
    assert errs[1] < errs[0] < 0.05


def test_rotation_is_kept_and_rescaling_broken():
    df = th.symmetry_defects(0.05).set_index("map")
    assert (df["loss_change"] < 1e-12).all()
    assert df.loc["rotation", "phi_change"] < 1e-12
    assert df.loc["rotation", "equivariance"] < 1e-12
    assert df.loc["rescaling (c=2)", "phi_change"] > 0.1
    assert df.loc["rescaling (c=2)", "equivariance"] > 0.1


# --- the transformer task -----------------------------------------------------------------------------------

def test_reversal_batch_reverses_and_marks_targets():
    g = torch.Generator().manual_seed(0)
    b = th.reversal_batch(8, 5, 12, 0.0, g)
    assert torch.equal(b.labels, b.source.flip(1))
    assert not b.noise_mask.any()
    assert b.inputs.shape == b.targets.shape == (8, 10)
    assert (b.inputs[:, 5] == 11).all()                                 # separator
    assert (b.targets[:, :5] == -100).all()
    assert torch.equal(b.targets[:, 5:], b.labels)                      # the answer half is predicted
    assert torch.equal(b.inputs[:, 6:], b.labels[:, :-1])               # teacher forcing
    assert int(b.source.max()) <= 10


def test_reversal_label_noise_rate():
    g = torch.Generator().manual_seed(1)
    b = th.reversal_batch(4000, 16, 64, 0.05, g)
    clean = b.source.flip(1)
    wrong = b.labels != clean
    assert torch.equal(wrong, b.noise_mask)                            # a corrupted label is always wrong
    n = wrong.numel()
    rate = wrong.float().mean().item()
    assert abs(rate - 0.05) < 4 * math.sqrt(0.05 * 0.95 / n)
    assert int(b.labels.max()) <= 62                                   # never the separator


def test_transformer_is_causal():
    sizes = th.FLUCTUATION_SIZES["smoke"]
    torch.manual_seed(0)
    model = th.TinyCausalTransformer(sizes)
    b = th.reversal_batch(2, sizes.seq_len, sizes.vocab_size, 0.0, torch.Generator().manual_seed(0))
    x2 = b.inputs.clone()
    x2[:, -1] = (x2[:, -1] + 1) % (sizes.vocab_size - 1)
    with torch.no_grad():
        a, c = model(b.inputs), model(x2)
    assert torch.allclose(a[:, :-1], c[:, :-1], atol=1e-6)
    assert not torch.allclose(a[:, -1], c[:, -1])


def test_lr_shock_arms_share_the_past_and_change_the_lr():
    sizes = th.FLUCTUATION_SIZES["smoke"].replace(change_step=6, total_steps=12, window=3)
    for kind in th.MODELS:
        runs = th.lr_shock_experiment(kind, sizes, seed=0)
        assert set(runs) == {5.0, 0.2, 1.0}
        ref = runs[1.0]
        for f, df in runs.items():
            assert len(df) == 12
            assert np.array_equal(df["update_norm"][:6], ref["update_norm"][:6])
            assert np.allclose(df["lr"][6:], th.base_learning_rate(kind, sizes) * f)
        summary = th.fluctuation_summary(runs, sizes).set_index("factor")
        assert summary.loc[1.0, "response_raw"] == pytest.approx(1.0)
        assert th.fluctuation_verdict(summary.reset_index()) in ("ordinary", "anomalous")


def test_noise_floor_and_scan():
    sizes = th.FLUCTUATION_SIZES["smoke"].replace(change_step=6, total_steps=12, window=3, noise=0.05)
    p, others = 0.05, sizes.vocab_size - 2
    assert th.noise_floor(sizes) == pytest.approx(-(0.95 * math.log(0.95) + p * math.log(p / others)))
    assert th.noise_floor(sizes.replace(noise=0.0)) == 0.0
    scan = th.lr_scan("linear", sizes, multipliers=(0.5, 2.0))
    assert list(scan.base_lr) == pytest.approx([sizes.linear_lr * 0.5, sizes.linear_lr * 2.0])
    assert set(scan.verdict_over_eta2) <= {"ordinary", "anomalous"}


def test_each_arm_continues_exactly_from_the_shared_state():
    # the control arm, run after two other arms, must equal the control run on its own
    sizes = th.FLUCTUATION_SIZES["smoke"].replace(change_step=6, total_steps=12, window=3)
    for kind in th.MODELS:
        after_others = th.lr_shock_experiment(kind, sizes, factors=(5.0, 0.2, 1.0))[1.0]
        alone = th.lr_shock_experiment(kind, sizes, factors=(1.0,))[1.0]
        assert np.array_equal(after_others["update_norm"], alone["update_norm"])
        assert np.array_equal(after_others["loss"], alone["loss"])


def test_windowed_variance():
    v = th.windowed_variance([1, 2, 3, 4, 10], 3, detrend=False)
    assert np.isnan(v[:2]).all()
    assert v[2] == pytest.approx(1.0)
    assert v[4] == pytest.approx(np.var([3, 4, 10], ddof=1))
    # about the window's own line: a pure trend has no fluctuation
    d = th.windowed_variance(np.arange(10.0) * 3 + 1, 4)
    assert np.allclose(d[3:], 0.0, atol=1e-12)
    y = np.array([0.0, 1.0, 0.0, 1.0])
    resid = y - np.polyval(np.polyfit(np.arange(4), y, 1), np.arange(4))
    assert th.windowed_variance(y, 4)[-1] == pytest.approx((resid ** 2).sum() / 3)
    # a break restarts the windows: a jump in level is not variance
    step = np.r_[np.ones(6), 5 * np.ones(6)]
    v = th.windowed_variance(step, 3, breaks=(6,))
    assert np.isnan(v[6:8]).all() and np.allclose(v[8:], 0.0) and np.allclose(v[2:6], 0.0)


# --- bad input -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("eta", [0.0, -0.1, float("nan")])
def test_nonpositive_eta_is_rejected(eta):
    pb = th.quadratic_problem()
    with pytest.raises(ValueError, match="eta"):
        th.round_trip(pb.update, pb.theta0, eta)
    with pytest.raises(ValueError, match="eta"):
        th.measure_potentials(pb, eta, 1.0)
    with pytest.raises(ValueError, match="eta"):
        th.gd_trajectory(pb, eta, 3)
    with pytest.raises(ValueError, match="eta"):
        th.balance_drift(eta, 3)


def test_shape_and_range_errors():
    x = torch.zeros(3, dtype=torch.float64)
    y = torch.zeros(4, dtype=torch.float64)
    with pytest.raises(ValueError, match="shapes must match"):
        th.entropy_production_identity(x, y, x, x, 0.1)
    with pytest.raises(ValueError, match="shapes must match"):
        th.entropy_production(x, x, x, y, 0.1, 1.0)
    with pytest.raises(ValueError, match="temperature"):
        th.entropy_production(x, x, x, x, 0.1, 0.0)
    with pytest.raises(ValueError, match="square"):
        th.quadratic_round_trip_prediction(torch.eye(4, dtype=torch.float64), x, 0.1)
    with pytest.raises(ValueError, match="shapes must match"):
        th.balance_drift(0.1, 3, a0=(1.0, 2.0), b0=(1.0,))
    with pytest.raises(ValueError, match="noise"):
        th.reversal_batch(2, 4, 8, 1.5)
    pb = th.quadratic_problem()
    with pytest.raises(ValueError, match="subset"):
        th.measure_potentials(pb, 0.1, 1.0, potentials=("XX",))
    with pytest.raises(ValueError, match="k_tr"):
        th.measure_potentials(pb, 0.1, 1.0, k_tr=0)
    with pytest.raises(ValueError, match="temperature"):
        th.measure_potentials(pb, 0.1, 1.0, temperature=-1.0)
    with pytest.raises(ValueError, match="1-D"):
        th.gd_trajectory(pb, 0.1, 2, theta0=torch.zeros(2, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="device"):
        th.FluctuationSizes(device="tpu")
    with pytest.raises(ValueError, match="divisible"):
        th.FluctuationSizes(d_model=30, n_head=4)
    with pytest.raises(ValueError, match="window"):
        th.FluctuationSizes(change_step=10, total_steps=20, window=50)
    with pytest.raises(ValueError, match="unknown profile"):
        th.chapter_sizes("auto")
    with pytest.raises(ValueError, match="model kind"):
        th.lr_shock_experiment("cnn", th.FLUCTUATION_SIZES["smoke"])
    with pytest.raises(ValueError, match="factors"):
        th.lr_shock_experiment("linear", th.FLUCTUATION_SIZES["smoke"], factors=(0.0, 1.0))


# --- notebook 08: exercise checks, sizes and figures ------------------------------------------------

def test_exercise_checks_pass_on_the_solutions_and_fail_on_wrong_answers():
    assert th.check_round_trip_defect(lambda pb, theta, eta: -eta ** 2 * pb.ju(theta)).startswith("remainder O(eta^3")
    for wrong in (lambda pb, theta, eta: eta ** 2 * pb.ju(theta),          # sign
                  lambda pb, theta, eta: -2 * eta ** 2 * pb.ju(theta),     # factor
                  lambda pb, theta, eta: -eta ** 2 * pb.update(theta)):    # U instead of J U
        with pytest.raises(AssertionError):
            th.check_round_trip_defect(wrong)
    assert "defect" in th.check_defect_slopes({"defect": 2.0, "ta_error": 1.0})
    with pytest.raises(AssertionError, match="slope"):
        th.check_defect_slopes({"defect": 1.0, "ta_error": 1.0})
    with pytest.raises(AssertionError, match="ta_error"):        # half an order is not first order
        th.check_defect_slopes({"defect": 2.0, "ta_error": 0.5})
    with pytest.raises(AssertionError, match="keys"):
        th.check_defect_slopes({"defect": 2.0})

    def forward(update, theta, eta):
        return theta - eta * update(theta)

    assert "TA error" in th.check_backward_sign_break(forward, {"TA"})
    with pytest.raises(AssertionError, match="notice"):
        th.check_backward_sign_break(forward, {"TA", "ST"})
    with pytest.raises(AssertionError, match="flip"):
        th.check_backward_sign_break(th.reverse_step, {"TA"})


def test_the_default_reverse_step_is_the_one_ta_always_used():
    pb = th.logistic_problem()
    kw = dict(n_points=2, k_tr=2, n_sub=4)
    assert th.measure_potentials(pb, 0.1, 0.4, **kw) == th.measure_potentials(
        pb, 0.1, 0.4, reverse=lambda update, theta, eta: theta + eta * update(theta), **kw)
    assert torch.equal(th.round_trip(pb.update, pb.theta0, 0.1),
                       pb.theta0 - 0.1 * pb.update(pb.theta0) + 0.1 * pb.update(pb.theta0 - 0.1 * pb.update(pb.theta0)))


def test_sizes_cover_every_profile():
    from rev.chapters.thermo.sizes import SIZES
    from rev.base.profiles import PROFILES

    assert set(SIZES) == set(PROFILES)
    sweep, shock = th.chapter_sizes("smoke")
    assert (sweep.n_etas, shock.change_step, shock.total_steps, shock.window) == (4, 60, 120, 30)
    assert th.chapter_sizes("cpu").sweep == th.SweepSizes() and th.SWEEP_SIZES["t4"].n_etas == 7
    assert th.FLUCTUATION_SIZES["full"] == th.FluctuationSizes(transformer_scan=(1 / 3, 3.0), device="auto")


def _small_findings():
    """ChapterFindings at a few steps of every measurement, and the shock runs and sizes it read."""
    sizes = th.FLUCTUATION_SIZES["smoke"].replace(change_step=6, total_steps=12, window=3)
    shock = {kind: th.lr_shock_experiment(kind, sizes) for kind in th.MODELS}
    summaries = {kind: th.fluctuation_summary(runs, sizes) for kind, runs in shock.items()}
    quad = th.quadratic_problem()
    sweep = th.potential_sweep([quad], n_etas=3, total_steps_at_max=2, n_points=1, k_tr=2, n_sub=4)
    slopes = th.slope_table(sweep)
    gk = th.coupling_table(quad, 1e-3, [-2, 0, 3])
    drift = th.drift_table([0.2, 0.1], total_time=2.0)
    f = th.ChapterFindings(
        profile="smoke", shock_sizes=sizes, round_trip=th.round_trip_table(quad, [0.1, 0.01]), slopes=slopes,
        couplings=gk, drift_slope=th.loglog_slope(drift.eta, drift.error), symmetry=th.symmetry_defects(0.05),
        shock=summaries, scans={kind: th.lr_scan(kind, sizes, multipliers=(), base_summary=s)
                                for kind, s in summaries.items()})
    return f, shock, sizes, sweep, slopes, gk, quad


def test_findings_give_figures_and_summary(tmp_path):
    import matplotlib.pyplot as plt

    f, shock, sizes, sweep, slopes, gk, quad = _small_findings()
    th.write_summary(tmp_path / "s.json", f.summary())
    saved = json.loads((tmp_path / "s.json").read_text())
    assert set(saved["verdicts"]) == {f"{k}/{c}" for k in th.MODELS for c in ("response_raw", "response_over_eta2")}
    assert saved["shock_sizes"]["change_step"] == 6
    for fig in (th.plot_coupling(gk), th.plot_error_slopes(sweep, slopes, [quad.name]),
                th.plot_drift({0.1: th.balance_drift(0.1, 20)}), th.plot_shock(shock, sizes)):
        assert fig.axes
        plt.close(fig)


def test_the_setup_table_sets_every_field_beside_the_papers(tmp_path):
    paper = th.paper_sizes()
    assert th.setup_table(paper).same.all()
    assert th.setup_table(paper.replace(seeds=9, window=50, threads=1)).same.all()   # how it is measured, not what
    quick = th.quick_shock_sizes("cpu")
    table = th.setup_table(quick).set_index("field")
    assert list(table.index) == list(th.PAPER_SETUP_FIELDS)
    assert (table.loc["d_model", "here"], table.loc["d_model", "paper"]) == (64, 128)
    assert set(table.index[~table.same]) == set(th.paper_differences(quick)) and table.loc["seq_len", "same"]
    assert th.paper_differences(paper.replace(batch_size=32)) == {"batch_size": (32, 64)}
    # what the notebook will read: the reduced run unless the paper-size cache is there, and then the cache
    assert th.planned_runs(tmp_path, "cpu") == (quick, "reduced, run here")
    assert th.planned_runs(tmp_path, "smoke") == (th.FLUCTUATION_SIZES["smoke"], "run here")
    small = th.FLUCTUATION_SIZES["cpu"].replace(d_model=8, n_head=2, d_ff=16, change_step=6, total_steps=12, window=3,
                                                 batch_size=4)
    runs = th.shock_over_seeds(small, seeds=[0], kinds=["linear"])
    th.save_runs(th.cache_path(tmp_path, "cpu"), runs, th.FLUCTUATION_SIZES["cpu"], "cpu")  # as if paper-size
    sizes, source = th.planned_runs(tmp_path, "cpu")
    assert sizes == th.FLUCTUATION_SIZES["cpu"] and source.startswith("cached")
    assert th.setup_table(sizes).same.all()


# --- the paper's protocol (data, seeds, verdicts) and the potentials along SGD paths ----------------

def test_paper_batch_matches_the_papers_description():
    # tokens drawn from {4..V-1}; 5% of the targets replaced by a uniform draw from {4..V-1}
    g = torch.Generator().manual_seed(2)
    b = th.reversal_batch(4000, 16, 64, 0.05, g, layout="paper")
    assert int(b.source.min()) == 4 and int(b.source.max()) == 63             # the full data range, no specials
    assert int(b.labels.min()) >= 4 and int(b.labels.max()) <= 63
    assert (b.inputs[:, 16] == 3).all()                                        # a reserved token separates
    assert torch.equal(b.targets[:, 16:], b.labels) and (b.targets[:, :16] == -100).all()
    n = b.noise_mask.numel()
    assert abs(b.noise_mask.float().mean().item() - 0.05) < 4 * math.sqrt(0.05 * 0.95 / n)
    clean = b.source.flip(1)
    assert torch.equal(b.labels[~b.noise_mask], clean[~b.noise_mask])         # only the chosen 5% change
    draws = b.labels[b.noise_mask]
    assert int(draws.min()) == 4 and int(draws.max()) == 63                   # the replacement spans {4..V-1}
    # a uniform draw keeps the clean token 1/60 of the time: wrong labels are 5% x 59/60
    kept = (draws == clean[b.noise_mask]).float().mean().item()
    assert abs(kept - 1 / 60) < 4 * math.sqrt(1 / 60 / draws.numel())


def test_paper_layout_is_the_default_from_cpu_up_and_its_noise_floor():
    assert th.FluctuationSizes().layout == "paper" and th.FLUCTUATION_SIZES["cpu"].layout == "paper"
    cpu = th.FLUCTUATION_SIZES["cpu"]
    assert (cpu.d_model, cpu.n_head, cpu.d_ff, cpu.n_layer, cpu.vocab_size, cpu.seq_len, cpu.noise,
            cpu.change_step) == (128, 4, 512, 2, 64, 16, 0.05, 1000) and cpu.seeds >= 3
    assert th.FLUCTUATION_SIZES["full"].seeds > cpu.seeds
    quick = th.quick_shock_sizes("cpu")
    assert (quick.vocab_size, quick.seq_len, quick.noise, quick.layout, quick.seeds) == (64, 16, 0.05, "paper", 3)
    assert th.quick_shock_sizes("full") is None
    p, n = 0.05, 60
    keep = 1 - p + p / n
    assert th.noise_floor(cpu) == pytest.approx(-keep * math.log(keep) - (n - 1) * p / n * math.log(p / n))
    with pytest.raises(ValueError, match="layout"):
        th.reversal_batch(2, 4, 8, 0.1, layout="shuffled")


def test_verdict_over_seeds_is_not_decided_when_seeds_disagree():
    assert th.verdict_over_seeds(["anomalous"] * 3) == "anomalous"
    assert th.verdict_over_seeds(["ordinary", "ordinary"]) == "ordinary"
    assert th.verdict_over_seeds(["anomalous", "ordinary", "anomalous"]) == th.UNDECIDED == "not decided"
    assert th.verdict_over_seeds(["anomalous"]) == th.UNDECIDED                # one seed decides nothing
    # through the table: seed 1 flips the transformer's direction measure
    rows = []
    for seed, (up, down) in enumerate([(0.5, 0.8), (0.9, 0.7), (0.4, 0.6)]):
        for f, r in ((5.0, up), (0.2, down), (1.0, 1.0)):
            rows += [dict(kind=k, seed=seed, measure="direction", factor=f, response=r if k == "transformer" else
                          {5.0: 2.0, 0.2: 0.5, 1.0: 1.0}[f]) for k in ("transformer", "linear")]
    v = th.verdict_table(pd.DataFrame(rows)).set_index("kind")
    assert v.loc["transformer", "verdict"] == th.UNDECIDED and v.loc["transformer", "seeds"] == "0:a 1:o 2:a"
    assert v.loc["linear", "verdict"] == "ordinary"
    assert th.claim_status(v.reset_index(), "direction") == th.UNDECIDED


def test_seed_table_measures_and_the_variance_is_fluctuation_summarys():
    sizes = th.FLUCTUATION_SIZES["smoke"].replace(change_step=6, total_steps=12, window=3, layout="paper")
    runs = th.shock_over_seeds(sizes, seeds=[0, 1], kinds=["linear"])
    table = th.seed_table(runs, sizes)
    assert set(table.measure) == set(th.MEASURES) and set(table.seed) == {0, 1}
    assert np.allclose(table[table.factor == 1.0].response, 1.0)
    up = table[(table.factor == 5.0) & (table.measure == "update")]
    direct = table[(table.factor == 5.0) & (table.measure == "direction")]
    assert np.allclose(up.ratio.to_numpy(), 5 * direct.ratio.to_numpy())        # |dtheta| = eta |dtheta|/eta
    var = table[(table.seed == 0) & (table.measure == "variance")].set_index("factor").response
    ref = th.fluctuation_summary(runs["linear"][0], sizes).set_index("factor").response_over_eta2
    assert np.allclose(var.sort_index(), ref.sort_index())
    assert len(th.per_seed_table(table)) == 2 * len(th.MEASURES)


def test_cached_runs_round_trip_and_are_used_only_when_they_match(tmp_path):
    sizes = th.FLUCTUATION_SIZES["smoke"].replace(change_step=6, total_steps=12, window=3)
    runs = th.shock_over_seeds(sizes, seeds=[0], kinds=["linear"])
    th.save_runs(tmp_path / "smoke" / "thermo_shock.json", runs, sizes, "smoke")
    back, saved = th.load_runs(th.cache_path(tmp_path, "smoke"))
    assert saved == sizes
    assert np.allclose(back["linear"][0][5.0].update_norm, runs["linear"][0][5.0].update_norm, rtol=1e-6)
    # the smoke profile's sizes differ from these: the notebook runs its own instead of the stale cache
    _, used, source = th.notebook_runs(tmp_path, "smoke")
    assert used == th.FLUCTUATION_SIZES["smoke"] and "cached" not in source


@pytest.mark.parametrize("make", [th.logistic_problem, th.mlp_problem])
def test_sgd_path_potentials_approach_eta_over_4_u2_with_slope_one(make):
    pb = make()
    kw = dict(n_etas=5, total_steps_at_max=4, n_points=3, k_tr=4, n_sub=8)
    # in expectation: the relative error averaged over three minibatch streams, then fitted against eta
    sweep = pd.concat([th.potential_sweep([pb], batch_size=16, seed=s, **kw) for s in range(3)])
    mean = sweep.groupby(["problem", "potential", "eta"], sort=False, as_index=False).error.mean()
    slopes = th.slope_table(mean).set_index("potential")
    assert set(slopes.index) == set(th.POTENTIALS)
    for pot in th.POTENTIALS:
        assert 0.8 < slopes.loc[pot, "slope_tail"] < 1.25, (pot, slopes.loc[pot, "slope_tail"])
    assert slopes.error_at_smallest_eta.max() < 0.05
    # the path really is SGD: it leaves the full-batch gradient-descent path
    gd = th.potential_sweep([pb], **kw)
    assert not np.allclose(sweep[sweep.index.isin(gd.index)].error.to_numpy()[:len(gd)], gd.error.to_numpy())
    assert th.potential_sweep([th.quadratic_problem()], n_etas=2, batch_size=4).empty   # no data, no SGD
