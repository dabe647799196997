"""No probe leaks: a training step that raises inside the memory measurement, and a max-batch probe that runs out
of memory part-way through forward or backward, leave none of their activations alive, for every trunk family
(stored, checkpointed, both reversible). Checked with weakrefs on every module's output and with the CUDA double's
allocated bytes (tests/fake_cuda.py), through the very function the max-batch search calls for each probe
(`probe.measure_config`, by `gpucheck.failing_probe`, the GPU row's own probe), and after a whole search whose
probes ran out of memory. The gradients measured through the measurement's hooks are bit-identical to a plain step's."""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import weakref

import pytest
import torch

from rev.measure import maxbatch
from rev.training.gpucheck import LEAK_TRUNKS, failing_probe
from rev.measure.memory import saved_tensors_seen, training_step_memory
from rev.base.profiles import get_profile
from rev.measure import probe

pytestmark = pytest.mark.cuda  # the CUDA path (or its double): in the GPU selection
FAMILIES = LEAK_TRUNKS     # stored, checkpointed, both reversible
SLACK = 64 * 1024          # the profiler's own small allocations around a measurement


def small(trunk: str) -> "maxbatch.GPTConfig":
    """The smoke geometry with three layers, so there is a middle block."""
    return dataclasses.replace(get_profile("smoke").model_config(trunk), n_layer=3)


def _run_out(*args) -> None:
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (raised by the test)")


class Watch:
    """Weakrefs to every module output of a model, and an out-of-memory error raised from the middle block's MLP: in
    its forward, or as its backward begins (for a reversible trunk, in the recompute)."""

    def __init__(self, where: str):
        self.where, self.outputs, self.raised = where, [], 0

    def attach(self, model: torch.nn.Module) -> None:
        for m in model.modules():
            m.register_forward_hook(self._keep)
        mlp = model.trunk.blocks[len(model.trunk.blocks) // 2].mlp
        if self.where == "forward":
            mlp.register_forward_hook(self._raise)
        else:
            mlp.register_full_backward_pre_hook(self._raise)

    def _keep(self, module, args, out) -> None:
        for t in (out if isinstance(out, tuple) else (out,)):
            if isinstance(t, torch.Tensor):
                self.outputs.append(weakref.ref(t))

    def _raise(self, *args) -> None:
        self.raised += 1
        _run_out()

    def alive(self) -> list[tuple]:
        gc.collect()
        return [tuple(t.shape) for t in (r() for r in self.outputs) if t is not None]


def _raises_oom(fn) -> bool:
    """Call `fn`; True when it ran out of memory. The error (and its traceback's frames) is gone on return."""
    try:
        fn()
    except torch.OutOfMemoryError:
        return True
    return False


@pytest.mark.parametrize("where", ["forward", "backward"])
@pytest.mark.parametrize("trunk", ["residual", "midpoint_rev"])
def test_a_step_that_raises_inside_the_measurement_leaves_nothing_alive(trunk, where):
    watch = Watch(where)
    model, opt, step = probe.make_training_step(small(trunk), 4, torch.device("cpu"), None)
    watch.attach(model)
    assert _raises_oom(lambda: training_step_memory(model, opt, step, "cpu"))
    assert watch.raised == 1 and watch.outputs
    assert watch.alive() == [], "the failed step's activations are still alive"


@pytest.mark.parametrize("where", ["forward", "backward"])
@pytest.mark.parametrize("trunk", FAMILIES)
def test_a_probe_that_runs_out_of_memory_frees_all_its_activations(trunk, where, fake_cuda, quick_collections):
    """The search's own probe (`probe.measure_config`) runs out of memory at the middle layer's MLP in forward, or as
    the first MLP's backward begins: an allocation larger than the double's device, as gpucheck's row makes it."""
    got = failing_probe(small(trunk), 4, torch.device("cuda"), torch.float16, where)
    assert got["missed"] and fake_cuda.ooms == 1, "the probe never ran out of memory"
    assert got["outputs"] and got["alive"] == 0, f"{got['alive']} of the failed probe's activations are still alive"
    assert got["left"] <= SLACK, f"{got['left'] / 2**20:.2f} MiB left allocated"


def test_after_a_search_whose_probes_ran_out_the_allocator_is_back_at_its_start(fake_cuda, quick_collections):
    """The allocator capped a little above what is allocated now and the byte budget far above it: only running out
    of memory (the double's cap, checked after each module's forward) stops the doubling."""
    gc.collect()
    before = torch.cuda.memory_allocated()
    torch.cuda.set_per_process_memory_fraction((before + 8 * 2**20) / fake_cuda.total_bytes, 0)
    res = maxbatch.find_max_batch(small("residual"), 2**30, "cuda", precision="fp16", limit=64, progress=False,
                                  check_free=False)
    torch.cuda.set_per_process_memory_fraction(1.0, 0)
    assert fake_cuda.ooms >= 1 and any(p.peak_bytes is None for p in res.probes) and res.batch >= 1
    gc.collect()
    assert torch.cuda.memory_allocated() - before <= SLACK, \
        f"{(torch.cuda.memory_allocated() - before) / 2**20:.2f} MiB left allocated after the search"


@pytest.mark.parametrize("dtype", [None, torch.float16], ids=["fp32", "fp16 autocast"])
@pytest.mark.parametrize("trunk", FAMILIES)
def test_gradients_measured_through_the_hooks_are_bit_identical(trunk, dtype):
    """What the measurement stores for backward (the detached tensor) gives the very gradients of a plain step."""
    def grads(hooks) -> list[torch.Tensor]:
        model, _, step = probe.make_training_step(small(trunk), 4, torch.device("cpu"), dtype)
        with hooks:
            step.forward_backward()
        return [p.grad for p in model.parameters()]

    plain, seen = grads(contextlib.nullcontext()), grads(saved_tensors_seen())
    assert all(torch.equal(a, b) for a, b in zip(plain, seen))
