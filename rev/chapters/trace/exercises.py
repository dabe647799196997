"""Notebook 10 (fine-tune trace and rollback): the checks of its exercises (conventions: `rev.chapters.shared.exercises`).

Each `check_*` takes the learner's function, runs it on a small case it builds itself (well under a second on a
CPU), and raises `AssertionError` with a message that says what is wrong and what to try; on success it returns
one line saying what was verified. A `NotImplementedError` from the student edition's stub passes through.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable

import torch
from torch import Tensor, nn

from ...core.optim import BETAS, adamw
from .records import weights_hash
from .recorder import TraceRecorder
from .tracefile import load_trace, save_trace

LR, WEIGHT_DECAY, EPS, STEPS = 1e-2, 0.1, 1e-8, 3


def _adamw_run(dtype: torch.dtype, seed: int = 0) -> tuple[list[tuple[Tensor, Tensor, Tensor]], list[Tensor],
                                                               torch.optim.Optimizer, nn.Parameter]:
    """STEPS AdamW steps on one vector with random gradients: the states (theta, m, v) before each step and
    after the last, the gradients, the optimizer and the parameter."""
    g = torch.Generator().manual_seed(seed)
    p = nn.Parameter(torch.randn(256, generator=g, dtype=torch.float64).to(dtype))
    opt = adamw([p], LR, WEIGHT_DECAY, decay_matrices_only=False)

    def state() -> tuple[Tensor, Tensor, Tensor]:
        st = opt.state[p]
        if not st:
            return p.detach().clone(), torch.zeros_like(p), torch.zeros_like(p)
        return p.detach().clone(), st["exp_avg"].clone(), st["exp_avg_sq"].clone()

    states, grads = [state()], []
    for _ in range(STEPS):
        grads.append(torch.randn(256, generator=g, dtype=torch.float64).to(dtype))
        p.grad = grads[-1].clone()
        opt.step()
        states.append(state())
    return states, grads, opt, p


def check_adamw_undo(undo: Callable[..., tuple[Tensor, Tensor, Tensor]]) -> str:
    """`undo(theta, m, v, grad, step, lr, weight_decay, betas, eps) -> (theta, m, v)` must invert one AdamW
    step (torch's algorithm, `step` counted from 1 as in the optimizer's state) to float64 round-off."""
    states, grads, _, _ = _adamw_run(torch.float64)
    theta, m, v = states[-1]
    for step in range(STEPS, 0, -1):
        out = undo(theta.clone(), m.clone(), v.clone(), grads[step - 1].clone(), step, LR, WEIGHT_DECAY, BETAS, EPS)
        assert isinstance(out, tuple) and len(out) == 3, "return the tuple (theta, m, v)"
        for name, got, want in zip(("theta", "m", "v"), out, states[step - 1]):
            err = float((got - want).abs().max())
            assert torch.allclose(got, want, rtol=1e-9, atol=1e-12), (
                f"undoing step {step}, {name} is off by up to {err:.3g}")
        theta, m, v = out
    # the same algebra in float32, where it rounds: how far from the start does it land?
    states32, grads32, _, _ = _adamw_run(torch.float32)
    theta, m, v = states32[-1]
    for step in range(STEPS, 0, -1):
        theta, m, v = undo(theta, m, v, grads32[step - 1], step, LR, WEIGHT_DECAY, BETAS, EPS)
    off = int((theta != states32[0][0]).sum())
    # how many depends on the CPU (whether its kernels fuse a multiply-add), so the message says whether, not how many
    return f"undid {STEPS} AdamW steps in float64; in float32 {'bit for bit' if off == 0 else 'not bit for bit'}"


def _small_trace_file(folder: Path) -> Path:
    """A 3-step trace of a tiny model, saved: the file the corruption exercise damages."""
    torch.manual_seed(0)
    model = nn.Linear(8, 4)
    opt = adamw(model, LR, 0.0)
    rec = TraceRecorder(model, opt)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(16, 8)).pow(2).mean().backward()
        opt.step()
    path = folder / "small.revtrace"
    save_trace(rec.close(), path)
    assert load_trace(path).hash_at(3) == weights_hash(model)
    return path


def check_corruption_refused(flip: Callable[[Path, int], None]) -> str:
    """`flip(path, offset)` must change the byte at `offset` of the file in place and nothing else; then the
    trace must no longer load. Says which of `load_trace`'s checks refused it at a few offsets."""
    refused_by = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = _small_trace_file(Path(tmp))
        original = path.read_bytes()
        n = len(original)
        # named by place, not by offset: the payload is compressed, so the file's length differs between machines
        places = {0: "the first byte", n // 3: "a third in", n // 2: "half way", n - 1: "the last byte"}
        for offset in places:       # the marker, the ledger, the payload, the checksum
            path.write_bytes(original)
            flip(path, offset)
            data = path.read_bytes()
            assert len(data) == n, f"flip changed the file's length ({n} to {len(data)} bytes)"
            changed = [i for i in range(n) if data[i] != original[i]]
            assert changed == [offset], f"change exactly the byte at {offset}, not {changed[:5]}"
            try:
                load_trace(path)
            except ValueError as e:
                refused_by[offset] = "marker" if "marker" in str(e) else "checksum" if "checksum" in str(e) else str(e)
            else:
                raise AssertionError(f"the trace loaded with byte {offset} changed: no check refused it")
    where = ", ".join(f"{places[k]}: {v}" for k, v in refused_by.items())
    return f"one flipped byte is refused everywhere ({where})"
