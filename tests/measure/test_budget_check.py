"""A memory budget against what the machine has, and the CPU running out of memory inside a probe.

* A budget above the free memory (`probe.available_bytes`: MemAvailable on a CPU, free device memory on CUDA)
  is refused before the first probe; a budget equal to it is searched.
* A probe whose real training step the CPU allocator cannot serve (the operating system refuses the memory) is a
  miss, as a CUDA out-of-memory is: the address space is capped for the step, so the refusal is real.
"""
from __future__ import annotations

import resource
import sys

import pytest
import torch

from rev.measure import maxbatch
from rev.measure.probe import step_peak
from rev.base.profiles import get_profile
from rev.measure import probe

MIB = 2**20
CFG = get_profile("smoke").model_config("residual")
CPU = torch.device("cpu")


def _no_probe(*args, **kwargs):
    raise AssertionError("a probe ran under a budget the machine does not have")


def test_a_budget_above_free_memory_is_refused_before_any_probe(monkeypatch):
    monkeypatch.setattr(probe, "available_bytes", lambda dev: 64 * MIB)
    monkeypatch.setattr(probe, "step_peak", _no_probe)
    with pytest.raises(ValueError, match=r"budget 65 MiB is more than this machine has free \(64 MiB of RAM\): "
                                         r"give --budget-mib 57 or less"):
        maxbatch.find_max_batch(CFG, 64 * MIB + MIB, device="cpu", progress=False)
    with pytest.raises(ValueError, match="more than this machine has free"):
        maxbatch.find_max_depth(CFG, batch=2, budget_bytes=64 * MIB + 1, max_layers=8, device="cpu", progress=False)
    # all of what is free is a budget: searched (each probe a stand-in of 1 MiB per sequence; no collection after
    # each, which a real probe needs and a stand-in does not)
    monkeypatch.setattr(probe, "step_peak", lambda cfg, batch, device, dtype: batch * MIB)
    monkeypatch.setattr(probe.gc, "collect", lambda *a: 0)
    assert maxbatch.find_max_batch(CFG, 64 * MIB, device="cpu", limit=128, progress=False).batch == 64


def test_the_cpu_figure_is_what_the_operating_system_calls_available():
    psutil = pytest.importorskip("psutil")
    here = probe.available_bytes(CPU)
    # MemAvailable, not MemFree (which leaves out the page cache the kernel gives back): within what the machine's
    # other work moves in between the two readings
    assert here == pytest.approx(psutil.virtual_memory().available, abs=128 * MIB)


def test_the_cuda_figure_is_free_device_memory_with_the_unused_cache(fake_cuda):
    dev = torch.device("cuda")
    fake_cuda.other_processes_bytes = 3 * 2**30
    assert probe.available_bytes(dev) == probe.cuda_budget(dev, 1.0)
    with pytest.raises(ValueError, match=r"more than this machine has free \(.* MiB of memory on Tesla"):
        probe.check_budget(fake_cuda.total_bytes - fake_cuda.other_processes_bytes + 1, dev)


def _address_space() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="caps the address space through Linux's RLIMIT_AS")
def test_a_real_step_the_cpu_allocator_cannot_serve_is_a_miss():
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    # 256 MiB above what the process maps now: batch 8 (about 7 MiB) fits, batch 2048 (about 1 GiB) cannot
    resource.setrlimit(resource.RLIMIT_AS, (_address_space() + 256 * MIB, hard))
    try:
        big = probe.measure_probe(lambda: step_peak(CFG, 2048, CPU, None), 2**40, CPU)
        small = probe.measure_probe(lambda: step_peak(CFG, 8, CPU, None), 2**40, CPU)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    assert big == (None, False), "the refused allocation was not read as a miss"
    assert small[1] and small[0] > 0, "after the miss the next probe measures as before"


def test_the_search_goes_on_past_a_cpu_allocation_failure(monkeypatch):
    """The CPU allocator's message, raised where a probe's step is measured: a miss like CUDA's, and the largest
    batch that fits is still found."""
    monkeypatch.setattr(probe, "available_bytes", lambda dev: 2**40)
    monkeypatch.setattr(probe.gc, "collect", lambda *a: 0)

    def step(cfg, batch, device, dtype):
        if batch > 5:
            raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate "
                               f"memory: you tried to allocate {batch * 2**30} bytes. Error code 12 (Cannot allocate "
                               "memory)")
        return batch * MIB

    monkeypatch.setattr(probe, "step_peak", step)
    res = maxbatch.find_max_batch(CFG, 10**6 * MIB, device="cpu", limit=64, progress=False)
    assert res.batch == 5 and any(p.peak_bytes is None for p in res.probes)
