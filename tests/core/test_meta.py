"""Device-agnostic code: every trunk, on every stream and in every memory layout, runs forward and backward on
the `meta` device (shapes and dtypes only, no data), the way a user sizes a model before allocating it. A device
type without autocast (meta) must not break the reversible backward's autocast replay. Meta tensors hold no
values, so any host sync on the way (`.item()`, `bool(tensor)`: the fixed stream's handling of invalid values
must not need one) would raise here too."""
import pytest
import torch

from rev import GPT, GPTConfig
from rev.core.model import TRUNKS
from rev.core.reversible import AutocastState, has_autocast
from rev.core.streams import STREAMS

V, T = 64, 16
LAYOUTS = {
    "plain": dict(pos_chunk=0),
    "keep": dict(pos_chunk=0, keep=(1,)),            # a kept state (only reversible trunks store them)
    "pos_chunk": dict(pos_chunk=5),                  # the MLP over chunks of 5 positions, a short last chunk
    "split_heads": dict(pos_chunk=5, split_heads=True),
}


def _layouts(trunk: str) -> list[str]:
    """The layouts that make a different model of `trunk`: a stored trunk ignores all three options, the
    checkpointed one uses only the position chunk (meta ops run through Python: each case costs ~0.2 s)."""
    backward = TRUNKS[trunk].backward
    return list(LAYOUTS) if backward == "reversible" else ["plain", "pos_chunk"] if backward == "checkpoint" \
        else ["plain"]


@pytest.mark.parametrize("trunk, stream, layout",
                         [(t, s, lay) for t in TRUNKS for s in STREAMS for lay in _layouts(t)])
def test_forward_and_backward_on_meta(trunk, stream, layout):
    with torch.device("meta"):
        model = GPT(GPTConfig(vocab_size=V, seq_len=T, n_layer=2, n_head=2, d_model=16, trunk=trunk,
                              stream=stream, **LAYOUTS[layout]))
    idx = torch.zeros(2, T, dtype=torch.long, device="meta")
    assert model(idx).shape == (2, T, V)
    loss = model(idx, idx)
    assert loss.device.type == "meta" and loss.shape == ()
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.device.type == "meta", name
        assert p.grad.shape == p.shape and p.grad.dtype == p.dtype, name


def test_autocast_state_on_a_device_type_without_autocast():
    assert has_autocast("cpu") and not has_autocast("meta")
    state = AutocastState.capture("meta")
    assert not state.enabled and not state.available
    with state.context():     # does nothing, and does not raise
        pass
