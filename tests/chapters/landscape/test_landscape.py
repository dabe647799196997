"""Notebook 07b's measurements and memory models (rev.chapters.landscape.measure, rev.chapters.landscape.models).

The memory models are checked against peaks measured on a small geometry: per layer and token, each runnable
model within 5% of its own value plus 1% of a stored layer (so a model of zero has a tolerance too); the
once-per-model working set within 50% of a stored layer. The parallel models are checked against the formulas
of Korthikanti et al. 2022 and Rajbhandari et al. 2020 they restate.
"""
from __future__ import annotations

import math

import pytest
import torch

from rev.chapters.landscape import measure as L
from rev.chapters.landscape import models as M
from rev.measure.probe import make_training_step
from rev.measure.memory import training_step_memory
from rev.core.model import GPTConfig
from rev.chapters.shared.verdicts import TOO_NOISY, speed_verdict

SMALL = L.Sizes(16, 2, 32, 64, depths=(3, 5), batches=(8, 16), sweep_batches=(8, 16), sweep_depth=5, rounds=1)
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def rows():
    return L.sweep(SMALL, CPU, progress=False)


@pytest.fixture(scope="module")
def fits(rows):
    return L.per_layer(L.per_token(rows, SMALL))


def test_every_runnable_memory_model_matches_its_measured_point(fits):
    checks = L.model_check(fits, SMALL)
    assert {c["variant"] for c in checks} == {v.name for v in L.variants_for(CPU)}
    for c in checks:
        assert c["per_layer_ok"], c
        assert c["working_set_ok"], c
    by = {c["variant"]: c for c in checks}
    assert by["reveuler_rev"]["measured_per_layer"] == pytest.approx(0, abs=1)
    assert by["ckpt_block"]["measured_per_layer"] == pytest.approx(4 * SMALL.d_model, rel=0.05)


def test_model_check_flags_a_wrong_model(fits):
    # a reversible trunk that kept one fp32 vector per layer, or a stored one that kept a fifth less
    broken = dict(fits, reveuler_rev=(4.0 * SMALL.d_model, fits["reveuler_rev"][1]),
                  stored=(0.8 * fits["stored"][0], fits["stored"][1]))
    by = {c["variant"]: c for c in L.model_check(broken, SMALL)}
    assert not by["reveuler_rev"]["per_layer_ok"] and not by["stored"]["per_layer_ok"]


def test_offload_only_on_cuda_and_every_variant_trains_like_stored():
    assert "offload" not in {v.name for v in L.variants_for(CPU)}
    assert "offload" in {v.name for v in L.variants_for(torch.device("cuda"))}
    ref, _, step = L.build(L.BY_NAME["stored"], SMALL, 2, 4, CPU)
    step()
    for name in ("offload", "ckpt_attention"):  # offload runs on a CPU too (it just saves nothing there)
        model, _, step = L.build(L.BY_NAME[name], SMALL, 2, 4, CPU)
        step()
        for a, b in zip(ref.parameters(), model.parameters()):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_korthikanti_formulas():
    g = M.FRONTIER
    s, b, h, a = g.seq_len, g.micro_batch, g.d_model, g.n_head
    stats = M.LN_STATS * s * b
    stored = M.layer_bytes(g, "stored") * s * b
    assert stored - stats == pytest.approx(34 * s * b * h + 5 * a * s * s * b)
    for t in (2, 8):
        tp = M.layer_bytes(g, "stored", M.Plan(t=t)) * s * b
        assert tp - stats == pytest.approx(s * b * h * (10 + 24 / t + 5 * a * s / (h * t)))
        sp = M.layer_bytes(g, "stored", M.Plan(t=t, sp=True)) * s * b
        assert sp - stats / t == pytest.approx((34 * s * b * h + 5 * a * s * s * b) / t)
        sel = M.layer_bytes(g, "selective", M.Plan(t=t, sp=True)) * s * b
        assert sel - stats / t == pytest.approx(34 * s * b * h / t)
        full = M.layer_bytes(g, "ckpt_block", M.Plan(t=t, sp=True)) * s * b
        assert full == pytest.approx(2 * s * b * h / t)
    assert M.layer_bytes(M.with_flash(g), "stored") < M.layer_bytes(g, "selective") + 4 * a + 1


def test_pipeline_context_and_zero():
    g, per = M.FRONTIER, M.layer_bytes(M.FRONTIER, "stored")
    layers = g.tokens * g.n_layer * per
    # 1F1B: the first of p stages holds p micro-batches of L/p layers -- all L layers' worth -- unless m < p
    assert M.activation_bytes(g, "stored", M.Plan(p=8, m=64)) == pytest.approx(layers)
    assert M.activation_bytes(g, "stored", M.Plan(p=8, m=2)) == pytest.approx(layers * 2 / 8)
    assert M.activation_bytes(g, "stored", M.Plan(c=4)) == pytest.approx(layers / 4)
    n = 1_000_000
    assert M.static_bytes(n) == 16 * n
    assert M.static_bytes(n, M.Plan(dp=8, zero=1)) == pytest.approx(4 * n + 12 * n / 8)
    assert M.static_bytes(n, M.Plan(dp=8, zero=2)) == pytest.approx(2 * n + 14 * n / 8)
    assert M.static_bytes(n, M.Plan(dp=8, zero=3)) == pytest.approx(16 * n / 8)
    assert M.static_bytes(n, M.Plan(t=2, p=4)) == pytest.approx(16 * n / 8)


def test_geometry_and_plan_read_as_sentences():
    line = M.FRONTIER.describe()
    assert line.startswith("GPT-3 175B") and "96 layers, d_model 12,288" in line and "no fused attention" in line
    assert "Geometry(" not in line
    words = M.FRONTIER_PLAN.in_words()
    assert words.startswith("tensor parallel 8 with sequence parallelism, pipeline parallel 8 over 64 micro-batches")
    assert M.Plan().in_words() == "one device" and M.Plan(dp=4, zero=3).in_words() == "data parallel 4 with ZeRO stage 3"


def test_static_model_matches_measured_weights_grads_and_adam():
    cfg = GPTConfig(vocab_size=64, seq_len=32, n_layer=2, n_head=2, d_model=16)
    model, opt, step = make_training_step(cfg, 4, CPU, None)
    step()
    measured = training_step_memory(model, opt, step).static_bytes
    assert measured == pytest.approx(M.static_bytes(model.n_params(), mixed=False), rel=0.01)
    geo = M.Geometry("x", 2, 16, 2, 32, 4, 64)
    assert geo.n_params == pytest.approx(model.n_params(), rel=0.05)  # LayerNorms are left out of the model


def test_crossover_helpers():
    tokens = {"ckpt_block": {1: 10.0, 2: 11.0, 4: 13.0, 8: 17.0}, "midpoint_rev": {1: 14.0, 2: 14.0, 4: 14.0, 8: 14.0}}
    assert L.crossover_depth(tokens, "midpoint_rev") == 8
    fits = L.per_layer(tokens)
    assert fits["ckpt_block"] == (1.0, 9.0)
    assert L.predicted_crossover(fits, "midpoint_rev") == pytest.approx(5.0)
    assert L.crossover_depth({"ckpt_block": {1: 1.0}, "r": {1: 2.0}}, "r") is None


def test_summary_holds_the_numbers_the_notebook_tables(rows, fits):
    s = L.summarise(rows, SMALL)
    deep = max(SMALL.depths)
    assert s["deep"] == deep and s["fits"] == fits
    assert s["tokens"]["stored"][deep] > s["tokens"]["ckpt_block"][deep] > 0
    # the speed ratios are the interleaved rounds' (`speed_ratio`), one per pair the notebook reads
    assert set(s["ratio"]) == {("reveuler_rev", "stored"), ("reveuler_rev", "ckpt_block"), ("midpoint_rev", "stored")}
    assert set(s["cross"]) == {"midpoint_rev", "reveuler_rev"}
    rows_f = M.evaluate(M.FRONTIER, frontier=True)
    assert all(math.isfinite(r["activation_GiB"]) and r["activation_GiB"] >= 0 for r in rows_f)


def test_exercise_checks_pass_the_answer_and_fail_a_wrong_one():
    assert "measured 2,072" in L.check_stored_block_bytes(lambda d, a: 4 * (16 * d + a + 4))
    with pytest.raises(AssertionError, match="= 17.00d"):
        L.check_stored_block_bytes(lambda d, a: 4 * 17 * d)
    # right at the check's own width only (a typed-in number): caught at the wide one
    with pytest.raises(AssertionError, match="d_model=1024"):
        L.check_stored_block_bytes(lambda d, a: 2072)

    def leak(model):
        kept = []
        for block in model.trunk.blocks:
            block.mlp.register_forward_hook(lambda m, i, o: kept.append(o))
        return kept

    assert "flagged" in L.check_leak(leak)
    with pytest.raises(AssertionError, match="bytes per layer kept"):
        L.check_leak(lambda model: [block.mlp.register_forward_hook(lambda m, i, o: None)
                                    for block in model.trunk.blocks])


def test_a_speed_ratio_carries_its_rounds_spread_and_says_when_it_is_noise():
    def row(variant, times):
        return dict(variant=variant, depth=4, batch=8, tokens_per_s=1.0 / min(times), step_times=times)

    # three rounds are too few to test, however far apart: described by their quartiles, judged too noisy
    clear3 = [row("stored", [1.0, 1.0, 1.0]), row("reveuler_rev", [1.6, 1.5, 1.7])]
    r = L.speed_ratio(clear3, "reveuler_rev", "stored", 4, 8)
    assert r.value == pytest.approx(1 / 1.6) and r.n == 3 and r.hi < 1 and "quartiles" in r.kind
    assert speed_verdict(r) == TOO_NOISY   # fewer rounds than MIN_ROUNDS: never judged
    clear = [row("stored", [1.0] * 6), row("reveuler_rev", [1.6, 1.5, 1.7, 1.55, 1.65, 1.6])]
    r = L.speed_ratio(clear, "reveuler_rev", "stored", 4, 8)
    assert r.n == 6 and "bootstrap" in r.kind and speed_verdict(r) == "slower"
    noisy = [row("stored", [1.0, 2.0, 1.0, 2.0, 1.0, 2.0]), row("reveuler_rev", [1.2, 1.0, 1.3, 1.1, 1.6, 1.0])]
    assert speed_verdict(L.speed_ratio(noisy, "reveuler_rev", "stored", 4, 8)) == TOO_NOISY
    untimed = [dict(row("stored", [1.0]), step_times=None), row("reveuler_rev", [1.0])]
    assert L.speed_ratio(untimed, "reveuler_rev", "stored", 4, 8) is None
