"""PyTorch's own gradient checker on the memory-free backward, and a second backward through it.

`torch.autograd.gradcheck` compares the backward with finite differences of the forward, in float64, for the
trunk's input and every block parameter (fast mode: along random directions, so each check is a few forwards
and backwards); it backpropagates the same graph more than once (`retain_graph=True`), which the reversible
backward has to support. The fixed stream rounds every increment to a 2^-32 grid, so its forward is piecewise
constant and its backward is the straight-through gradient of the unrounded trunk: it is checked with a
finite-difference step far above the grid (1e-4), where the rounding noise, about L * 2^-33 / 1e-4 ~ 1e-6 for
these L=2 layers, stays below the tolerance.

gradcheck also backpropagates twice and asks for identical results. A second backward starts from the input
state the first one rebuilt: on the fixed stream that is the input, bit for bit; on a float stream it is one
round trip's rounding away (~1e-16 relative in float64), which `NONDET_TOL` admits.
"""
import pytest
import torch

from rev import GPT, GPTConfig
from rev.core.model import stored_twin
from rev.core.streams import STREAMS

LAYOUTS = {"plain": dict(pos_chunk=0, batch_slice=0), "kept+chunks+heads": dict(keep=(1,), pos_chunk=3, split_heads=True),
           "batch slices": dict(batch_slice=1, keep=(1,))}  # two Functions sharing one parameter-gradient sum
EPS = {"fp32": 1e-6, "fp64": 1e-6, "fixed": 1e-4}   # fp32 is promoted to float64 in a .double() model
NONDET_TOL = {"fp32": 1e-12, "fp64": 1e-12, "fixed": 0.0}


def _trunk_function(trunk: str, stream: str, layout: str):
    """(f, inputs): f(x, *params) is the float64 trunk, `params` its own block parameters (gradcheck perturbs
    them in place). Weights are drawn at 0.3, not GPT's 0.02, so the blocks weigh in the output as much as the
    identity path does and a wrong block gradient cannot hide below the tolerance."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=16, seq_len=4, n_layer=2, n_head=2, d_model=8, trunk=trunk, stream=stream,
                          **LAYOUTS[layout])).double()
    gen = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for p in model.trunk.parameters():
            p.add_(0.3 * torch.randn(p.shape, dtype=p.dtype, generator=gen))
    x = torch.randn(2, 4, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1), requires_grad=True)
    return (lambda x, *params: model.trunk(x)), (x, *model.trunk.parameters())


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("stream", STREAMS)
@pytest.mark.parametrize("trunk", ["midpoint_rev", "reveuler_rev"])
def test_gradcheck_reversible_trunk(trunk, stream, layout):
    f, inputs = _trunk_function(trunk, stream, layout)
    assert torch.autograd.gradcheck(f, inputs, eps=EPS[stream], atol=1e-5, nondet_tol=NONDET_TOL[stream],
                                    fast_mode=True)


@pytest.mark.parametrize("trunk", ["midpoint_rev", "reveuler_rev"])
def test_gradcheck_full_jacobian_of_the_input(trunk):
    """Every column of the Jacobian (one backward per output element, all through one graph)."""
    f, (x, *params) = _trunk_function(trunk, "fp64", "batch slices")
    assert torch.autograd.gradcheck(lambda x: f(x, *params), (x,), nondet_tol=NONDET_TOL["fp64"])


def test_gradcheck_sees_a_wrong_gradient(monkeypatch):
    """The check has teeth: a backward whose block cotangents are 1% off fails it (fast mode sees 0.3%)."""
    from rev.core.reversible import LayerTape

    real = LayerTape._backprop
    monkeypatch.setattr(LayerTape, "_backprop", lambda self, fn, s, g, coef: real(self, fn, s, g, 1.01 * coef))
    f, inputs = _trunk_function("reveuler_rev", "fp64", "plain")
    assert not torch.autograd.gradcheck(f, inputs, nondet_tol=NONDET_TOL["fp64"], fast_mode=True,
                                        raise_exception=False)


def _gpt(trunk: str, stream: str) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=64, seq_len=16, n_layer=3, n_head=2, d_model=32, trunk=trunk, stream=stream,
                         loss_head="chunked", keep=(1,)))


@pytest.mark.parametrize("stream", ["fixed", "fp32"])
@pytest.mark.parametrize("trunk", ["midpoint_rev", "reveuler_rev"])
def test_second_backward_with_retain_graph(trunk, stream):
    """A second backward gives the first one's gradients: bit for bit on the fixed stream (the rebuilt input is
    the input), to one round trip's reconstruction error on fp32."""
    model = _gpt(trunk, stream)
    idx = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(1))
    loss = model(idx, idx)
    runs = []
    for retain in (True, True, False):
        model.zero_grad(set_to_none=True)
        loss.backward(retain_graph=retain)
        runs.append([p.grad.clone() for p in model.parameters()])
    for later in runs[1:]:
        if stream == "fixed":
            assert all(torch.equal(a, b) for a, b in zip(runs[0], later))
        else:
            assert max(((a - b).norm() / a.norm()).item() for a, b in zip(runs[0], later)) < 1e-5
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()   # the last one did not retain the graph: autograd's own error, as for any function


def _functional_grads(model: GPT, idx: torch.Tensor) -> dict[str, torch.Tensor]:
    """Gradients w.r.t. parameter tensors passed explicitly by torch.func.functional_call: the model's own,
    scaled, so that a backward recomputing with the module's own parameters gets other gradients."""
    from torch.func import functional_call

    params = {n: (p.detach() * 1.5 + 0.01).requires_grad_() for n, p in model.named_parameters()}
    loss = functional_call(model, params, (idx, idx))
    return dict(zip(params, torch.autograd.grad(loss, list(params.values()))))


@pytest.mark.parametrize("stream", sorted(STREAMS))
@pytest.mark.parametrize("trunk", ["midpoint_rev", "reveuler_rev"])
@pytest.mark.parametrize("layout", ["plain", "batch slices", "kept+chunks+heads"])
def test_functional_call_gives_the_stored_twins_gradients(trunk, stream, layout):
    """torch.func.functional_call swaps the parameters for forward only; the memory-free backward recomputes the
    blocks with the tensors forward was given, so the gradients w.r.t. them are the stored twin's (float64)."""
    cfg = dict(vocab_size=32, seq_len=8, n_layer=3, n_head=2, d_model=16, stream=stream, **LAYOUTS[layout])
    torch.manual_seed(0)
    rev_model = GPT(GPTConfig(trunk=trunk, **cfg)).double()
    twin = GPT(GPTConfig(trunk=stored_twin(trunk), **cfg)).double()
    twin.load_state_dict(rev_model.state_dict())
    idx = torch.randint(0, 32, (3, 8), generator=torch.Generator().manual_seed(1))
    got, want = _functional_grads(rev_model, idx), _functional_grads(twin, idx)
    worst = max(((got[n] - want[n]).norm() / want[n].norm()).item() for n in want)
    assert worst <= 1e-12, f"{trunk}/{stream}/{layout}: worst relative gradient gap {worst:.2e}"
    assert all(p.grad is None for p in rev_model.parameters()), "the module's own parameters received gradients"


@pytest.mark.parametrize("trunk", ["midpoint_rev", "reveuler_rev"])
def test_gradcheck_through_functional_call(trunk):
    """gradcheck with the input and a few block parameters as explicit inputs of functional_call."""
    from torch.func import functional_call

    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=16, seq_len=4, n_layer=2, n_head=2, d_model=8, trunk=trunk,
                          stream="fp64")).double()
    names = [n for n, _ in model.trunk.named_parameters()][:3]
    own = dict(model.trunk.named_parameters())
    params = [(own[n].detach().clone() * 15).requires_grad_() for n in names]   # weights that weigh in
    x = torch.randn(1, 4, 8, dtype=torch.float64, requires_grad=True)

    def f(x, *given):
        return functional_call(model.trunk, dict(zip(names, given)), (x,))

    assert torch.autograd.gradcheck(f, (x, *params), eps=1e-6, atol=1e-6, nondet_tol=1e-12, fast_mode=True)


def test_parameters_changed_between_forward_and_backward_are_refused():
    model = GPT(GPTConfig(vocab_size=16, seq_len=4, n_layer=2, n_head=2, d_model=8, trunk="midpoint_rev"))
    out = model.trunk(torch.randn(1, 4, 8))
    with torch.no_grad():
        model.trunk.blocks[1].mlp.fc.weight.mul_(2.0)       # as an optimizer step before backward would
    with pytest.raises(RuntimeError, match="modified in place"):
        out.sum().backward()


@pytest.mark.parametrize("trunk", ["midpoint_rev", "reveuler_rev"])
def test_second_backward_without_retain_graph_is_autograds_error(trunk):
    """Through the trunk alone (no other function saved anything): the second backward is refused by autograd
    itself, as for any function, even though this one could rebuild what it needs."""
    model = GPT(GPTConfig(vocab_size=16, seq_len=4, n_layer=2, n_head=2, d_model=8, trunk=trunk))
    out = model.trunk(torch.randn(1, 4, 8, requires_grad=True))
    out.sum().backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        out.sum().backward()
