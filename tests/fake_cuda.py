"""A CUDA double for the suite: `torch.cuda`'s device queries and caching-allocator counters, patched so that the
code paths `rev` takes only on CUDA (relative peaks, the max-batch budget, out-of-memory handling, one process per
GPU) run on a CPU, with real tensors.

Tensors stay on the CPU; the counters follow PyTorch's CPU allocator. `memory_allocated()` is that allocator's
running total of live tensor bytes (read from the profiler's allocation events, the source `rev.measure.memory`
uses on CPU), `max_memory_allocated()` the highest it reached since `reset_peak_memory_stats()`. Like CUDA's, both
are process-wide: a model the test keeps alive counts in them, as an earlier model does on a GPU.
`memory_reserved()` adds `cached_bytes`, blocks the caching allocator keeps without using them (`empty_cache()`
hands them back); `mem_get_info()` answers (total - reserved - other processes' memory, total).

Use the `fake_cuda` fixture (tests/conftest.py); it installs a `FakeCuda` and undoes it after the test.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from rev.measure.memory import CpuAllocations

MIB = 2 ** 20


def cpu_allocated_now() -> int:
    """Live bytes the CPU allocator counts now (tensors allocated while a recording ran): the running total its
    next allocation reports, minus that allocation."""
    rec = CpuAllocations().start()
    probe = torch.empty(64, dtype=torch.uint8)
    del probe
    events = rec.stop()
    _, size, total = next(e for e in events if e[1] > 0)
    return total - size


class FakeCuda:
    """One or more fake GPUs; attribute values can be changed by a test at any time. From `install` to `close` a
    recording of the CPU allocator runs, so every tensor the test allocates counts."""

    def __init__(self, total_bytes: int = 16 * 2**30, device_count: int = 1, capability: tuple[int, int] = (7, 5),
                 name: str = "Tesla T4", other_processes_bytes: int = 0, cached_bytes: int = 0):
        self.total_bytes = total_bytes
        self.count = device_count
        self.capability = capability
        self.name = name
        self.other_processes_bytes = other_processes_bytes   # what other processes' contexts and tensors hold
        self.cached_bytes = cached_bytes
        self.empty_cache_calls = 0
        self.set_device_calls: list = []
        self.memory_fraction: float | None = None
        self._rec: CpuAllocations | None = None
        self._since = 0            # events before this index came before the last reset_peak_memory_stats
        self._peak = 0

    # --- the allocator's counters ------------------------------------------------------------------------------
    def memory_allocated(self, device=None) -> int:
        return cpu_allocated_now()

    def max_memory_allocated(self, device=None) -> int:
        if torch._C._current_graph_task_id() != -1:
            # inside backward the profiler cannot be stopped to read its events (it crashes later, at garbage
            # collection): answer the peak as of the last read, a lower bound (rev.measure.memory reads the
            # counter there for the forward phase's peak; no test here checks that figure on the fake)
            return self._peak
        now = cpu_allocated_now()
        seen = [total for _, _, total in self._rec.flush()[self._since:]]
        return max([self._peak, now] + seen)

    def reset_peak_memory_stats(self, device=None) -> None:
        self._peak = cpu_allocated_now()
        self._since = len(self._rec.flush())

    def memory_reserved(self, device=None) -> int:
        return self.memory_allocated() + self.cached_bytes

    def mem_get_info(self, device=None) -> tuple[int, int]:
        return self.total_bytes - self.memory_reserved() - self.other_processes_bytes, self.total_bytes

    def empty_cache(self) -> None:
        self.empty_cache_calls += 1
        self.cached_bytes = 0

    def close(self) -> None:
        if self._rec is not None:
            self._rec.stop()
            self._rec = None

    # --- devices ---------------------------------------------------------------------------------------------
    def _index(self, device) -> int:
        index = device if isinstance(device, int) else 0 if device is None else torch.device(device).index or 0
        if index >= self.count:
            raise RuntimeError(f"CUDA error: invalid device ordinal (device {index} of {self.count})")
        return index

    def set_device(self, device) -> None:
        self.set_device_calls.append(self._index(device))

    def get_device_capability(self, device=None) -> tuple[int, int]:
        self._index(device)
        return self.capability

    def get_device_name(self, device=None) -> str:
        self._index(device)
        return self.name

    def get_device_properties(self, device=None) -> SimpleNamespace:
        self._index(device)
        return SimpleNamespace(name=self.name, total_memory=self.total_bytes, major=self.capability[0],
                               minor=self.capability[1])

    def set_per_process_memory_fraction(self, fraction: float, device=None) -> None:
        # as torch does: a device without an index is refused (the H200 run of gpucheck met this)
        if isinstance(device, (str, torch.device)) and torch.device(device).index is None:
            raise ValueError(f"Expected a torch.device with a specified index or an integer, but got:{device}")
        self._index(device)
        self.memory_fraction = fraction

    def install(self, monkeypatch: pytest.MonkeyPatch) -> "FakeCuda":
        patches = {
            "is_available": lambda: True, "device_count": lambda: self.count,
            "is_bf16_supported": lambda *a, **k: self.capability[0] >= 8,
            "synchronize": lambda device=None: None, "current_device": lambda: 0,
            "memory_allocated": self.memory_allocated, "max_memory_allocated": self.max_memory_allocated,
            "reset_peak_memory_stats": self.reset_peak_memory_stats, "memory_reserved": self.memory_reserved,
            "mem_get_info": self.mem_get_info, "empty_cache": self.empty_cache, "set_device": self.set_device,
            "get_device_capability": self.get_device_capability, "get_device_name": self.get_device_name,
            "get_device_properties": self.get_device_properties,
            "set_per_process_memory_fraction": self.set_per_process_memory_fraction,
        }
        for name, fn in patches.items():
            monkeypatch.setattr(torch.cuda, name, fn)
        self._rec = CpuAllocations().start()
        return self
