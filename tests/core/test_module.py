"""The GPT behaves like a PyTorch module: `.double()`/`.half()`/`.bfloat16()`/`.to(...)` set the compute
precision and device, `state_dict` moves between trunk variants, a trained model survives `torch.save`/`load`,
and `eval()`, `no_grad()` and `generate` work as a PyTorch user expects."""
import io

import pytest
import torch

from rev import GPT, GPTConfig
from rev.core.model import TRUNKS

V, T = 64, 16
SMALL = dict(vocab_size=V, seq_len=T, n_layer=3, n_head=2, d_model=32)


def _model(trunk: str, **kw) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(**{**SMALL, **kw}, trunk=trunk))


def _batch(seed: int = 1) -> torch.Tensor:
    return torch.randint(0, V, (3, T + 1), generator=torch.Generator().manual_seed(seed))


def _grads(model: GPT) -> dict[str, torch.Tensor]:
    idx = _batch()
    model.zero_grad(set_to_none=True)
    model(idx[:, :-1], idx[:, 1:]).backward()
    return {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def _relative(a: dict, b: dict) -> float:
    num = sum(((a[n].double() - b[n].double()) ** 2).sum() for n in b)
    return float((num / sum((b[n].double() ** 2).sum() for n in b)).sqrt())


@pytest.mark.parametrize("base", ["midpoint", "reveuler"])
def test_double_model_computes_in_float64_on_the_default_stream(base):
    """`.double()` on the default fp32 stream: the twins agree as float64 twins do (~1e-16 measured), not to
    fp32 stream rounding (5e-8 when the stream stayed fp32)."""
    stored, rev = _model(base).double(), _model(base + "_rev").double()
    assert stored.cfg.stream == "fp32"
    err = _relative(_grads(rev), _grads(stored))
    assert err < 1e-12, f"{base}: .double() twins differ by {err:.1e}"
    # and the same with .to(dtype), the other spelling
    assert _relative(_grads(_model(base + "_rev").to(torch.float64)), _grads(stored)) < 1e-12


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("trunk", ["residual", "midpoint_rev", "reveuler_rev"])
def test_half_and_bfloat16_models_compute_their_blocks_in_that_dtype(trunk, dtype):
    """The blocks compute in the parameters' dtype; the fp32 stream keeps its sums in fp32 (never below, and
    not lowered to the blocks' dtype), and the gradients come back in the parameters' dtype."""
    model = _model(trunk).to(dtype)
    seen: list[torch.dtype] = []
    hooks = [b.mlp.register_forward_pre_hook(lambda m, a: seen.append(a[0].dtype)) for b in model.trunk.blocks]
    grads = _grads(model)
    for hk in hooks:
        hk.remove()
    assert seen and set(seen) == {dtype}
    assert all(g.dtype == dtype and torch.isfinite(g).all() for g in grads.values())
    assert model.trunk.stream.at_least(dtype).dtype == torch.float32


def test_to_device_and_dtype_move_every_parameter(device):
    model = _model("reveuler_rev", keep=(1,)).to(device)
    assert all(p.device.type == device.type for p in model.parameters())
    idx = _batch().to(device)
    loss = model(idx[:, :-1], idx[:, 1:])
    loss.backward()
    assert loss.device.type == device.type and all(p.grad.device.type == device.type for p in model.parameters())
    back = model.to("cpu", torch.float64)
    assert all(p.device.type == "cpu" and p.dtype == torch.float64 for p in back.parameters())


def test_state_dict_moves_between_every_trunk():
    """All trunks share parameter names, so weights load strictly into any other trunk; the reversible twin of a
    stored trunk then computes the same loss."""
    names = {t: list(_model(t).state_dict()) for t in TRUNKS}
    assert all(n == names["residual"] for n in names.values())
    source = _model("midpoint")
    for trunk in TRUNKS:
        target = GPT(GPTConfig(**SMALL, trunk=trunk))
        target.load_state_dict(source.state_dict(), strict=True)
    twin = GPT(GPTConfig(**SMALL, trunk="midpoint_rev"))
    twin.load_state_dict(source.state_dict())
    idx = _batch()
    torch.testing.assert_close(twin(idx[:, :-1], idx[:, 1:]), source(idx[:, :-1], idx[:, 1:]), rtol=1e-6, atol=0)


def _trained(trunk: str, steps: int = 5) -> GPT:
    model = _model(trunk, stream="fixed")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for step in range(steps):
        idx = _batch(seed=10 + step)
        loss = model(idx[:, :-1], idx[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return model


@pytest.mark.parametrize("whole", [False, True], ids=["state_dict", "whole module"])
def test_save_and_load_a_trained_model(whole):
    model = _trained("reveuler_rev")
    buf = io.BytesIO()
    torch.save(model if whole else {"config": model.cfg.to_dict(), "state": model.state_dict()}, buf)
    buf.seek(0)
    if whole:
        loaded = torch.load(buf, weights_only=False)
    else:
        saved = torch.load(buf, weights_only=True)
        loaded = GPT(GPTConfig(**saved["config"]))
        loaded.load_state_dict(saved["state"])
    idx = _batch(seed=99)
    assert torch.equal(loaded(idx[:, :-1], idx[:, 1:]), model(idx[:, :-1], idx[:, 1:]))
    assert all(torch.equal(a, b) for a, b in zip(_grads(loaded).values(), _grads(model).values()))


@pytest.mark.parametrize("trunk", ["residual", "midpoint_rev", "reveuler_rev"])
def test_eval_and_no_grad_inference(trunk):
    """Inference under `no_grad` builds no graph and gives the training forward's logits; `eval()` turns dropout
    off (a stored trunk with dropout is deterministic in eval mode, random in train mode)."""
    model = _model(trunk)
    idx = _batch()[:, :-1]
    with torch.no_grad():
        logits = model(idx)
    assert not logits.requires_grad
    torch.testing.assert_close(logits, model(idx).detach(), rtol=0, atol=0)
    noisy = _model("residual", dropout=0.5)
    assert not torch.equal(noisy(idx), noisy(idx))
    noisy.eval()
    with torch.no_grad():
        assert torch.equal(noisy(idx), noisy(idx))


@pytest.mark.parametrize("trunk", ["midpoint_rev", "reveuler_rev"])
def test_generate_from_a_reversible_model(trunk):
    model = _trained(trunk).eval()
    prompt = _batch()[:2, :4]
    outs = [model.generate(prompt, 20, temperature=0.8, top_k=8, generator=torch.Generator().manual_seed(0))
            for _ in range(2)]
    assert outs[0].shape == (2, 24) and torch.equal(outs[0][:, :4], prompt)
    assert torch.equal(outs[0], outs[1]) and 0 <= int(outs[0].min()) and int(outs[0].max()) < V
    assert not outs[0].requires_grad
    long = model.generate(prompt, T + 5, generator=torch.Generator().manual_seed(0))   # past seq_len: cropped
    assert long.shape == (2, 4 + T + 5)
