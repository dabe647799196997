"""Batch slices: the reversible trunks (and residual_ckpt) run forward, recompute and backward over slices of
the batch. That changes the memory -- one slice's working set instead of the batch's -- not the gradients."""
import pytest
import torch
import torch.nn.functional as F
from model_grads import loss_and_grads, worst_relative

from rev import GPT, GPTConfig
from rev.core import reversible
from rev.base.cli import batch_slice_arg
from rev.core.model import auto_batch_slice
from rev.core.pieces import sliced
from rev.measure.ledger import sequence_ledger
from rev.measure.maxbatch import measure_memory_line

V, T, B = 64, 16, 5


def _model(trunk: str, batch_slice, stream: str = "fp64", dtype=torch.float64, **kw) -> GPT:
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=V, seq_len=T, n_layer=3, n_head=2, d_model=32, trunk=trunk, stream=stream,
                    batch_slice=batch_slice, **kw)
    return GPT(cfg).to(dtype)


def _grads(model: GPT, autocast: bool = False) -> tuple[float, dict[str, torch.Tensor]]:
    return loss_and_grads(model, B, autocast)


_worst_relative = worst_relative


CASES = [("reveuler_rev", {}), ("reveuler_rev", dict(keep=(1,))), ("reveuler_rev", dict(split_heads=True, pos_chunk=5)),
         ("midpoint_rev", {}), ("midpoint_rev", dict(keep=(2,), pos_chunk=5)), ("residual_ckpt", dict(pos_chunk=5))]


@pytest.mark.parametrize("trunk, options", CASES)
@pytest.mark.parametrize("rows", [1, 2])  # 2 leaves a short last slice of the 5 sequences
def test_sliced_gradients_equal_whole_batch_float64(trunk, options, rows):
    (l0, g0), (l1, g1) = _grads(_model(trunk, 0, **options)), _grads(_model(trunk, rows, **options))
    assert abs(l0 - l1) <= 1e-12 * abs(l0)
    assert _worst_relative(g1, g0) <= 1e-12


@pytest.mark.parametrize("trunk", ["reveuler_rev", "midpoint_rev", "residual_ckpt"])
def test_sliced_gradients_fp32_and_bf16_autocast(trunk):
    whole, parts = (_model(trunk, rows, "fp32", torch.float32) for rows in (0, 2))
    assert _worst_relative(_grads(parts)[1], _grads(whole)[1]) <= 1e-5
    gw, gp = _grads(whole, autocast=True)[1], _grads(parts, autocast=True)[1]
    worst = min(F.cosine_similarity(gw[n].flatten(), gp[n].flatten(), dim=0).item() for n in gw)
    assert worst >= 0.999, f"lowest per-parameter gradient cosine {worst:.5f}"


def test_sliced_fixed_stream_backward_rebuilds_each_slice_bit_for_bit(monkeypatch):
    """On the fixed stream every slice's backward rebuilds exactly the state its forward started from."""
    seen = []
    real_forward, real_backward = reversible.ReversibleFunction.forward, reversible.ReversibleFunction.backward

    def forward(ctx, spec, gradients, *inputs):
        ctx.started = tuple(spec.stream.encode(s) for s in inputs[:2])
        return real_forward(ctx, spec, gradients, *inputs)

    def backward(ctx, *grads):
        out = real_backward(ctx, *grads)
        seen.append(all(torch.equal(a, b) for a, b in zip(ctx.started, ctx.rebuilt_input)))
        return out

    monkeypatch.setattr(reversible.ReversibleFunction, "forward", staticmethod(forward))
    monkeypatch.setattr(reversible.ReversibleFunction, "backward", staticmethod(backward))
    _grads(_model("reveuler_rev", 2, "fixed", torch.float32, split_heads=True, pos_chunk=5))
    assert seen == [True, True, True]  # 5 sequences in slices of 2: three Functions, each exact


def test_sliced_calls_each_slice_once_and_joins_in_order():
    x = torch.arange(10.0).view(5, 2)
    calls = []
    out = sliced(lambda part: calls.append(part.shape[0]) or part * 2, x, 2)
    assert calls == [2, 2, 1] and torch.equal(out, x * 2)
    assert sliced(lambda part: calls.append(-1) or part, x, 0) is x and calls[-1] == -1  # 0: one piece
    assert sliced(lambda part: part, x, 5) is x                                          # a slice holds it all


def test_auto_slice_rule_config_and_argument():
    assert auto_batch_slice(512) == 2 and auto_batch_slice(64) == 16 and auto_batch_slice(4096) == 1
    assert GPTConfig().sequences_per_slice == 2 and GPTConfig(batch_slice=0).sequences_per_slice == 0
    assert GPT(GPTConfig(trunk="residual", n_layer=1)).trunk.batch_slice == 0  # the baseline stays whole
    with pytest.raises(ValueError, match="batch_slice"):
        GPTConfig(batch_slice=-1)
    assert batch_slice_arg("auto") == "auto" and batch_slice_arg("3") == 3
    with pytest.raises(ValueError, match="'two' is neither 'auto' nor a count: give auto .* sequences per slice"):
        batch_slice_arg("two")


def _line(trunk: str, batch_slice, stream: str = "fp32"):
    cfg = GPTConfig(vocab_size=64, seq_len=256, n_layer=2, n_head=2, d_model=64, trunk=trunk, stream=stream,
                    batch_slice=batch_slice)
    return cfg, measure_memory_line(cfg, 4, 8, device="cpu")


@pytest.mark.parametrize("trunk", ["reveuler_rev", "midpoint_rev"])
def test_sliced_reversible_step_costs_its_state_per_sequence(trunk):
    """Measured: with slices of one sequence the step's memory per sequence is what the ledger's model says --
    the state and its gradients, nothing of the blocks -- while the whole batch at once costs far more."""
    cfg, line = _line(trunk, 1)
    led = sequence_ledger(cfg, line.bytes_per_sequence)
    assert abs(led.remainder) <= 0.1 * led.modelled, led.as_row()
    assert _line(trunk, 0)[1].bytes_per_sequence > 1.5 * line.bytes_per_sequence


def test_sliced_checkpointing_lowers_memory_per_sequence():
    assert _line("residual_ckpt", 1)[1].bytes_per_sequence < 0.8 * _line("residual_ckpt", 0)[1].bytes_per_sequence
