"""The ledger's parts against the tensors a reversible backward really holds, per trunk kind and stream.

At the backward moment a sliced reversible trunk holds, per sequence, its state (in the stream's storage dtype)
and the state's gradients (in the stream's carrier dtype), for every stream of the state. Both are read off the
tensors the memory-free backward is handed for its last layer (`LayerTape`), not from a formula, and the ledger
must name each part at exactly that size: a ledger that counted one stream's gradients, or the wrong dtype,
differs from it by a whole part."""
from __future__ import annotations

import pytest
import torch

from rev import GPT, GPTConfig
from rev.core import reversible
from rev.measure.ledger import sequence_ledger

B, T, D = 3, 16, 32


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def _held_in_backward(cfg: GPTConfig, monkeypatch) -> tuple[float, float]:
    """(state, state gradients) bytes per sequence that the trunk's backward starts its last layer with."""
    seen = []
    real_init = reversible.LayerTape.__init__

    def init(self, block, stream, dtype, autocast, state, grads, *rest):
        if not seen:   # the first layer the backward undoes: the last one
            seen.append((_nbytes(state), _nbytes(grads), state[0].shape[0]))
        real_init(self, block, stream, dtype, autocast, state, grads, *rest)

    monkeypatch.setattr(reversible.LayerTape, "__init__", init)
    torch.manual_seed(0)
    model = GPT(cfg)
    idx = torch.randint(0, cfg.vocab_size, (B, T + 1))
    model(idx[:, :-1], idx[:, 1:]).backward()
    state, grads, rows = seen[0]
    return state / rows, grads / rows


@pytest.mark.parametrize("trunk", ["reveuler_rev", "midpoint_rev"])
@pytest.mark.parametrize("stream", ["fp32", "fp64", "fixed"])
def test_ledger_names_the_state_and_its_gradients_the_backward_holds(trunk, stream, monkeypatch):
    cfg = GPTConfig(vocab_size=64, seq_len=T, n_layer=2, n_head=2, d_model=D, trunk=trunk, stream=stream,
                    batch_slice=1)
    state, grads = _held_in_backward(cfg, monkeypatch)
    led = sequence_ledger(cfg, measured=state + grads)
    assert led.parts.get("state") == state, led.parts
    assert led.parts.get("state gradients") == grads, f"{trunk}/{stream}: held {grads:.0f} B, ledger {led.parts}"


def test_the_fused_heads_input_gradient_is_fp32_under_bf16_and_the_peak_moment_follows(monkeypatch):
    """Under bf16 autocast the final norm hands the fused head an fp32 input (layer norm runs in fp32 under
    autocast), so the input gradient it computes in forward and keeps to backward is fp32: 4 bytes per number,
    read off the tensor the head keeps. Counted at the activations' 2 bytes instead, the residual trunk's end of
    forward (state 4 + norm 2 + head 4 = 10 bytes per number) would tie its backward (state 4 + gradients 4) and
    the ledger would put the peak in backward."""
    from rev.core import loss

    kept = []
    real_forward = loss.FusedLinearCrossEntropy.forward

    def forward(ctx, h, weight, targets, chunk):
        out = real_forward(ctx, h, weight, targets, chunk)
        kept.append(ctx.grads[0])
        return out

    monkeypatch.setattr(loss.FusedLinearCrossEntropy, "forward", staticmethod(forward))
    cfg = GPTConfig(vocab_size=64, seq_len=T, n_layer=2, n_head=2, d_model=D, trunk="residual", loss_head="fused")
    torch.manual_seed(0)
    idx = torch.randint(0, cfg.vocab_size, (B, T + 1))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        GPT(cfg)(idx[:, :-1], idx[:, 1:]).backward()
    per_token = _nbytes(kept) / (B * T)
    assert kept[0].dtype == torch.float32 and per_token == D * 4
    led = sequence_ledger(cfg, measured=0.0, dtype=torch.bfloat16)
    assert led.parts["loss head"] == T * per_token
    assert led.moment == "end of forward" and led.parts["final norm"] == T * D * 2
# --- a whole step, predicted without running it, against the measured step --------------------------------------

STEP_GEOMETRY = dict(vocab_size=2048, seq_len=128, n_layer=2, n_head=3, d_model=96)


@pytest.mark.parametrize("trunk, tolerance, dtype", [
    *[(t, 0.08, d) for t in ("residual", "reveuler_rev", "midpoint_rev") for d in (torch.float32, torch.float16)],
    ("residual_ckpt", 0.25, torch.float32)],   # its recompute's working set is overestimated, by 0-21%
    ids=lambda v: {torch.float32: "fp32", torch.float16: "fp16-autocast"}.get(v, str(v)))
def test_the_step_ledger_predicts_the_measured_peak_and_its_slope(trunk, tolerance, dtype):
    """The peak at two batches, and what a sequence adds between them, within `tolerance` of a measured real step
    (the CPU's fp16 autocast stands in for a T4's). The slope is what sets a max batch: a ledger that kept one
    stored layer, or left out the state's gradients, misses it by a factor, not by percent."""
    from rev.measure.probe import step_peak
    from rev.measure.ledger import step_memory

    cfg = GPTConfig(trunk=trunk, **STEP_GEOMETRY)
    autocast = None if dtype == torch.float32 else dtype
    measured = {b: step_peak(cfg, b, torch.device("cpu"), autocast) for b in (16, 48)}
    predicted = {b: step_memory(cfg, b, dtype).peak for b in measured}
    for b in measured:
        assert predicted[b] == pytest.approx(measured[b], rel=tolerance), (b, predicted, measured)
    slope = lambda m: (m[48] - m[16]) / 32  # noqa: E731
    assert slope(predicted) == pytest.approx(slope(measured), rel=tolerance)


def test_a_stored_step_grows_with_depth_and_a_reversible_one_by_its_weights_alone():
    from rev.measure.ledger import step_memory
    from rev.measure.maxbatch import static_bytes

    deeper = dict(STEP_GEOMETRY, n_layer=6)
    for trunk in ("residual", "reveuler_rev"):
        shallow, deep = (GPTConfig(trunk=trunk, **g) for g in (STEP_GEOMETRY, deeper))
        grown = step_memory(deep, 32).peak - step_memory(shallow, 32).peak
        weights = static_bytes(deep) - static_bytes(shallow)
        if trunk == "residual":
            assert grown > 5 * weights      # three more layers' activations for 32 sequences
        else:
            assert grown == pytest.approx(weights)
    with pytest.raises(ValueError, match="batch must be >= 1"):
        step_memory(GPTConfig(**STEP_GEOMETRY), 0)


@pytest.mark.parametrize("trunk", ["reveuler_rev", "midpoint_rev"])
def test_the_step_ledger_counts_the_working_set_of_one_recomputed_slice(trunk):
    """A small vocabulary and one slice of many sequences: the backward's peak is the state and one slice's block
    evaluation (attention or MLP for reversible Euler, the whole block for leapfrog), not the head."""
    from rev.measure.probe import step_peak
    from rev.measure.ledger import step_memory

    cfg = GPTConfig(vocab_size=256, seq_len=64, n_layer=2, n_head=2, d_model=64, trunk=trunk, batch_slice=16)
    predicted = step_memory(cfg, 16)
    assert predicted.moment == "backward"
    assert predicted.peak == pytest.approx(step_peak(cfg, 16, torch.device("cpu"), None), rel=0.08)
