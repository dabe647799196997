"""Promises of the memory-free backward that only show on a lossy stream or inside backward itself.

Gradients are compared by relative norm error, ||g - g_ref|| / ||g_ref|| over all parameters at once and
per tensor, never by cosine alone: a gradient off by a constant factor has cosine 1.
"""
import pytest
import torch

from rev import GPT, GPTConfig
from rev.core.model import stored_twin

V, T, L, D = 64, 16, 8, 32


def _model(trunk: str, stream: str, keep: tuple[int, ...] = (), expanding: bool = False) -> GPT:
    """Random weights; `expanding` blocks (sharper attention, louder outputs) make the fp32 round trip lossy
    at this tiny size, as long training does to a real trunk."""
    torch.manual_seed(0)
    h = 0.5 if trunk.startswith("midpoint") else 1.0
    model = GPT(GPTConfig(vocab_size=V, seq_len=T, n_layer=L, n_head=2, d_model=D, trunk=trunk, h=2 * h if expanding
                          else h, stream=stream, keep=keep))
    if expanding:
        with torch.no_grad():
            for b in model.trunk.blocks:
                b.attn.qkv.weight[: 2 * D].mul_(32.0)
                b.attn.proj.weight.mul_(32.0)
                b.mlp.proj.weight.mul_(32.0)
            model.wte.weight.mul_(0.1)
            model.wpe.weight.mul_(0.1)
    return model


def _grads(model: GPT) -> dict[str, torch.Tensor]:
    idx = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(1))
    tgt = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(2))
    model.zero_grad(set_to_none=True)
    model(idx, tgt).backward()
    return {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def relative_error(g: dict[str, torch.Tensor], ref: dict[str, torch.Tensor]) -> float:
    """||g - ref|| / ||ref|| over every parameter together (float64)."""
    num = sum(((g[n].double() - ref[n].double()) ** 2).sum() for n in ref)
    den = sum((ref[n].double() ** 2).sum() for n in ref)
    return float((num / den).sqrt())


def _twin(trunk: str, stream: str, keep=(), expanding=True) -> tuple[dict, dict]:
    """(reversible gradients, stored-twin gradients) on the same weights."""
    stored = _model(stored_twin(trunk), stream, expanding=expanding)
    rev = _model(trunk, stream, keep=keep, expanding=expanding)
    rev.load_state_dict(stored.state_dict())
    return _grads(rev), _grads(stored)


@pytest.mark.parametrize("trunk", ["reveuler_rev", "midpoint_rev"])
def test_kept_states_restart_backward_on_a_lossy_stream(trunk):
    """On fp32, restarting backward from kept boundary states must bring the gradient error far below the one
    without keeps (backward that ignored its kept states would give exactly the unkept error)."""
    none = relative_error(*_twin(trunk, "fp32"))
    every = relative_error(*_twin(trunk, "fp32", keep=tuple(range(1, L))))
    print(f"{trunk}: relative gradient error without keeps {none:.2e}, with every boundary kept {every:.2e}")
    assert none > 1e-3, "the stress model no longer makes fp32 lossy: the test would prove nothing"
    assert every < none / 100


@pytest.mark.parametrize("trunk", ["reveuler_rev", "midpoint_rev"])
def test_fixed_stream_backward_rebuilds_each_state_bit_for_bit(trunk):
    """The block inputs recomputed in backward are the forward's, bit for bit, on the fixed stream, even on
    the expanding model where fp32 visibly drifts; kept states then change no gradient bit."""
    def block_inputs(model: GPT) -> list[torch.Tensor]:
        seen: list[torch.Tensor] = []
        hooks = [b.mlp.register_forward_pre_hook(lambda m, a: seen.append(a[0].detach().clone()))
                 for b in model.trunk.blocks]
        _grads(model)
        for hk in hooks:
            hk.remove()
        return seen

    for stream, exact in (("fixed", True), ("fp32", False)):
        seen = block_inputs(_model(trunk, stream, expanding=True))
        fwd, bwd = seen[:len(seen) // 2], seen[len(seen) // 2:][::-1]
        assert len(fwd) == L == len(bwd)
        assert all(torch.equal(a, b) for a, b in zip(fwd, bwd)) == exact, stream
    plain = _grads(_model(trunk, "fixed", expanding=True))
    kept = _grads(_model(trunk, "fixed", keep=(2, 5), expanding=True))
    assert all(torch.equal(plain[n], kept[n]) for n in plain)


@pytest.mark.parametrize("trunk", ["reveuler_rev", "midpoint_rev"])
def test_fixed_stream_gradient_matches_stored_twin_in_norm(trunk):
    """Exactness through the gradient path: on the fixed stream the reversible gradient equals the stored
    twin's to float64 rounding in relative norm, per tensor and overall, on the expanding model too."""
    g, ref = _twin(trunk, "fixed")
    worst = max(relative_error({n: g[n]}, {n: ref[n]}) for n in ref if ref[n].norm() > 0)
    assert relative_error(g, ref) < 1e-6 and worst < 1e-5, (relative_error(g, ref), worst)


def test_relative_error_sees_a_wrong_scale_that_cosine_misses():
    g = {"w": torch.randn(50, generator=torch.Generator().manual_seed(0))}
    scaled = {"w": 1.01 * g["w"]}
    cos = torch.nn.functional.cosine_similarity(scaled["w"], g["w"], dim=0)
    assert cos > 1 - 1e-6 and relative_error(scaled, g) == pytest.approx(0.01, rel=1e-3)


def test_leapfrog_starts_with_one_euler_step_then_takes_2h_steps():
    """x[1] = x[0] + h f(x[0]) (the Euler starter), then x[l+1] = x[l-1] + 2h f(x[l])."""
    from rev.core.integrators import Leapfrog

    f, h, x0 = torch.sin, 0.1, torch.tensor([0.3, -1.2], dtype=torch.float64)
    state = Leapfrog().init(x0)
    for layer in range(2):
        state = Leapfrog().step(state, lambda name, s: f(s), h, layer, lambda s, c, coef: s + coef * c)
    x1 = x0 + h * f(x0)
    torch.testing.assert_close(state[0], x1, rtol=0, atol=0)
    torch.testing.assert_close(state[1], x0 + 2 * h * f(x1), rtol=0, atol=0)
