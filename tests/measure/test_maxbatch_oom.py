"""The max-batch search when a probe runs out of memory: `torch.OutOfMemoryError` from a probe is a miss (no peak),
the search goes on, and it still returns the largest batch (or depth) that fits. The step measurement is replaced
by one that raises as CUDA's allocator does, so this runs on any machine; the RuntimeError forms CUDA also uses are
in test_cuda_memory.py."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from rev.measure import maxbatch, probe
from rev.base.profiles import get_profile

MIB = 2**20
CFG = get_profile("smoke").model_config("residual")


def _step_peak(oom_above: int, error: Exception, size=lambda cfg, batch: batch):
    """A stand-in for `step_peak`: size(cfg, batch) MiB, or out of memory beyond `oom_above`."""
    def step_peak(cfg, batch, device, dtype) -> int:
        if size(cfg, batch) > oom_above:
            raise type(error)(*error.args)
        return size(cfg, batch) * MIB
    return step_peak


@pytest.fixture(autouse=True)
def plenty_free(monkeypatch):
    """A machine with more free than any budget here: these searches are about a probe running out all the same
    (the budget check against free memory is test_budget_check.py's)."""
    monkeypatch.setattr(probe, "available_bytes", lambda dev: 2**62)


@pytest.fixture(autouse=True)
def no_full_collection(monkeypatch):
    """Each probe runs a full garbage collection to free a failed step (test_cuda_memory.py checks that it does);
    here only the search is under test, and a collection per probe costs 0.2 s with the suite's imports."""
    monkeypatch.setattr(probe.gc, "collect", lambda *args: 0)


ERRORS = [torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 14.75 GiB total)"),
          torch.OutOfMemoryError()]   # the type alone says it, whatever the message


@pytest.mark.parametrize("error", ERRORS, ids=["cuda message", "no message"])
@pytest.mark.parametrize("oom_above,budget_mib,expected", [(5, 10**6, 5),     # memory runs out first
                                                           (24, 20, 20),      # the budget binds first
                                                           (1, 10**6, 1)])    # only batch 1 runs
def test_out_of_memory_is_a_miss_and_the_search_finds_the_largest_fit(oom_above, budget_mib, expected, error,
                                                                       monkeypatch):
    monkeypatch.setattr(probe, "step_peak", _step_peak(oom_above, error))
    res = maxbatch.find_max_batch(CFG, budget_mib * MIB, device="cpu", limit=64, progress=False)
    assert res.batch == expected
    ran_out = [p for p in res.probes if p.batch > oom_above]
    assert ran_out and all(p.peak_bytes is None and not p.fits for p in ran_out)
    assert all(p.fits == (p.batch <= expected) for p in res.probes)
    assert res.memory_line() is None or res.memory_line().bytes_per_sequence == pytest.approx(MIB)


def test_not_even_batch_one_says_so(monkeypatch):
    monkeypatch.setattr(probe, "step_peak", _step_peak(0, ERRORS[0]))
    with pytest.raises(ValueError, match="not even batch 1 fits"):
        maxbatch.find_max_batch(CFG, 10**6 * MIB, device="cpu", limit=64, progress=False)


def test_the_depth_search_treats_it_the_same(monkeypatch):
    monkeypatch.setattr(probe, "step_peak", _step_peak(3, ERRORS[0], size=lambda cfg, batch: cfg.n_layer))
    res = maxbatch.find_max_depth(dataclasses.replace(CFG, n_layer=1), batch=2,
                                  budget_bytes=10**6 * MIB, max_layers=16, device="cpu", progress=False)
    assert res.n_layer == 3
    assert all(p.fits == (p.n_layer <= 3) and (p.peak_bytes is None) == (p.n_layer > 3) for p in res.probes)
