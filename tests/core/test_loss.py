"""The loss heads: the fused linear-cross-entropy equals plain cross-entropy (loss and gradients), and its
memory does not grow with the vocabulary-by-rows product beyond one chunk (measured)."""
import pytest
import torch
import torch.nn.functional as F

from rev import GPT, GPTConfig
from rev.core.loss import IGNORE_INDEX, LOSS_HEADS, cross_entropy
from rev.measure.memory import peak_memory

ROWS, D, VOCAB = 48, 16, 40
RTOL = {torch.float64: 1e-10, torch.float32: 1e-5}


def _problem(dtype, ignored: bool, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    h = torch.randn(2, ROWS // 2, D, generator=gen, dtype=dtype, requires_grad=True)
    w = torch.randn(VOCAB, D, generator=gen, dtype=dtype, requires_grad=True)
    t = torch.randint(0, VOCAB, (2, ROWS // 2), generator=gen)
    if ignored:
        t[:, ::3] = IGNORE_INDEX   # as the companion chapters mask a sequence's source half
    return h, w, t


def _loss_and_grads(head: str, h, w, t, chunk: int, scale: float = 2.5):
    """Loss and gradients of `scale * loss`: a scale other than 1 checks that backward uses grad_output."""
    loss = cross_entropy(h, w, t, head, chunk)
    gh, gw = torch.autograd.grad(scale * loss, (h, w))
    return loss, gh, gw


def _assert_rel(actual, expected, rtol, what):
    err = ((actual.double() - expected.double()).abs().max() / expected.double().abs().max()).item()
    assert err <= rtol, f"{what}: relative error {err:.2e} > {rtol:.0e}"


@pytest.mark.parametrize("head", ["fused", "chunked"])
@pytest.mark.parametrize("chunk", [8, 7, 1000])          # divides 48 rows, does not, one chunk for all
@pytest.mark.parametrize("ignored", [False, True])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_head_equals_plain_cross_entropy(head, chunk, ignored, dtype):
    h, w, t = _problem(dtype, ignored)
    ref = F.cross_entropy((h @ w.t()).reshape(-1, VOCAB), t.reshape(-1), ignore_index=-100)
    ref_gh, ref_gw = torch.autograd.grad(2.5 * ref, (h, w))
    loss, gh, gw = _loss_and_grads(head, h, w, t, chunk)
    assert loss.dtype == ref.dtype and gh.dtype == h.dtype and gw.dtype == w.dtype
    for a, b, what in ((loss, ref, "loss"), (gh, ref_gh, "grad h"), (gw, ref_gw, "grad weight")):
        _assert_rel(a, b, RTOL[dtype], f"{head} head, chunk {chunk}, {dtype}, {what}")


@pytest.mark.parametrize("head", ["fused", "chunked"])
@pytest.mark.parametrize("ignored", [False, True])
def test_head_under_bf16_autocast_equals_plain_head(head, ignored):
    h, w, t = _problem(torch.float32, ignored)
    with torch.autocast("cpu", torch.bfloat16):
        ref = _loss_and_grads("plain", h, w, t, 7)
        out = _loss_and_grads(head, h, w, t, 7)
    assert out[0].dtype == torch.float32, "the loss must come out of fp32 logits under autocast"
    _assert_rel(out[0], ref[0], 1e-5, "loss under bf16 autocast")   # same bf16 logits, fp32 softmax
    # gradients agree to bf16 precision: the fused head rounds d loss/d logits to bf16 before the incoming
    # gradient scales it (plain rounds after), and sums the weight's gradient over chunks in fp32
    _assert_rel(out[1], ref[1], 2 ** -6, "grad h under bf16 autocast")
    _assert_rel(out[2], ref[2], 2 ** -6, "grad weight under bf16 autocast")


def test_fused_head_is_the_default_and_gpt_heads_agree():
    assert GPTConfig().loss_head == "fused"
    small = dict(vocab_size=64, seq_len=16, n_layer=2, n_head=2, d_model=16, loss_chunk=10)
    idx = torch.randint(0, 64, (3, 17))
    grads = {}
    for head in LOSS_HEADS:
        torch.manual_seed(0)
        model = GPT(GPTConfig(**small, loss_head=head)).double()
        loss = model(idx[:, :-1], idx[:, 1:])
        loss.backward()
        grads[head] = (loss, *(p.grad for p in model.parameters()))
    for head in ("fused", "chunked"):
        for a, b in zip(grads[head], grads["plain"]):
            _assert_rel(a, b, 1e-10, f"GPT with the {head} head")


def test_fused_head_without_grad_and_its_single_backward():
    h, w, t = _problem(torch.float32, ignored=True)
    with torch.no_grad():
        _assert_rel(cross_entropy(h, w, t, "fused", 7), cross_entropy(h, w, t, "plain"), 1e-5, "no-grad loss")
    loss = cross_entropy(h, w, t, "fused", 7)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="chunked"):
        loss.backward()


def test_unknown_head_is_refused():
    with pytest.raises(ValueError, match="loss_head"):
        GPTConfig(loss_head="liger")


def _head_step_peak(head: str, rows: int, vocab: int, chunk: int, d: int = 16, amp: torch.dtype | None = None) -> int:
    """Bytes a loss head adds at its peak over forward + backward (inputs and weight counted as live), under
    autocast to `amp` if given."""
    gen = torch.Generator().manual_seed(0)
    h = torch.randn(rows, d, generator=gen, requires_grad=True)
    w = torch.randn(vocab, d, generator=gen, requires_grad=True)
    t = torch.randint(0, vocab, (rows,), generator=gen)

    def step():
        with torch.autocast("cpu", amp or torch.bfloat16, enabled=amp is not None):
            loss = cross_entropy(h, w, t, head, chunk)
        loss.backward()
        h.grad = w.grad = None
    return peak_memory(step, [h, w, t]).added_bytes


@pytest.mark.parametrize("amp", [None, torch.float16], ids=["fp32", "fp16-autocast"])
def test_fused_head_memory_does_not_grow_with_vocab_by_rows(amp):
    vocab, chunk = 4096, 64
    chunk_logits = chunk * vocab * 4
    small, large = (_head_step_peak("fused", rows, vocab, chunk, amp=amp) for rows in (256, 1024))
    plain_small, plain_large = (_head_step_peak("plain", rows, vocab, chunk, amp=amp) for rows in (256, 1024))
    logits_growth = (1024 - 256) * vocab * 4
    # the measure sees logits when they are there: the plain head grows by at least the added logits
    assert plain_large - plain_small >= logits_growth, (plain_small, plain_large)
    # the fused head grows only by its (rows x d) gradient: far less than one chunk of logits
    assert large - small < chunk_logits / 4, f"fused head grew {large - small} B from 256 to 1024 rows"
    assert large < 4 * chunk_logits, f"fused head peak {large} B exceeds a few chunks of logits ({chunk_logits} B)"


def _fp16_relative_errors(heads, rows: int = 2048, vocab: int = 2048, d: int = 64, ignored: bool = True):
    """Each head's relative gradient error (h and weight together) under fp16 autocast with a real
    GradScaler, against the plain head in fp32. At 2048 rows (d loss / d logits ~ 1 / (rows * vocab) ~ 2e-7,
    below fp16's smallest normal number) a head that rounds it to fp16 before the loss scale reaches it
    loses those bits."""
    gen = torch.Generator().manual_seed(0)
    h = torch.randn(rows, d, generator=gen).requires_grad_()
    w = (0.02 * torch.randn(vocab, d, generator=gen)).requires_grad_()   # GPT's initial embedding scale
    t = torch.randint(0, vocab, (rows,), generator=gen)
    if ignored:
        t[::5] = IGNORE_INDEX
    ref = torch.autograd.grad(cross_entropy(h, w, t, "plain"), (h, w))
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)
    opt = torch.optim.SGD([h, w], lr=0.0)
    out = {}
    for head in heads:
        with torch.autocast("cpu", torch.float16):
            loss = cross_entropy(h, w, t, head, 512)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)                  # divides the gradients by the scale, as training does
        num = sum(((p.grad.double() - r.double()) ** 2).sum() for p, r in zip((h, w), ref))
        out[head] = float((num / sum((r.double() ** 2).sum() for r in ref)).sqrt())
        opt.zero_grad(set_to_none=True)
        scaler.update()                       # a new step: unscale_ may run again
    return out


def test_fused_head_under_fp16_autocast_and_grad_scaler_is_as_accurate_as_plain():
    err = _fp16_relative_errors(("fused", "plain"))
    assert 0 < err["plain"] < 1e-3, err       # fp16 rounding is there, and small
    assert err["fused"] <= 2 * err["plain"], f"fused head under fp16: {err}"


def test_fused_head_in_a_half_model_is_as_accurate_as_plain():
    """Without autocast, a `.half()` head's matmuls run in fp16 too: the fused head keeps h's gradient in fp32
    until backward has scaled it, so each gradient is as close to the fp32 reference as the plain head's."""
    gen = torch.Generator().manual_seed(0)
    h = torch.randn(2048, 64, generator=gen).requires_grad_()
    w = (0.02 * torch.randn(2048, 64, generator=gen)).requires_grad_()
    t = torch.randint(0, 2048, (2048,), generator=gen)
    ref = torch.autograd.grad(cross_entropy(h, w, t, "plain"), (h, w))
    err = {}
    for head in ("fused", "plain"):
        h16, w16 = (x.detach().half().requires_grad_() for x in (h, w))
        got = torch.autograd.grad(2.0 ** 16 * cross_entropy(h16, w16, t, head, 512), (h16, w16))
        assert all(g.dtype == torch.float16 for g in got)
        err[head] = [((g.double() / 2 ** 16 - r.double()).norm() / r.double().norm()).item() for g, r in zip(got, ref)]
    for i, what in enumerate(("h", "weight")):
        assert err["fused"][i] <= 2 * err["plain"][i], f"grad {what} of a half model: {err}"


def test_fused_head_fp16_scaling_never_overflows_on_large_activations():
    """The powers of two that keep small gradient entries alive come from bounds on each product, so large
    hidden states and weights lower them instead of overflowing fp16 (65504) into inf, which a GradScaler
    would answer by skipping every step."""
    gen = torch.Generator().manual_seed(0)
    h = (40 * torch.randn(1024, 32, generator=gen)).requires_grad_()
    w = (4 * torch.randn(512, 32, generator=gen)).requires_grad_()
    t = torch.randint(0, 512, (1024,), generator=gen)
    ref = torch.autograd.grad(cross_entropy(h, w, t, "plain"), (h, w))
    err = {}
    for head in ("fused", "plain"):
        with torch.autocast("cpu", torch.float16):
            loss = cross_entropy(h, w, t, head, 1024)
        got = torch.autograd.grad(loss, (h, w))
        assert all(torch.isfinite(g).all() for g in got), f"the {head} head's gradient overflowed"
        err[head] = [((g.double() - r.double()).norm() / r.double().norm()).item() for g, r in zip(got, ref)]
    # fp16 logits of this size are coarse, so both heads are off by about 1e-2; the fused head no further
    assert all(f <= 1.5 * p for f, p in zip(err["fused"], err["plain"])), err
