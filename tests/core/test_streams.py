"""The streams' own promises: the fixed stream's exact add/subtract, its handling of values that do not fit
(NaN, inf, too large: detectable as NaN on every device, never turned into a finite number), and float
streams that never store a sum below the dtype they add up."""
import pytest
import torch

from rev import GPT, GPTConfig
from rev.core.streams import FixedStream, get_stream

FIXED = get_stream("fixed")
BAD = [float("nan"), float("inf"), float("-inf"), 2.0 ** 30, -2.0 ** 31, 1e30]


def test_fixed_add_then_sub_is_exact():
    gen = torch.Generator().manual_seed(0)
    s = FIXED.encode(torch.randn(1000, generator=gen, dtype=torch.float64))
    c = torch.randn(1000, generator=gen)
    assert torch.equal(FIXED.sub(FIXED.add(s, c, 0.37), c, 0.37), s)
    t = FIXED.add(s, c, 0.37)
    assert torch.equal(FIXED.sub_(t, c, 0.37), s)


@pytest.mark.parametrize("value", BAD)
def test_fixed_encode_of_a_value_that_does_not_fit_decodes_to_nan(value):
    s = FIXED.encode(torch.tensor([1.5, value, -2.25]))
    assert s[1] == FixedStream.INVALID
    out = FIXED.decode(s, torch.float32)
    assert torch.isnan(out[1]) and out[0] == 1.5 and out[2] == -2.25


def test_fixed_invalid_increment_stays_invalid_through_every_add_and_sub():
    s = FIXED.encode(torch.tensor([0.5, 0.5, 0.5]))
    overflowed = torch.tensor([1.0, 7e4, 1.0]).half()         # fp16 overflow: 7e4 > 65504 becomes inf
    bad = FIXED.add(s, overflowed, 1.0)
    assert torch.isnan(FIXED.decode(bad, torch.float32)).tolist() == [False, True, False]
    # invalid + valid, invalid - invalid, invalid + invalid: plain int64 arithmetic would make the last two 0
    for out in (FIXED.add(bad, torch.ones(3), 1.0), FIXED.sub(bad, overflowed, 1.0), FIXED.add(bad, overflowed, 1.0),
                FIXED.sub_(bad.clone(), overflowed, 1.0)):
        assert torch.isnan(FIXED.decode(out, torch.float64)).tolist() == [False, True, False]


def test_fixed_sum_leaving_the_valid_range_becomes_invalid():
    s = FIXED.encode(torch.tensor([2.0 ** 29, 1.0]))
    out = FIXED.decode(FIXED.add(s, torch.tensor([2.0 ** 29, 1.0], dtype=torch.float64), 1.0), torch.float64)
    assert torch.isnan(out[0]) and out[1] == 2.0


@pytest.mark.parametrize("trunk", ["midpoint_rev", "reveuler_rev"])
def test_fp16_overflow_inside_a_fixed_stream_trunk_reaches_the_loss(trunk):
    """A block whose fp16 output overflows: the reversible trunk on the fixed stream must hand on NaN, so the
    loss is not finite and a GradScaler skips the step (a finite loss here would train on garbage)."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=64, seq_len=16, n_layer=2, n_head=2, d_model=32, trunk=trunk,
                          stream="fixed"))
    with torch.no_grad():
        model.trunk.blocks[0].mlp.proj.weight.mul_(1e7)       # its fp16 matmul overflows to inf
    idx = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(1))
    with torch.autocast("cpu", torch.float16):
        loss = model(idx, idx)
    assert not torch.isfinite(loss), f"the overflow turned finite: loss {loss.item()}"
    loss.backward()
    assert not all(torch.isfinite(p.grad).all() for p in model.parameters())


def test_float_streams_never_store_below_the_compute_dtype():
    fp32, fp64 = get_stream("fp32"), get_stream("fp64")
    assert fp32.at_least(torch.float64).dtype == torch.float64
    assert fp32.at_least(torch.float16).dtype == torch.float32 == fp32.at_least(torch.bfloat16).dtype
    assert fp64.at_least(torch.float32).dtype == torch.float64
    assert FIXED.at_least(torch.float64) is FIXED
    assert fp32.at_least(torch.float32) is fp32
