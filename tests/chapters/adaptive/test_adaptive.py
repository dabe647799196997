"""Reversal defect, kept states and the adaptive checkpoint policy (rev.chapters.adaptive).

Models are tiny and built from random weights; "expanding" ones are made so on purpose (`expand_blocks`, a
large h and a small embedding), which is what makes the fp32 round trip visibly lossy at this size.
"""
import math

import pytest
import torch

from rev import GPT, GPTConfig, TRUNKS
from rev.chapters import adaptive as A
from rev.core import reversible

V, T, L, D = 64, 16, 8, 32


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # these models are tiny: a second thread only adds synchronisation (and stalls on a busy machine)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _model(trunk: str = "reveuler_rev", stream: str = "fp32", expanding: bool = False, n_layer: int = L) -> GPT:
    torch.manual_seed(0)
    h = 0.5 if trunk.startswith("midpoint") else 1.0
    if expanding:
        h *= 2
    model = GPT(GPTConfig(vocab_size=V, seq_len=T, n_layer=n_layer, n_head=2, d_model=D, trunk=trunk, h=h,
                          stream=stream))
    if expanding:
        A.expand_blocks(model, 32.0)
        with torch.no_grad():  # a small stream at the input: the first layer norms amplify most
            model.wte.weight.mul_(0.1)
            model.wpe.weight.mul_(0.1)
    return model


def _batch(rows: int = 2):
    idx = torch.randint(0, V, (rows, T), generator=torch.Generator().manual_seed(1))
    tgt = torch.randint(0, V, (rows, T), generator=torch.Generator().manual_seed(2))
    return idx, tgt


# --- the defect ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("trunk", ["reveuler_rev", "midpoint_rev"])
def test_defect_is_zero_on_the_fixed_point_stream(trunk):
    model = _model(trunk, "fixed", expanding=True)
    idx, _ = _batch()
    assert A.reversal_defect(model, idx) == [0.0] * L
    assert A.defect_vs_depth(model, idx) == [0.0] * L
    assert A.backward_reconstruction_errors(model, idx, ()) == [0.0] * (L + 1)


@pytest.mark.parametrize("trunk", ["reveuler_rev", "midpoint_rev"])
def test_fp32_defect_grows_with_depth_on_expanding_blocks(trunk):
    idx, _ = _batch()
    depth = A.defect_vs_depth(_model(trunk, "fp32", expanding=True), idx)
    assert depth[-1] > 1e-4                      # visibly lossy ...
    assert depth[-1] > 30 * max(depth[0], 1e-9)  # ... and much more so across the whole trunk than one layer
    assert depth[-1] > depth[L // 2] > depth[1]
    # the same trunk on mild (initial) weights loses far less
    assert A.defect_vs_depth(_model(trunk, "fp32"), idx)[-1] < depth[-1] / 100


def test_defect_of_a_span_is_the_backward_error_at_its_bottom():
    model, (idx, _) = _model(expanding=True), _batch()
    spans = A.spans_from_keep(L, (3, 6))
    defects = A.reversal_defect(model, idx, spans)
    for (a, b), d in zip(spans, defects):
        top = (b,) if b < L else ()
        assert d == A.backward_reconstruction_errors(model, idx, top)[a]  # the same arithmetic, bit for bit
    # with both kept, backward rebuilds each boundary from the exact state at the top of its span: the state
    # rebuilt at a kept boundary (used by the layer above it) carries that span's defect, no more
    errors = A.backward_reconstruction_errors(model, idx, (3, 6))
    assert [errors[0], errors[3], errors[6], errors[L]] == [*defects, 0.0]


def test_defect_refuses_a_trunk_without_inverse():
    model = GPT(GPTConfig(vocab_size=V, seq_len=T, n_layer=2, n_head=2, d_model=D, trunk="residual"))
    with pytest.raises(ValueError, match="no exact inverse"):
        A.reversal_defect(model, _batch()[0])


# --- kept states and gradients -----------------------------------------------------------------------------------

@pytest.mark.parametrize("trunk", ["reveuler_rev", "midpoint_rev"])
def test_keeping_every_layer_matches_stored_autograd(trunk):
    model, (idx, tgt) = _model(trunk, "fp32", expanding=True), _batch()
    none = A.gradient_cosine(model, idx, tgt)
    err_none = max(A.backward_reconstruction_errors(model, idx, ()))
    A.apply_keep(model, range(1, L))
    every = A.gradient_cosine(model, idx, tgt)
    err_every = max(A.backward_reconstruction_errors(model, idx))
    assert every["min"] >= 0.9999 and every["global"] >= 0.9999
    assert err_every < err_none / 10
    assert 1 - every["min"] <= 1 - none["min"] + 1e-12


def test_gradient_cosine_leaves_grads_and_rng_alone():
    model, (idx, tgt) = _model(), _batch()
    torch.manual_seed(5)
    before = torch.get_rng_state()
    out = A.gradient_cosine(model, idx, tgt, reference="fp64")
    assert torch.equal(before, torch.get_rng_state())
    assert all(p.grad is None for p in model.parameters())
    assert out["min"] > 0.99999 and len(out["per_layer"]) == L and out["worst"] in dict(model.named_parameters())


def test_keep_set_changes_between_steps():
    model, (idx, tgt) = _model(), _batch()
    for keep in [(), (4,), (1, 2, 3)]:
        A.apply_keep(model, keep)
        model.zero_grad()
        model(idx, tgt).backward()
        assert model.trunk.keep == keep
    with pytest.raises(ValueError, match="1..7"):
        A.apply_keep(model, (0, 3))
    with pytest.raises(ValueError, match="1..7"):
        A.apply_keep(model, (L,))


# --- memory --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("stream,itemsize", [("fp32", 4), ("fp64", 8), ("fixed", 8)])
def test_kept_bytes_match_count_times_state_size(stream, itemsize):
    model, (idx, _) = _model("reveuler_rev", stream), _batch(3)
    one = A.state_bytes(model, idx)
    assert one == 2 * idx.numel() * D * itemsize  # two streams of (batch, time, d_model)
    for keep in [(), (4,), (2, 4, 6), tuple(range(1, L))]:
        assert A.kept_state_bytes(model, idx, keep) == len(keep) * one


def test_midpoint_kept_states_share_their_common_stream():
    model, (idx, _) = _model("midpoint_rev"), _batch()
    one = A.state_bytes(model, idx)
    assert A.kept_state_bytes(model, idx, (2, 5)) == 2 * one
    # boundaries 2 and 3 hold (x1, x2) and (x2, x3): x2 is one tensor, stored once
    assert A.kept_state_bytes(model, idx, (2, 3)) == 3 * one // 2


# --- the policy on synthetic defect sequences --------------------------------------------------------------------

def _policy(**kw) -> A.AdaptivePolicy:
    args = dict(tau_warn=1e-3, tau_safe=1e-4, max_span=8, min_span=1, patience=1)
    args.update(kw)
    return A.AdaptivePolicy(**args)


def test_policy_starts_at_max_span():
    p = _policy()
    assert p.start(16) == (8,) and p.spans == [(0, 8), (8, 16)]
    assert _policy(max_span=32).start(16) == ()


def test_policy_halves_a_span_above_tau_warn():
    p = _policy()
    p.start(16)
    assert p.update([5e-3, 5e-4]) == (4, 8)
    assert p.spans == [(0, 4), (4, 8), (8, 16)]
    assert p.update([2e-3, 5e-4, 5e-4]) == (2, 4, 8)


def test_policy_keeps_spans_between_the_thresholds():
    p = _policy()
    p.start(16)
    for _ in range(5):
        assert p.update([5e-4, 1e-3]) == (8,)   # exactly tau_warn does not exceed it


def test_policy_lengthens_calm_spans_up_to_max_span():
    p = _policy(max_span=8)
    p.start(16)
    for d in ([1, 1], [1, 1, 1, 1]):
        p.update(d)
    assert p.keep == tuple(range(2, 16, 2))
    p.update([1e-5] * 8)
    assert p.spans == [(0, 4), (4, 8), (8, 12), (12, 16)]
    p.update([1e-5] * 4)
    assert p.spans == [(0, 8), (8, 16)]
    p.update([1e-5] * 2)          # 16 layers would exceed max_span
    assert p.spans == [(0, 8), (8, 16)]


def test_policy_waits_for_patience_before_lengthening():
    p = _policy(patience=3)
    p.start(8)
    p.update([1.0])
    assert p.keep == (4,)
    p.update([1e-6, 1e-6])
    p.update([1e-6, 1e-6])
    assert p.keep == (4,)
    p.update([1e-6, 5e-4])        # one span not calm: no merge, and its count restarts
    p.update([1e-6, 1e-6])
    p.update([1e-6, 1e-6])
    assert p.keep == (4,)
    p.update([1e-6, 1e-6])
    assert p.keep == ()


def test_policy_only_merges_two_calm_neighbours():
    p = _policy()
    p.start(8)
    p.update([1.0])
    p.update([1.0, 1.0])          # spans of 2
    # the first two merge; the calm last one stays: its only neighbour is not calm
    assert p.update([1e-6, 1e-6, 5e-4, 1e-6]) == (4, 6)


def test_policy_respects_min_span_and_treats_nan_as_a_warning():
    p = _policy(min_span=2)
    p.start(8)
    p.update([math.nan])
    assert p.keep == (4,)
    p.update([1.0, math.inf])
    assert p.keep == (2, 4, 6)
    assert p.update([1.0] * 4) == (2, 4, 6)     # halves of 2 layers would be below min_span


def test_policy_splits_the_worst_spans_first_within_the_budget():
    p = _policy(budget_bytes=2 * 100 + 50)       # room for two states of 100 bytes
    p.start(16, state_bytes=100)
    p.update([2e-3, 9e-3], state_bytes=100)      # both warn, both fit (one kept already, one more)
    assert p.keep == (8, 12)
    p.update([5e-3, 2e-3, 8e-3], state_bytes=100)
    assert p.keep == (8, 12)                     # budget full: no further split
    p = _policy(budget_bytes=100)
    p.start(16, state_bytes=100)
    p.update([1e-2, 1e-1], state_bytes=100)      # the budget holds none beyond the one kept
    assert p.keep == (8,)


def test_policy_shrinks_when_the_budget_no_longer_fits():
    p = _policy(budget_bytes=300)
    p.start(16, state_bytes=100)
    assert p.update([1.0, 1.0], state_bytes=100) == (4, 8, 12)
    # bigger states (a bigger batch): room for two; the calmest neighbours (the middle two) give way
    assert p.update([5e-4, 1e-6, 2e-5, 5e-4], state_bytes=150) == (4, 12)


def test_policy_refuses_bad_settings():
    with pytest.raises(ValueError, match="tau_safe=.*exceeds tau_warn"):
        A.AdaptivePolicy(tau_warn=1e-4, tau_safe=1e-3)
    for bad in (dict(tau_warn=-1e-3), dict(tau_safe=0.0), dict(tau_warn=math.nan), dict(tau_safe=-1.0)):
        with pytest.raises(ValueError, match="need finite > 0"):
            A.AdaptivePolicy(**{"tau_warn": 1e-3, "tau_safe": 1e-4, **bad})
    for bad in (dict(max_span=0), dict(min_span=0), dict(patience=0), dict(max_span=1.5)):
        with pytest.raises(ValueError, match="need int >= 1"):
            A.AdaptivePolicy(**bad)
    with pytest.raises(ValueError, match="below min_span"):
        A.AdaptivePolicy(max_span=2, min_span=3)
    with pytest.raises(ValueError, match="budget_bytes=-1 < 0"):
        A.AdaptivePolicy(budget_bytes=-1)
    with pytest.raises(ValueError, match="span 0: need int"):
        A.fixed_spacing(8, 0)
    with pytest.raises(ValueError, match="span 0: need int"):
        A.FixedPolicy(0)
    p = _policy(budget_bytes=0, max_span=4)
    with pytest.raises(ValueError, match="raise budget_bytes or max_span"):
        p.start(16, state_bytes=100)
    p = _policy()
    with pytest.raises(ValueError, match="call start"):
        p.update([0.0])
    p.start(16)
    with pytest.raises(ValueError, match="2 spans"):
        p.update([0.0])


def test_spans_and_fixed_spacing():
    assert A.fixed_spacing(12, 4) == (4, 8)
    assert A.fixed_spacing(12, 5) == (5, 10)
    assert A.fixed_spacing(12, 12) == ()
    assert A.spans_from_keep(6, (4, 2)) == [(0, 2), (2, 4), (4, 6)]
    assert A.keep_from_spans([(0, 2), (2, 4), (4, 6)]) == (2, 4)


def test_make_policy_parses_specs():
    assert isinstance(A.make_policy("none"), A.FixedPolicy) and A.make_policy("none").start(8) == ()
    assert A.make_policy("fixed:3").start(8) == (3, 6)
    p = A.make_policy("adaptive:tau_warn=1e-2,tau_safe=1e-3,max_span=4,patience=1")
    assert (p.tau_warn, p.tau_safe, p.max_span, p.patience) == (1e-2, 1e-3, 4, 1)
    for bad in ("fixed:x", "adaptive:nope=1", "sometimes"):
        with pytest.raises(ValueError):
            A.make_policy(bad)


# --- the hook and the loop -----------------------------------------------------------------------------------------

def test_hook_settles_measures_and_logs():
    model, (idx, tgt) = _model(expanding=True), _batch(4)
    hook = A.AdaptiveCheckpointer(A.AdaptivePolicy(tau_warn=1e-4, tau_safe=1e-5, max_span=L), every=1,
                                  fidelity_every=2, probe_rows=2)
    fields = hook.on_step(model, 0, idx, tgt)
    assert fields["n_kept"] == len(model.trunk.keep) > 0          # the defect above tau_warn forced kept states
    assert fields["kept_bytes"] == fields["n_kept"] * A.state_bytes(model, idx)
    assert fields["grad_cos_min"] > 0.999 and "defects" in fields and hook.log == [fields]
    assert "grad_cos_min" not in hook.on_step(model, 1, idx, tgt)


def test_budget_caps_the_hook():
    model, (idx, _) = _model(expanding=True), _batch(2)
    one = A.state_bytes(model, idx)
    hook = A.AdaptiveCheckpointer(A.AdaptivePolicy(tau_warn=1e-6, tau_safe=1e-7, max_span=L, budget_bytes=2 * one))
    assert hook.on_step(model, 0, idx)["n_kept"] == 2


def test_training_loop_runs_and_summarises():
    model = _model()
    src = lambda step: _batch(2)  # noqa: E731
    hook = A.AdaptiveCheckpointer(A.make_policy("adaptive:max_span=4"), every=2, fidelity_every=3)
    rows, summary = A.train_with_checkpointer(model, src, 4, 1e-3, hook, eval_batches=[_batch(2)])
    assert len(rows) == 4 and rows[-1]["loss"] < rows[0]["loss"]
    assert summary["kept_max"] >= 1 and summary["grad_cos_min"] > 0.999 and math.isfinite(summary["val_loss"])


def test_train_callback_adapter():
    model, probe = _model(), _batch(2)
    hook = A.AdaptiveCheckpointer(A.FixedPolicy(2), every=1)
    cb = hook.train_callback(probe)
    cb(0, {"step": 0}, model)
    assert model.trunk.keep == (2, 4, 6) and hook.log[0]["n_kept"] == 3


def test_a_missed_fidelity_target_tightens_the_thresholds():
    model, (idx, tgt) = _model(expanding=True), _batch(2)
    policy = A.AdaptivePolicy(tau_warn=1.0, tau_safe=0.1, max_span=L)     # so loose it keeps nothing
    hook = A.AdaptiveCheckpointer(policy, every=1, fidelity_every=1, target_cos=0.999999, tighten=10.0)
    fields = hook.on_step(model, 0, idx, tgt)
    assert fields["n_kept"] == 0 and fields["grad_cos_min"] < 0.999999
    assert math.isclose(policy.tau_warn, 0.1) and math.isclose(policy.tau_safe, 0.01) and fields["tau_warn"] == 0.1
    with pytest.raises(ValueError, match="target_cos"):
        A.AdaptiveCheckpointer(policy, target_cos=1.5)
    with pytest.raises(ValueError, match="tighten"):
        A.AdaptiveCheckpointer(policy, tighten=1.0)


def test_uniform_layout_and_frontier_verdict():
    assert A.uniform_layout(12, 0) == () and A.uniform_layout(12, 1) == (6,)
    assert A.uniform_layout(12, 2) == (4, 8) and A.uniform_layout(12, 4) == (3, 6, 9)
    row = lambda kind, setting, keep, cos, err: dict(kind=kind, setting=setting, keep=keep, n_kept=len(keep),  # noqa
                                                   n_layer=12, grad_cos_min=cos, max_recon_error=err)
    rows = [row("fixed", 12, (), 0.99, 1e-2), row("fixed", 6, (6,), 0.9999, 1e-3),
            row("adaptive", 1e-3, (2,), 0.99999, 1e-3), row("adaptive", 1e-2, (), 0.99, 1e-2)]
    v = A.frontier_verdict(rows)
    assert [p["grad"] for p in v["points"]] == ["win", "tie"] and [p["recon"] for p in v["points"]] == ["tie", "tie"]
    assert v["grad_win"] == 1 and v["recon_tie"] == 2
    # a better fixed layout of the same memory than the uniform one is the rival: the adaptive "win" goes
    better = A.frontier_verdict(rows + [row("fixed", 2, (2,), 0.99999, 1e-3)])
    assert better["points"][0]["fixed_keep"] == (2,) and better["points"][0]["grad"] == "tie"
    # the layout that keeps boundary 1 is a rival too: the adaptive (2,) loses to a better (1,)
    rival = A.frontier_verdict(rows + [row("boundary 1", 1, (1,), 0.999999, 1e-4)])
    assert rival["points"][0]["fixed_keep"] == (1,) and rival["points"][0]["grad"] == "loss"
    assert A.boundary_rival(12, 1) == (1,) and A.boundary_rival(12, 3) == (1, 5, 9)
    with pytest.raises(ValueError, match="outside 1..11"):
        A.boundary_rival(12, 12)


def test_the_frontier_scores_layouts_on_a_held_out_batch_with_the_boundary_rival(monkeypatch):
    import torch

    from rev.core.model import GPT, GPTConfig

    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=64, seq_len=16, n_layer=4, n_head=2, d_model=32, trunk="reveuler_rev"))
    gen = torch.Generator().manual_seed(1)
    probe, other = (torch.randint(0, 64, (4, 17), generator=gen) for _ in range(2))
    rows = A.frontier(model, probe[:, :-1], probe[:, 1:], (1e-12,), held_out=(other[:, :-1], other[:, 1:]))
    assert {r["scored_on"] for r in rows} == {"held-out batch"}
    # an adaptive layout of one state, (2,): its rival keeping boundary 1, (1,), is measured beside it
    from rev.chapters.adaptive import placement

    monkeypatch.setattr(placement, "settle", lambda policy, model, idx: (2,))
    one = A.frontier(model, probe[:, :-1], probe[:, 1:], (1e-3,), held_out=(other[:, :-1], other[:, 1:]))
    assert [r["keep"] for r in one if r["kind"] == "boundary 1"] == [(1,)]
    monkeypatch.undo()
    # the same layout scored on the probe batch differs from its held-out score: the batches are not one
    same = A.frontier(model, probe[:, :-1], probe[:, 1:], (1e-12,))
    assert {r["scored_on"] for r in same} == {"probe batch"}
    assert same[0]["keep"] == rows[0]["keep"] and same[0]["max_recon_error"] != rows[0]["max_recon_error"]
    assert A.frontier_verdict(rows)["scored_on"] == "held-out batch"


def _frontier_rows(adaptive: list[tuple[float, tuple, float, float]]) -> list[dict]:
    """Frontier rows on a 6-layer trunk: the fixed spacings (cos, worst rebuilt error) and the given adaptive
    (tau_warn, keep, cos, worst error) points."""
    row = lambda kind, setting, keep, cos, err: dict(kind=kind, setting=setting, keep=keep, n_kept=len(keep),  # noqa
                                                   n_layer=6, grad_cos_min=cos, max_recon_error=err)
    fixed = [row("fixed", 6, (), 0.99, 1e-2), row("fixed", 3, (3,), 0.999, 1e-3), row("fixed", 2, (2, 4), 0.9999, 1e-3)]
    return fixed + [row("adaptive", *a) for a in adaptive]


def test_frontier_counts_each_distinct_layout_once():
    # six thresholds, one layout: one result, not six
    same = A.frontier_verdict(_frontier_rows([(t, (1, 3), 0.9999, 1e-4) for t in (1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5)]))
    assert same["grad_tie"] == 6 and same["recon_win"] == 6                      # per threshold: six times
    assert len(same["layouts"]) == 1 and same["layout_recon_win"] == 1 and same["layout_grad_tie"] == 1
    # the same thresholds choosing different layouts, one of which loses and one that is fixed spacing itself
    split = A.frontier_verdict(_frontier_rows([(1e-2, (), 0.99, 1e-2), (3e-3, (), 0.99, 1e-2),
                                               (1e-3, (1,), 0.99, 1e-2), (3e-4, (1, 3), 0.9999, 1e-4)]))
    assert [lay["keep"] for lay in split["layouts"]] == [(), (1,), (1, 3)]
    assert split["layouts"][0]["same_as_fixed"] and split["layouts"][0]["tau_warns"] == [1e-2, 3e-3]
    assert split["layouts"][1]["fixed_keep"] == (3,) and split["layouts"][1]["grad"] == "loss"
    assert (split["layout_grad_win"], split["layout_grad_tie"], split["layout_grad_loss"]) == (0, 2, 1)


# --- sizes and the notebook's exercises ------------------------------------------------------------------------------

def test_chapter_model_takes_h_from_the_trunk_spec():
    sizes = A.chapter_sizes("smoke")
    for trunk in ("reveuler_rev", "midpoint_rev"):
        assert A.model_config(sizes, V, trunk).h == TRUNKS[trunk].h


def test_exercise_checks_refuse_wrong_answers_and_restore_the_function():
    with pytest.raises(AssertionError, match="boundary 0"):
        A.check_span_tops(lambda n_layer, keep: [n_layer] * n_layer)      # ignores the kept states
    with pytest.raises(AssertionError, match="still restarts"):
        A.check_no_restart(lambda function: function)                      # nothing broken
    real = reversible.ReversibleFunction
    with pytest.raises(RuntimeError):
        with A.trunk_function(object):
            raise RuntimeError("inside")
    assert reversible.ReversibleFunction is real


def _arm(variant, cos, kept, probe=0.05, fidelity=0.17, val=2.0):
    return {"variant": variant, "grad_cos_min": cos, "kept_mean": kept, "kept_max": round(kept), "val_loss": val,
            "tokens_per_s": 1000.0, "probe_overhead": probe, "fidelity_overhead": fidelity, "hook_overhead": 0.24,
            "budget_bytes": 4096, "trunk_state_bytes": 2048}


def test_the_training_verdict_wins_on_fidelity_at_equal_peak_memory_only():
    """Fewer kept states on average wins nothing (the peak sets the memory); 1.5x closer gradients win only when
    the adaptive arm kept no more states at its peak; 1.4x is a tie."""
    arms = lambda a_cos, a_mean, a_max: [{**_arm("fp32 adaptive", a_cos, a_mean), "kept_max": a_max},  # noqa: E731
                                         _arm("fp32 fixed spacing", 1 - 1e-4, 2.0)]
    fewer = A.training_verdict(arms(1 - 1e-4, 1.25, 2), 0.999)
    assert fewer["fewer_kept_states"] and not fewer["adaptive_beats_fixed"]
    assert A.training_verdict(arms(1 - 1e-4 / 1.6, 2.0, 2), 0.999)["adaptive_beats_fixed"]
    assert not A.training_verdict(arms(1 - 1e-4 / 1.4, 2.0, 2), 0.999)["adaptive_beats_fixed"]    # inside 1.5x
    assert not A.training_verdict(arms(1 - 1e-4 / 1.6, 2.0, 3), 0.999)["adaptive_beats_fixed"]    # more at peak
    worse = A.training_verdict(arms(1 - 1e-4 * 1.6, 2.0, 2), 0.999)
    assert worse["worse_fidelity"] and not worse["adaptive_beats_fixed"]


def test_the_best_fixed_rival_is_ranked_by_gradient_error_first():
    """Two fixed layouts of one kept state: (2,) has the smaller gradient error, (4,) the smaller reconstruction
    error. The rival at equal memory is (2,): gradient error is what training feels; reconstruction error only
    breaks ties."""
    row = lambda kind, setting, keep, cos, err: dict(kind=kind, setting=setting, keep=keep, n_kept=len(keep),  # noqa
                                                   n_layer=6, grad_cos_min=cos, max_recon_error=err)
    rows = [row("fixed", 6, (), 0.99, 1e-2), row("fixed", 2, (2,), 0.9999, 1e-2), row("fixed", 4, (4,), 0.999, 1e-5),
            row("adaptive", 1e-3, (3,), 0.99999, 1e-3)]
    point = A.frontier_verdict(rows)["points"][0]
    assert point["fixed_keep"] == (2,) and point["fixed_cos"] == 0.9999
    assert point["grad"] == "win" and point["recon"] == "win"     # against (4,) recon would have been a loss
