"""The memory-free reversible trunks against their stored twins, on the same weights.

For the `fixed` stream the reference is the stored twin on the same stream, which rounds each increment
to the Q31.32 grid in forward and treats that rounding as identity in backward (straight-through): both
trunks then compute the very same numbers, and only the way gradients are obtained differs.
"""
import pytest
import torch
import torch.nn.functional as F

from rev import GPT, GPTConfig, reconstruction_error

V, T = 64, 16


def _model(trunk: str, n_layer: int, h: float, stream: str, dtype=torch.float64, d: int = 32,
           device: torch.device = torch.device("cpu")) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=V, seq_len=T, n_layer=n_layer, n_head=2, d_model=d,
                         trunk=trunk, h=h, stream=stream)).to(device, dtype)


def _loss_and_grads(model: GPT, autocast: bool = False):
    dev = next(model.parameters()).device
    idx = torch.randint(0, V, (3, T), generator=torch.Generator().manual_seed(1)).to(dev)
    tgt = torch.randint(0, V, (3, T), generator=torch.Generator().manual_seed(2)).to(dev)
    model.zero_grad(set_to_none=True)
    with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=autocast):
        loss = model(idx, tgt)
    loss.backward()
    return loss.item(), {n: p.grad.detach().clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("stream", ["fp64", "fixed"])
@pytest.mark.parametrize("h", [0.25, 0.5, 1.0])
@pytest.mark.parametrize("n_layer", [1, 3, 6])
@pytest.mark.parametrize("base", ["midpoint", "reveuler"])
def test_gradients_match_stored_twin_float64(base, n_layer, h, stream, device):
    stored = _model(base, n_layer, h, stream, device=device)
    rev = _model(base + "_rev", n_layer, h, stream, device=device)
    rev.load_state_dict(stored.state_dict())
    loss_s, grads_s = _loss_and_grads(stored)
    loss_r, grads_r = _loss_and_grads(rev)
    assert abs(loss_s - loss_r) <= 1e-10
    assert grads_s.keys() == grads_r.keys()
    for name in grads_s:
        torch.testing.assert_close(grads_r[name], grads_s[name], rtol=1e-6, atol=1e-9, msg=name)


def test_checkpointed_residual_matches_residual():
    stored, ckpt = _model("residual", 3, 1.0, "fp64"), _model("residual_ckpt", 3, 1.0, "fp64")
    ckpt.load_state_dict(stored.state_dict())
    (ls, gs), (lc, gc) = _loss_and_grads(stored), _loss_and_grads(ckpt)
    assert abs(ls - lc) <= 1e-12
    for name in gs:
        torch.testing.assert_close(gc[name], gs[name], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("base", ["midpoint", "reveuler"])
def test_gradients_under_bf16_autocast(base, device):
    """The reversible backward must re-enter bf16 autocast while recomputing blocks."""
    stored = _model(base, 4, 0.5, "fp32", torch.float32, d=64, device=device)
    rev = _model(base + "_rev", 4, 0.5, "fp32", torch.float32, d=64, device=device)
    rev.load_state_dict(stored.state_dict())
    _, gs = _loss_and_grads(stored, autocast=True)
    _, gr = _loss_and_grads(rev, autocast=True)
    worst = min(F.cosine_similarity(gs[n].flatten(), gr[n].flatten(), dim=0).item() for n in gs)
    assert worst >= 0.999, f"lowest per-parameter gradient cosine {worst:.5f}"
    # cosine ignores scale (a gradient 1% too large has cosine 1): bound the relative norm error too
    worst_norm = max(((gr[n] - gs[n]).norm() / gs[n].norm()).item() for n in gs)
    assert worst_norm <= 1e-4, f"largest per-parameter relative gradient error {worst_norm:.2e}"


@pytest.mark.parametrize("base", ["midpoint", "reveuler"])
def test_bf16_autocast_exact_on_fixed_stream(base, device):
    """On the exact stream the rebuilt states are bit-identical, so a backward that re-enters bf16 autocast
    must give the stored twin's gradients to rounding, not just a high cosine."""
    stored = _model(base, 4, 0.5, "fixed", torch.float32, d=64, device=device)
    rev = _model(base + "_rev", 4, 0.5, "fixed", torch.float32, d=64, device=device)
    rev.load_state_dict(stored.state_dict())
    (_, gs), (_, gr) = _loss_and_grads(stored, autocast=True), _loss_and_grads(rev, autocast=True)
    worst = max(((gr[n] - gs[n]).norm() / gs[n].norm()).item() for n in gs)
    assert worst <= 1e-6, worst


def test_forgetting_autocast_in_backward_is_caught(monkeypatch):
    """The check above has teeth: recomputing blocks in fp32 during backward (autocast not re-entered)
    gives gradients of a different function, far outside its bound."""
    import contextlib

    from rev.core.reversible import AutocastState

    stored = _model("reveuler", 4, 0.5, "fixed", torch.float32, d=64)
    rev = _model("reveuler_rev", 4, 0.5, "fixed", torch.float32, d=64)
    rev.load_state_dict(stored.state_dict())
    monkeypatch.setattr(AutocastState, "context", lambda self: contextlib.nullcontext())
    (_, gs), (_, gr) = _loss_and_grads(stored, autocast=True), _loss_and_grads(rev, autocast=True)
    worst = max(((gr[n] - gs[n]).norm() / gs[n].norm()).item() for n in gs)
    assert worst > 1e-4, worst


def _train_tiny(trunk: str, steps: int = 150) -> GPT:
    """Train on a copy task until the blocks are far from initialisation."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=V, seq_len=T, n_layer=6, n_head=2, d_model=32, trunk=trunk, h=0.5))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(0)
    for _ in range(steps):
        half = torch.randint(0, V, (16, T // 2), generator=gen)
        idx = torch.cat([half, half], dim=1)
        loss = model(idx[:, :-1], idx[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return model


@pytest.fixture(scope="module", params=["midpoint_rev", "reveuler_rev"])
def trained(request):
    model = _train_tiny(request.param)
    return request.param, model


def _with_stream(trunk: str, model: GPT, stream: str) -> GPT:
    other = GPT(GPTConfig(**{**model.cfg.to_dict(), "stream": stream, "trunk": trunk}))
    other.load_state_dict(model.state_dict())
    return other


def test_reconstruction_on_trained_weights(trained, record_property):
    trunk, model = trained
    idx = torch.randint(0, V, (8, T), generator=torch.Generator().manual_seed(3))
    fixed = reconstruction_error(_with_stream(trunk, model, "fixed"), idx)
    fp64 = reconstruction_error(_with_stream(trunk, model, "fp64"), idx)
    fp32 = reconstruction_error(_with_stream(trunk, model, "fp32"), idx)
    record_property("fp32_reconstruction_error", fp32)
    print(f"{trunk}: fixed {fixed:.3g}  fp64 {fp64:.3g}  fp32 {fp32:.3g}")
    assert fixed == 0.0  # bit for bit: relative error exactly zero means every element is equal
    assert fp64 <= 1e-10
    assert fp32 > fp64  # fp32 rounding is real and visible, not hidden


def test_trained_blocks_moved_from_init(trained):
    _, model = trained
    fresh = _model(model.cfg.trunk, 6, 0.5, "fp32", torch.float32)
    w, w0 = model.trunk.blocks[0].mlp.fc.weight, fresh.trunk.blocks[0].mlp.fc.weight
    assert (w - w0).norm() > 0.5 * w0.norm()


def test_reconstruction_error_refuses_residual():
    with pytest.raises(ValueError, match="no exact inverse"):
        reconstruction_error(_model("residual", 2, 1.0, "fp32"), torch.zeros(1, 4, dtype=torch.long))


def test_kept_states_give_same_gradients():
    """Restarting backward from stored boundary states changes nothing when inversion is exact."""
    stored = _model("reveuler", 6, 0.5, "fixed")
    kept = GPT(GPTConfig(**{**stored.cfg.to_dict(), "trunk": "reveuler_rev", "keep": (2, 4)})).to(torch.float64)
    kept.load_state_dict(stored.state_dict())
    (_, gs), (_, gk) = _loss_and_grads(stored), _loss_and_grads(kept)
    for name in gs:
        torch.testing.assert_close(gk[name], gs[name], rtol=1e-6, atol=1e-9)


def test_inverse_breaking_the_contract_is_refused():
    """The memory-free backward relies on `inverse` undoing `step` update by update; Euler's fixed-point
    inverse does not, and backward must say so rather than return wrong gradients."""
    from rev.core.integrators import get_integrator
    from rev.core.reversible import reversible_trunk
    from rev.core.streams import get_stream

    model = _model("residual", 2, 0.5, "fp64")
    x = torch.randn(2, T, 32, dtype=torch.float64, requires_grad=True)
    out = reversible_trunk(get_integrator("euler"), model.trunk.blocks, x, 0.5, get_stream("fp64"))
    with pytest.raises(RuntimeError, match="contract in rev.core.integrators"):
        out.sum().backward()
