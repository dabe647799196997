"""fp16 autocast with a real GradScaler, on the CPU: the numerics a T4 trains with, checked where no GPU is.

The reversible trunks' gradients under fp16 autocast and a GradScaler match their stored twins', at T=128
where the automatic position chunk is on, with attention head by head and kept states; and a step whose
gradient overflows is skipped: the scale shrinks and no parameter moves.

How closely: where the reversible trunk evaluates the blocks as its twin does, to the stream's rounding (on
the fixed stream, rebuilt states are bit-identical). Where it evaluates reversible Euler's MLP over position
chunks, or its attention head by head, the fp16 matmuls see other shapes and the heads' fp16 outputs are added
one by one, so the gradients differ from the twin's by fp16 rounding (measured ~1e-4 relative), about as much as
a backward that forgot autocast (~2e-4, caught by the exact cases): there the bound (1e-3) guards the chunking
itself, which a dropped chunk breaks by far more. (Leapfrog evaluates its whole block at once: no chunks.)
"""
import pytest
import torch

from rev import GPT, GPTConfig
from rev.core.model import stored_twin

V, T = 64, 128
# "whole": one piece for the batch and the sequence; the auto chunks are those of the whole batch at once
# (batch_slice=0: with slices, auto leaves sequences this short unchunked); "slices": one sequence a slice
WHOLE = dict(batch_slice=0)
LAYOUTS = {"whole": dict(pos_chunk=0, **WHOLE), "whole+kept": dict(pos_chunk=0, keep=(1, 2), **WHOLE),
           "auto chunks": WHOLE, "chunks+heads+kept": dict(split_heads=True, keep=(1, 2), **WHOLE),
           "chunks of 48": dict(pos_chunk=48, **WHOLE), "slices+chunks+heads": dict(batch_slice=1, pos_chunk=48,
                                                                                   split_heads=True, keep=(1,))}
ROUNDING = 1e-6    # the stream's own rounding (fixed: 0, fp32: ~5e-8 measured)
FP16_PIECES = 1e-3  # fp16 rounding of chunked / head-by-head evaluation (~1e-4 measured)
# midpoint evaluates its whole block in the stored trunk's shapes unless the batch is sliced
CASES = [("midpoint_rev", layout, FP16_PIECES if "slices" in layout else ROUNDING) for layout in LAYOUTS] + [
    ("reveuler_rev", layout, ROUNDING if layout.startswith("whole") else FP16_PIECES) for layout in LAYOUTS]


def _model(trunk: str, stream: str, **layout) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=V, seq_len=T, n_layer=3, n_head=2, d_model=32, trunk=trunk, stream=stream,
                         **layout))


def _scaled_grads(model: GPT, scale: float = 2.0 ** 16) -> dict[str, torch.Tensor]:
    """Gradients of one fp16-autocast step through a GradScaler, unscaled as `scaler.step` would see them."""
    idx = torch.randint(0, V, (2, T + 1), generator=torch.Generator().manual_seed(1))
    scaler = torch.amp.GradScaler("cpu", init_scale=scale)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    with torch.autocast("cpu", torch.float16):
        loss = model(idx[:, :-1], idx[:, 1:])
    scaler.scale(loss).backward()          # outside autocast, as in training
    scaler.unscale_(opt)
    return {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def _relative(a: dict, b: dict) -> float:
    num = sum(((a[n].double() - b[n].double()) ** 2).sum() for n in b)
    return float((num / sum((b[n].double() ** 2).sum() for n in b)).sqrt())


@pytest.mark.parametrize("stream", ["fixed", "fp32"])
@pytest.mark.parametrize("trunk, layout, bound", CASES)
def test_fp16_grad_scaler_gradients_match_the_stored_twin(trunk, layout, bound, stream):
    rev = _model(trunk, stream, **LAYOUTS[layout])
    if "chunks" in layout:
        assert rev.trunk.blocks[0].pos_chunk > 0, "position chunks must be on for this case to mean anything"
    if "slices" in layout:
        assert rev.trunk.batch_slice == 1, "batch slices must be on for this case to mean anything"
    stored = _model(stored_twin(trunk), stream)
    stored.load_state_dict(rev.state_dict())
    err = _relative(_scaled_grads(rev), _scaled_grads(stored))
    assert err <= bound, f"{trunk} on {stream}, {layout}: relative gradient error {err:.2e} > {bound:.0e}"


def test_fp16_chunked_backward_that_drops_a_chunk_is_caught(monkeypatch):
    """The loose bound still has teeth: losing one chunk's parameter gradients is far outside it."""
    from rev.core.reversible import LayerTape

    real, seen = LayerTape._add_param_grads, {}

    def drop_second(self, got):
        seen[id(self)] = seen.get(id(self), 0) + 1
        if seen[id(self)] != 2:
            real(self, got)

    rev, stored = _model("reveuler_rev", "fixed"), _model("reveuler", "fixed")
    stored.load_state_dict(rev.state_dict())
    monkeypatch.setattr(LayerTape, "_add_param_grads", drop_second)
    assert _relative(_scaled_grads(rev), _scaled_grads(stored)) > 10 * FP16_PIECES


def test_fp16_backward_that_forgets_autocast_is_caught(monkeypatch):
    """The exact bound has teeth: a backward recomputing the blocks in fp32 (autocast not re-entered) is far
    outside it."""
    import contextlib

    from rev.core.reversible import AutocastState

    rev, stored = _model("reveuler_rev", "fixed", keep=(1, 2), pos_chunk=0), _model("reveuler", "fixed")
    stored.load_state_dict(rev.state_dict())
    monkeypatch.setattr(AutocastState, "context", lambda self: contextlib.nullcontext())
    assert _relative(_scaled_grads(rev), _scaled_grads(stored)) > 100 * ROUNDING


@pytest.mark.parametrize("stream", ["fixed", "fp32"])
@pytest.mark.parametrize("trunk", ["midpoint_rev", "reveuler_rev"])
def test_overflowing_step_is_skipped_and_the_scale_shrinks(trunk, stream):
    """A loss scale of 2^40 overflows fp16 inside the reversible backward: the gradient holds inf, so
    `scaler.step` skips the update (no parameter moves) and `update` halves the scale; the next step, at the
    smaller scale, does update."""
    model = _model(trunk, stream, split_heads=True)
    idx = torch.randint(0, V, (2, T + 1), generator=torch.Generator().manual_seed(1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 40)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}

    def step() -> None:
        with torch.autocast("cpu", torch.float16):
            loss = model(idx[:, :-1], idx[:, 1:])
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)

    step()
    assert scaler.get_scale() == 2.0 ** 39
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters()), "a skipped step moved parameters"
    scaler.update(2.0 ** 10)      # a scale fp16 can hold
    step()
    assert scaler.get_scale() == 2.0 ** 10
    assert not all(torch.equal(p, before[n]) for n, p in model.named_parameters())
