"""Fast checks of the toy dynamics (rev.chapters.integrators.toy) and of the integrators on toy fields."""
from __future__ import annotations

import cmath

import matplotlib
import numpy as np
import pytest
import torch

matplotlib.use("Agg")

from rev.chapters.integrators import toy, toy_plots  # noqa: E402
from rev.core.integrators import decode_state, get_integrator, integrate, invert  # noqa: E402
from rev.core.streams import STREAMS  # noqa: E402

REVERSIBLE = ("leapfrog", "reveuler")


@pytest.fixture(scope="module")
def field() -> toy.TanhField:
    return toy.make_tanh_field(dim=6, expansion=0.1, seed=3)


@pytest.fixture(scope="module")
def x0() -> torch.Tensor:
    return toy.initial_points(32, 6, seed=3)


@pytest.mark.parametrize("name", REVERSIBLE)
def test_integrators_invert_bit_exactly_on_fixed_stream(name, field, x0):
    # straight through rev.core.integrators, no toy helpers in between
    integ = get_integrator(name)
    with toy.single_thread():
        states = integrate(integ, x0, field, 0.1, 48, "fixed")
        back = invert(integ, states[-1], field, 0.1, 48, "fixed")
    assert all(torch.equal(a, b) for a, b in zip(back[-1], states[0]))
    assert back[-1][0].dtype == torch.int64


@pytest.mark.parametrize("name", REVERSIBLE)
def test_roundtrip_error_per_stream(name, field, x0):
    assert toy.roundtrip_error(name, field, x0, 0.1, 64, "fixed") == 0.0
    err64 = toy.roundtrip_error(name, field, x0, 0.1, 64, "fp64")
    err32 = toy.roundtrip_error(name, field, x0, 0.1, 64, "fp32")
    assert err64 < 1e-12
    assert 0 < err32 < 1e-4
    assert err32 > 1e6 * err64  # the stream's precision, not the integrator, sets the floor


def test_fp64_error_profile_stays_small(field, x0):
    prof = toy.error_profile("leapfrog", field, x0, 0.2, 32, "fp64")
    assert prof.shape == (33,)
    assert prof[-1] == 0.0  # the top layer is where the walk starts
    assert prof.max() < 1e-12


@pytest.mark.parametrize("name", REVERSIBLE)
def test_model_band_brackets_measurement(name, field, x0):
    study = toy.depth_study(name, field, x0, 0.1, [2, 8, 32, 96], "fp32")
    assert study.inside_band().all(), (study.measured, study.band_at(study.depths))
    assert (study.lower <= study.upper * 1.25).all()
    assert study.gain[0] == pytest.approx(1.0, rel=0.25)  # P_0 = I, up to probe noise


def test_model_is_zero_on_fixed_stream(field, x0):
    study = toy.depth_study("reveuler", field, x0, 0.1, [4, 16], "fixed")
    assert not study.measured.any() and not study.lower.any() and not study.upper.any()


def test_step_study_error_grows_with_h(field, x0):
    study = toy.step_study("leapfrog", field, x0, [0.02, 0.5], 32, "fp32")
    assert study.measured[1] > study.measured[0]


def test_euler_defect_is_second_order(field, x0):
    res = toy.euler_defect(field, x0, np.geomspace(1e-4, 1e-1, 8))
    assert res.slope == pytest.approx(2.0, abs=0.05)
    # the leading term -h^2 J f is the whole story at small h
    np.testing.assert_allclose(res.defect[:4], res.predicted[:4], rtol=1e-2)


def test_leapfrog_roots():
    for h, lam in [(0.1, 1.0), (0.05, 3.0), (0.1, 2j), (0.3, 0.5 + 1j)]:
        mu_p, mu_q = toy.leapfrog_roots(h, lam)
        for mu in (mu_p, mu_q):
            assert abs(mu ** 2 + 2 * h * lam * mu - 1) < 1e-12
        assert abs(mu_p * mu_q + 1) < 1e-12
        assert abs(mu_p - cmath.exp(-h * lam)) < (h * abs(lam)) ** 2  # physical root ~ exp(-h lam)
    assert abs(toy.leapfrog_roots(0.1, 2j)[1]) == pytest.approx(1.0)  # oscillator: neutral


def test_parasitic_mode_matches_roots():
    res = toy.parasitic_mode(1.0, 0.1, 80)
    assert res.mu_par.real < -1
    assert res.growth_fit == pytest.approx(abs(res.mu_par), rel=1e-6)
    assert res.measured_ratio == pytest.approx(res.mu_par, rel=1e-6)
    assert res.sign_flips == 1.0
    np.testing.assert_allclose(res.w.real, res.predicted.real, atol=1e-10)
    np.testing.assert_allclose(res.parasitic, res.parasitic_predicted, rtol=1e-6)
    # leapfrog's answer has left the true decay far behind by the end
    assert abs(res.w[-1]) > 100 * abs(res.exact[-1])
    osc = toy.parasitic_mode(2j, 0.1, 80)
    assert osc.growth_fit == pytest.approx(1.0, abs=1e-6)


def test_add_sub_failures():
    checks = {s: toy.add_sub_check(s, 1.0, 20_000) for s in ("fp32", "fp64", "fixed")}
    assert checks["fixed"].fail_fraction == 0.0 and checks["fixed"].rms_error == 0.0
    assert 0.1 < checks["fp32"].fail_fraction < 0.9
    assert checks["fp32"].rms_error > 1e6 * checks["fp64"].rms_error
    a, b, back = toy.add_sub_example("fp32")
    assert np.float32(np.float32(a) + np.float32(b)) - np.float32(b) == np.float32(back) != np.float32(a)
    assert toy.add_sub_example("fixed") is None


def test_decode_state_and_spacing():
    x = torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64)
    assert torch.equal(toy.spacing(x, "fp32"), x * 2 * toy.UNIT_ROUNDOFF["fp32"])
    assert torch.equal(toy.spacing(x, "fp64"), x * 2 * toy.UNIT_ROUNDOFF["fp64"])
    assert not toy.spacing(x, "fixed").any()
    assert torch.equal(decode_state((x,), "fp32")[0], x)


def test_single_thread_restores():
    before = torch.get_num_threads()
    with toy.single_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_explorer_figure_draws(field, x0):
    fig = toy_plots.explorer_figure(0.1, 8, "fixed", field, x0)
    assert len(fig.axes) == 2
    matplotlib.pyplot.close(fig)


@pytest.mark.parametrize("bad", [0.0, -0.1])
def test_bad_step_size(bad, field, x0):
    with pytest.raises(ValueError, match="h must be > 0"):
        toy.roundtrip_error("leapfrog", field, x0, bad, 4, "fp64")
    with pytest.raises(ValueError, match="h must be > 0"):
        toy.parasitic_mode(1.0, bad, 10)
    with pytest.raises(ValueError, match="h must be > 0"):
        toy.leapfrog_roots(bad, 1.0)
    with pytest.raises(ValueError):
        toy.euler_defect(field, x0, [0.1, bad])


def test_bad_names_and_depths(field, x0):
    with pytest.raises(ValueError, match="unknown stream"):
        toy.roundtrip_error("leapfrog", field, x0, 0.1, 4, "fp16")
    with pytest.raises(ValueError, match="unknown stream"):
        toy.add_sub_check("bf16")
    with pytest.raises(ValueError, match="unknown integrator"):
        toy.roundtrip_error("rk4", field, x0, 0.1, 4, "fp64")
    with pytest.raises(ValueError, match="depth"):
        toy.roundtrip_error("leapfrog", field, x0, 0.1, 0, "fp64")
    with pytest.raises(ValueError):
        toy.add_sub_check("fp32", ratio=0.0)
    with pytest.raises(ValueError):
        toy.make_tanh_field(dim=1)


# --- exercise checks of notebook 01 (rev.chapters.integrators.exercises), figures (rev.chapters.integrators.toy_plots) --------

def test_walks_are_named_apart_from_core_run_forward():
    import rev.core.reversible as core

    assert not hasattr(toy, "run_forward") and not hasattr(toy, "run_inverse")
    assert hasattr(core, "run_forward")  # the GPT-block walk keeps its name; the toy one is `walk_forward`
    states = toy.walk_forward("reveuler", toy.make_tanh_field(dim=4), toy.initial_points(3, 4), 0.1, 5, "fixed")
    back = toy.walk_back("reveuler", toy.make_tanh_field(dim=4), states[-1], 0.1, 5, "fixed")
    assert len(states) == len(back) == 6
    assert all(torch.equal(a, b) for a, b in zip(back[-1], states[0]))


def test_euler_exercise_check_passes_and_explains():
    from rev.chapters.integrators.exercises import check_euler_there_and_back

    def right(x, f, h):
        x1 = x + h * f(x)
        return x1 - h * f(x1)

    assert "slope 2.00" in check_euler_there_and_back(right)
    with pytest.raises(AssertionError, match="slope 1.00"):
        check_euler_there_and_back(lambda x, f, h: x + h * f(x))  # only the forward step
    with pytest.raises(AssertionError, match="evaluating f at x1"):
        check_euler_there_and_back(lambda x, f, h: x)


def test_leapfrog_exercise_check_passes_and_names_the_mistake():
    from rev.chapters.integrators.exercises import check_leapfrog_inverse

    assert "bit for bit" in check_leapfrog_inverse(lambda cur, nxt, f, h, sub: (sub(nxt, f(cur), 2 * h), cur))
    with pytest.raises(AssertionError, match="coefficient"):
        check_leapfrog_inverse(lambda cur, nxt, f, h, sub: (sub(nxt, f(cur), h), cur))
    with pytest.raises(AssertionError, match="where f is evaluated"):
        check_leapfrog_inverse(lambda cur, nxt, f, h, sub: (sub(nxt, f(nxt), 2 * h), cur))
    with pytest.raises(AssertionError, match="int64"):
        check_leapfrog_inverse(lambda cur, nxt, f, h, sub: (nxt - 2 * h * f(cur), cur))


def test_figures_from_small_runs(field, x0):
    depth = {(n, s): toy.depth_study(n, field, x0, 0.1, [2, 8], s) for n in REVERSIBLE for s in STREAMS}
    step = {(n, s): toy.step_study(n, field, x0, [0.05, 0.2], 8, s) for n in REVERSIBLE for s in STREAMS}
    decay, osc = toy.parasitic_mode(1.0, 0.1, 40), toy.parasitic_mode(2j, 0.1, 40)
    for fig in (toy_plots.band_panels(depth), toy_plots.band_panels(step),
                toy_plots.parasitic_figure(decay, osc, [decay])):
        assert len(fig.axes) >= 2
        matplotlib.pyplot.close(fig)


def test_zero_note_follows_the_values_drawn():
    assert toy_plots.zero_note("fixed", [0.0, 0.0]).startswith("fixed: exactly 0")
    assert "NOT exactly 0" in toy_plots.zero_note("fixed", [0.0, 2e-9]) and "2.0e-09" in toy_plots.zero_note(
        "fixed", [0.0, 2e-9])
