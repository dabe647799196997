"""Chapter 09b (rev.chapters.lowrank): splitting reversibility, the defect as a rank signal, enrichment, the
controller's rules, the reversal backward and measured memory."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from rev.chapters import lowrank as L


def _problem(m=10, dtype=torch.float64):
    g = torch.Generator().manual_seed(0)
    A = -0.5 * torch.eye(m, dtype=dtype) + torch.randn(m, m, generator=g, dtype=dtype) / math.sqrt(m)
    C = torch.randn(m, m, generator=g, dtype=dtype) / math.sqrt(m)
    F = torch.randn(3, m, m, generator=g, dtype=dtype)
    return F, torch.randn(3, generator=g, dtype=dtype), A, C


def test_full_rank_is_the_dense_flow_and_reversible_to_roundoff():
    F, p, A, C = _problem()
    st = L.from_dense(F, 10)
    assert torch.allclose(L.ksl_step(st, p, A, C, 0.1).dense(), L.dense_step(F, p, A, C, 0.1), atol=1e-12)
    assert L.defect(st, p, A, C, 0.1).max() < 1e-13
    assert L.roundtrip_defect(st, p, A, C, 0.1).max() < 1e-13


def test_reverse_map_inverts_the_low_rank_step_at_any_rank():
    F, p, A, C = _problem()
    assert L.roundtrip_defect(L.from_dense(F, 3), p, A, C, 0.1).max() < 1e-12


def test_defect_grows_linearly_in_h_on_a_deficient_state():
    F, p, A, C = _problem()
    st, hs = L.from_dense(F, 3), [1e-3, 3e-3, 1e-2, 3e-2]
    d = [float(L.defect(st, p, A, C, h).mean()) for h in hs]
    assert 0.9 < np.polyfit(np.log(hs), np.log(d), 1)[0] < 1.1
    assert min(d) > 1e-6


def test_enrichment_lowers_the_defect_and_keeps_bases_orthonormal():
    F, p, A, C = _problem()
    st = L.from_dense(F, 3)
    rich = L.enrich(st, L.field(st.dense(), p, A, C), 3, 1e-6, torch.Generator().manual_seed(0))
    assert rich.rank == 6
    eye = torch.eye(6, dtype=F.dtype)
    assert torch.allclose(rich.X.mT @ rich.X, eye, atol=1e-12) and torch.allclose(rich.V.mT @ rich.V, eye, atol=1e-12)
    assert torch.diagonal(rich.S, dim1=-2, dim2=-1)[:, 3:].min() > 0  # alpha, never exact zeros
    assert L.defect(rich, p, A, C, 0.01).mean() < 0.7 * L.defect(st, p, A, C, 0.01).mean()


def test_rho():
    F, *_ = _problem()
    st = L.from_dense(F, 4)
    s = torch.linalg.svdvals(F)
    assert torch.allclose(L.rho(st), s[:, 3] / s[:, 0], rtol=1e-8)


def test_controller_follows_the_thresholds():
    c = L.RankController(tau_warn=1.0, tau_safe=0.1, tau_rank=2.0, tau_svd=1e-3, tau_grad=1e-3, spacing=8, rank=2,
                         max_rank=8, rank_step=2)
    d = c.decide(1.5, 0.5)
    assert d["halve"] and not d["enrich"] and (c.spacing, c.rank) == (4, 2)
    d = c.decide(3.0, 0.5)
    assert d["halve"] and d["enrich"] and (c.spacing, c.rank) == (2, 4)
    d = c.decide(0.05, 0.5)  # the idea's rule: grow by one step (halving is the fast retreat, not doubling)
    assert d["lengthen"] and not d["enrich"] and (c.spacing, c.rank) == (3, 4)
    d = c.decide(0.5, 1e-4)
    assert not d["halve"] and not d["lengthen"] and d["enrich"] and (c.spacing, c.rank) == (3, 6)
    for _ in range(3):
        c.decide(5.0, 0.0)
    assert c.rank == 8 and c.spacing == 1


def test_reversal_gradient_matches_dense_at_full_rank_and_reloads_when_asked():
    torch.manual_seed(0)
    model = L.MatrixODE(4, 0)
    x, y = L.make_digits(4, 0, side=2)
    fid = L.gradient_fidelity(model, x, y, 4, 2, math.inf)
    assert fid["grad_rel_err"] < 1e-3 and fid["reloads"] == 0 and fid["kept"] == 2
    assert L.gradient_fidelity(model, x, y, 4, 2, 0.0)["reloads"] == 2  # every rebuilt state reloaded
    assert L.gradient_fidelity(model, x, y, 1, 2, math.inf)["grad_rel_err"] > 1e-2  # rank 1 is far from dense


def test_peak_memory_is_measured_and_grows_with_kept_states():
    model = L.MatrixODE(6, 0)
    x, y = L.make_digits(4, 0, side=3)
    assert L.step_peak_bytes(model, x, y, 6, 1, math.inf) > L.step_peak_bytes(model, x, y, 6, 9, math.inf) > 0


def test_paired_sign_flip_is_exact():
    assert L.paired_sign_flip([1.0] * 8) == 2 / 256
    assert L.paired_sign_flip([1, -1, 1, -1]) == 1.0


def _ctl(rule, tau_svd=1e-3, tau_rank=0.1):
    return L.RankController(tau_warn=math.inf, tau_safe=0.0, tau_rank=tau_rank, tau_svd=tau_svd, tau_grad=1.0,
                            spacing=1, rank=3, max_rank=10, rank_step=1, rule=rule)


def test_corrected_rule_waits_for_an_empty_direction_and_specified_does_not():
    assert _ctl("specified").decide(0.01, 1e-6)["enrich"]  # rho alone fires, although delta is small
    assert not _ctl("corrected").decide(0.01, 1e-6)["enrich"]
    assert not _ctl("corrected").decide(0.5, 1e-6)["enrich"]  # the last direction is still empty: wait
    assert _ctl("corrected").decide(0.5, 0.5)["enrich"]


def test_the_rho_clause_fights_enrichment_on_a_stream():
    F, p, A, C = _problem()
    st = L.from_dense(F, 3)
    rich = L.enrich(st, L.field(st.dense(), p, A, C), 1, 1e-6, torch.Generator().manual_seed(0))
    assert L.rho(rich).max() < 1e-3  # a fresh direction enters at alpha: rho is small by construction
    tau_rank = 0.5 * float(L.defect(st, p, A, C, 0.1).mean())
    ranks = {rule: L.enrichment_trace(st, p, A, C, 0.1, _ctl(rule, 0.1, tau_rank), 1e-6, 16,
                                      torch.Generator().manual_seed(0))[-1]["rank"]
             for rule in ("specified", "corrected")}
    assert ranks["specified"] == 10 and 3 < ranks["corrected"] < 10


def test_probe_is_not_swamped_by_the_tiny_initial_state():
    model = L.MatrixODE(6, 0)
    x, _ = L.make_digits(4, 0, side=3)
    low, full = model.probe(x, 2)[0], model.probe(x, 6)[0]
    assert full < 1e-5 < low < 2.0  # the first steps' h |R| / alpha would be far above 1


_SMALL = L.LowRankSizes(m=4, batch=4, side=2, seeds=2, rank0=1, spacings=(2,), rounds=4, calib_seeds=1, rank_step=1,
                        layers=2, train_steps=4, probe_every=2, fidelity_every=2, test_size=32)


def test_calibration_uses_held_out_seeds_only():
    th, cal = L.calibrate(_SMALL, 2)
    assert cal.seed.min() >= L.CALIB_OFFSET > _SMALL.seeds
    assert cal.delta.min() <= th["tau_rank"] <= cal.delta.max()
    assert th["tau_warn"] > th["tau_rank"] > th["tau_safe"] and th["tau_grad"] > cal.local_defect.max()
    assert cal.attrs["cos_target"] == L.COS_GOOD == 0.98          # the note's bound ("above 0.98"), not another


def test_compare_pairs_both_arms_with_one_fixed_rank_and_measured_peaks():
    th, _ = L.calibrate(_SMALL, 2)
    table = L.compare(_SMALL, 2, th)
    assert sorted(table.arm.unique()) == ["controller", "fixed"] and len(table) == 2 * _SMALL.seeds
    assert table[table.arm == "fixed"]["rank"].nunique() == 1 and (table.peak_bytes > 0).all()
    assert table.accuracy.between(0, 1).all() and (table.loss_var >= 0).all() and table.grad_cos.notna().all()
    assert all(len(log) == _SMALL.train_steps for log in table.attrs["logs"].values())
    v = L.verdict(table)
    assert v["seeds"] == _SMALL.seeds and v["wins"] + v["losses"] <= _SMALL.seeds


def test_ranks_stay_under_max_rank_of_a_wider_state():
    capped = dataclasses.replace(_SMALL, m=5, max_rank=2, train_steps=2, rounds=6)
    th, cal = L.calibrate(capped, 2, cos_target=1.1)  # no rank reaches it: the first near the best cosine
    near = cal[cal.grad_cos >= cal.grad_cos.max() - L.COS_SLACK].sort_values("rank").iloc[0]
    assert cal["rank"].max() == 2 and th["tau_rank"] == near.delta
    table = L.compare(capped, 2, {**th, "tau_rank": 0.0}, cache={})  # tau_rank 0: always wants more rank
    assert table["rank"].max() == 2 and (table[table.arm == "controller"].final_rank == 2).all()


def test_layered_model_reversal_gradient_is_the_dense_one_at_full_rank():
    """Six layers, each over its share of the steps: the gradient through the reverse map reaches every layer's
    A and C, and at full rank equals the dense model's."""
    model = L.MatrixODE(4, 0, layers=6)
    x, y = L.make_digits(4, 0, side=3)
    assert L.gradient_fidelity(model, x, y, 4, 3, math.inf)["grad_rel_err"] < 1e-3
    ref = model.dense_gradients(x, y, 4)[:model.A.numel()].view_as(model.A)
    assert (ref.flatten(1).norm(dim=1) > 0).all()  # every layer is used


def test_training_pairs_arms_and_the_peak_is_the_largest_layout_used():
    peaks = {}

    def peak(rank, spacing, tau_grad):
        peaks[rank, spacing] = 100 * rank + spacing
        return peaks[rank, spacing]

    longer = dataclasses.replace(_SMALL, train_steps=16, lr=3e-2)
    a, b = (L.train_arm(longer, 0, 3, 2, math.inf, peak) for _ in range(2))
    loss = [r["loss"] for r in a["log"]]
    assert loss == [r["loss"] for r in b["log"]]  # same weights, same minibatches
    assert np.mean(loss[-4:]) < np.mean(loss[:4])  # it trains
    ctl = L.RankController(tau_warn=math.inf, tau_safe=0.0, tau_rank=0.0, tau_svd=0.0, tau_grad=math.inf,
                           spacing=2, rank=1, max_rank=4, rank_step=1, rule="corrected")
    run = L.train_arm(_SMALL, 0, 1, 2, math.inf, peak, ctl)  # tau_rank 0: enrich at every probe
    ranks = [r["rank"] for r in run["log"]]
    assert ranks == sorted(ranks) and ranks[-1] == 4 and run["summary"]["peak_bytes"] == max(peaks.values())


def test_verdict_counts_roundoff_differences_as_ties():
    import pandas as pd

    rows = [{"seed": s, "arm": a, "rank": 3, "kept": 2, "reloads": 0, "peak_bytes": 100, "grad_cos": 0.9,
             "grad_rel_err": 0.1 * (1 + 1e-6 * (a == "controller") * (-1) ** s), "rank_specified": 3,
             "rank_start": 3, "final_loss": 1.0, "loss_var": 0.1, "accuracy": 0.5 + 0.25 * (a == "controller")}
            for s in range(4) for a in ("controller", "fixed")]
    v = L.verdict(pd.DataFrame(rows))
    assert (v["wins"], v["losses"]) == (0, 0) and (v["var_wins"], v["var_losses"]) == (0, 0)
    assert (v["acc_wins"], v["acc_losses"], v["acc_p"]) == (4, 0, 2 / 16)  # higher accuracy is a win
    # the fixed arm at rank 3 sits at a cap of 3 (the controller cannot exceed it), not at a cap of 4
    capped = pd.DataFrame(rows)
    capped.attrs["rank_cap"] = 3
    assert L.verdict(capped)["fixed_at_cap"]
    capped.attrs["rank_cap"] = 4
    assert not L.verdict(capped)["fixed_at_cap"]


def test_rebuilt_states_drift_most_at_the_small_start_and_the_local_check_misses_it():
    model = L.MatrixODE(8, 1000)
    x, y = L.make_digits(8, 1000, side=4)
    drift = L.rebuild_drift(model, x, 2)
    assert drift[-1] < 1e-5 and drift[1] > 1e3 * drift[-1]  # float32: the early states are rebuilt worst
    assert L.gradient_fidelity(model, x, y, 2, 16, math.inf)["local_defect"] < 1e-5  # yet the forward check passes


# --- exercise 09b.3: the measurement the notebook reads ----------------------------------------------------------

def test_checkpoint_measurement_on_a_tiny_model():
    model = L.MatrixODE(4, 1000, layers=2)
    x, y = L.make_digits(4, 1000, side=3)
    m = L.checkpoint_measurement(model, x, y, (2, 4))
    full = m["rows"][1]
    assert full["grad_err_all_kept"] < 1e-3 and full["grad_err_first_kept"] < 1e-3  # full rank: the dense gradient
    assert m["peaks"]["all_kept"] > m["peaks"]["first_kept"] and m["peaks"]["spacing"] == 9
    assert [r["rank"] for r in m["rows"]] == [2, 4]


def test_no_profile_lets_an_arm_be_the_dense_model():
    from rev.base.profiles import PROFILES

    for name in PROFILES:
        sz = L.chapter_sizes(name)
        assert sz.rank_cap < sz.m, (name, sz.rank_cap, sz.m)     # else the fixed arm could be the dense model
