"""Position-chunked MLP: evaluating and backpropagating the position-wise block component over chunks
of positions changes the memory, not the gradients."""
import pytest
import torch
import torch.nn.functional as F
from model_grads import loss_and_grads, worst_relative

from rev import GPT, GPTConfig, reconstruction_error
from rev.core.model import auto_pos_chunk
from rev.core.pieces import position_chunks
from rev.core.reversible import LayerTape
from rev.measure.maxbatch import measure_memory_line

V, T = 64, 16


def _model(trunk: str, pos_chunk, stream: str = "fp64", dtype=torch.float64, n_layer: int = 3, d: int = 32,
           split_heads: bool = False) -> GPT:
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=V, seq_len=T, n_layer=n_layer, n_head=2, d_model=d, trunk=trunk, h=0.5,
                    stream=stream, pos_chunk=pos_chunk, split_heads=split_heads)
    return GPT(cfg).to(dtype)


def _grads(model: GPT, autocast: bool = False) -> tuple[float, dict[str, torch.Tensor]]:
    return loss_and_grads(model, 3, autocast)


_worst_relative = worst_relative


@pytest.mark.parametrize("trunk", ["reveuler_rev", "residual_ckpt"])
@pytest.mark.parametrize("chunk", [1, 4, 5, 7])  # 4 divides T=16, the others leave a short last chunk
def test_chunked_gradients_equal_unchunked_float64(trunk, chunk):
    (l0, g0), (lc, gc) = _grads(_model(trunk, 0)), _grads(_model(trunk, chunk))
    assert abs(l0 - lc) <= 1e-12 * abs(l0)
    assert _worst_relative(gc, g0) <= 1e-12


@pytest.mark.parametrize("chunk", [0, 5])
def test_head_split_gradients_equal_whole_attention_float64(chunk):
    (l0, g0), (lc, gc) = _grads(_model("reveuler_rev", 0)), _grads(_model("reveuler_rev", chunk, split_heads=True))
    assert abs(l0 - lc) <= 1e-12 * abs(l0)
    assert _worst_relative(gc, g0) <= 1e-12


@pytest.mark.parametrize("trunk", ["reveuler_rev", "residual_ckpt"])
def test_chunked_gradients_fp32_and_bf16_autocast(trunk):
    whole, chunked = (_model(trunk, c, "fp32", torch.float32, 4, 64, split_heads=c > 0) for c in (0, 5))
    assert _worst_relative(_grads(chunked)[1], _grads(whole)[1]) <= 1e-5
    gw, gc = _grads(whole, autocast=True)[1], _grads(chunked, autocast=True)[1]
    worst = min(F.cosine_similarity(gw[n].flatten(), gc[n].flatten(), dim=0).item() for n in gw)
    assert worst >= 0.999, f"lowest per-parameter gradient cosine {worst:.5f}"


def test_dropping_one_chunk_is_caught(monkeypatch):
    """The equality above has teeth: losing one chunk's parameter gradients (here the second chunk of every
    layer's MLP) gives gradients far outside its bound."""
    real = LayerTape._add_param_grads
    seen: dict[int, int] = {}

    def drop_second(self, got):
        seen[id(self)] = seen.get(id(self), 0) + 1
        if seen[id(self)] != 2:
            real(self, got)

    whole = _grads(_model("reveuler_rev", 0))[1]
    monkeypatch.setattr(LayerTape, "_add_param_grads", drop_second)
    assert _worst_relative(_grads(_model("reveuler_rev", 5))[1], whole) > 1e-3


def test_chunked_inverse_stays_bit_exact_on_fixed_stream():
    """Forward and inverse chunk the MLP the same way, so the fixed stream still comes back bit for bit."""
    idx = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(3))
    assert reconstruction_error(_model("reveuler_rev", 5, "fixed", torch.float32, split_heads=True), idx) == 0.0


def test_chunks_cover_each_position_once():
    block = _model("reveuler_rev", 5).trunk.blocks[0]
    s = torch.zeros(2, T, 32)
    covered = torch.zeros(T, dtype=torch.long)
    for ix in position_chunks(block, "G", s):
        covered[ix[1]] += 1
    assert covered.eq(1).all()
    assert position_chunks(block, "F", s) == [(...,)]            # attention is not position-wise
    block.pos_chunk = T
    assert position_chunks(block, "G", s) == [(...,)]            # one chunk: evaluated whole


def test_auto_chunk_rule_and_config():
    assert auto_pos_chunk(512) == 128 and auto_pos_chunk(256) == 64 and auto_pos_chunk(64) == 0
    whole = dict(batch_slice=0)  # the rule above is for the whole batch at once
    assert GPTConfig(**whole).positions_per_chunk == 128
    assert GPTConfig(split_heads=True, **whole).positions_per_chunk == 64
    # with batch slices (the default) a slice bounds the MLP already: chunks only beyond a slice's rows
    assert GPTConfig().positions_per_chunk == 0 and GPTConfig(seq_len=4096).positions_per_chunk == 1024
    assert auto_pos_chunk(4096, split_heads=True) == 256
    assert GPTConfig(pos_chunk=None).positions_per_chunk == 0 == GPTConfig(pos_chunk=0).positions_per_chunk
    assert GPT(GPTConfig(trunk="residual", n_layer=1)).trunk.blocks[0].pos_chunk == 0  # the baseline stays
    with pytest.raises(ValueError, match="pos_chunk"):
        GPTConfig(pos_chunk=-1)


def _bytes_per_sequence(trunk: str, pos_chunk: int, split_heads: bool = False, b1: int = 4, b2: int = 8) -> float:
    """Slope of the training step's measured peak between two batches (activations dominate at both), with the
    whole batch in one slice: the chunks' own effect (tests/core/test_slices.py has the slices')."""
    cfg = GPTConfig(vocab_size=64, seq_len=256, n_layer=2, n_head=2, d_model=64, trunk=trunk, pos_chunk=pos_chunk,
                    split_heads=split_heads, batch_slice=0)
    return measure_memory_line(cfg, b1, b2, device="cpu").bytes_per_sequence


@pytest.mark.parametrize("trunk, split_heads", [("reveuler_rev", True), ("residual_ckpt", False)])
def test_memory_per_sequence_falls_with_chunk(trunk, split_heads):
    whole, coarse, fine = (_bytes_per_sequence(trunk, c, split_heads and c > 0) for c in (0, 128, 32))
    assert fine < coarse < whole, (whole, coarse, fine)


def test_mlp_chunks_alone_lower_memory_per_sequence():
    """Without the head split the whole attention sets the peak, so the chunk size stops mattering; chunking
    the MLP still takes it below the unchunked trunk's."""
    assert _bytes_per_sequence("reveuler_rev", 32) < _bytes_per_sequence("reveuler_rev", 0)
