"""A CUDA double for the suite: `torch.cuda`'s device queries and caching-allocator counters, patched so that the
code paths `rev` takes only on CUDA (relative peaks, the max-batch budget, out-of-memory handling, one process per
GPU, fp16 autocast with a GradScaler) run on a CPU, with real tensors and real autograd graphs.

Tensors asked for on "cuda" are made on the CPU: a torch-function mode rewrites the device of `.to(...)` and of
every `device=` argument, `torch.autocast("cuda", ...)` autocasts the CPU's kernels and `torch.amp.GradScaler("cuda")`
is the CPU's scaler. So `train(device="cuda")`, the max-batch search on "cuda" and bench take their CUDA branches
(allocator counters, the measured slice plan, the scaler) while every step is a real CPU step.

The counters follow PyTorch's CPU allocator. `memory_allocated()` is that allocator's running total of live tensor
bytes (read from the profiler's allocation events, the source `rev.measure.memory` uses on CPU),
`max_memory_allocated()` the highest it reached since `reset_peak_memory_stats()`. Like CUDA's, both are
process-wide: a model the test keeps alive counts in them, as an earlier model does on a GPU.
`memory_reserved()` adds `cached_bytes`, blocks the caching allocator keeps without using them (`empty_cache()`
hands them back); `mem_get_info()` answers (total - reserved - other processes' memory, total).

Running out of memory, as CUDA's allocator does: an `empty`/`zeros`/`ones` on "cuda" larger than what the
device has left raises `torch.OutOfMemoryError` before allocating, and under `set_per_process_memory_fraction`
every module made of modules (a block, its MLP, the model) checks after its forward the reserved bytes against the
cap and raises when they are over it. The profiler
cannot be read inside backward or inside a custom autograd Function's forward, so the cap is checked in forward,
outside them: a reversible trunk runs out at the first module after its trunk (the final norm), a recompute in
backward is not checked.

Use the `fake_cuda` fixture (tests/conftest.py); it installs a `FakeCuda` and undoes it after the test.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from torch.overrides import TorchFunctionMode

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


def _is_cuda(device) -> bool:
    """Whether a `device=` argument names a CUDA device (an int is a CUDA index, as torch reads it)."""
    if isinstance(device, int) and not isinstance(device, bool):
        return True
    return isinstance(device, (str, torch.device)) and torch.device(device).type == "cuda"


def _on_cpu(device):
    return torch.device("cpu") if _is_cuda(device) else device


FACTORIES = (torch.empty, torch.zeros, torch.ones)   # the factories that ask the fake device for room


def _requested_bytes(args, kwargs) -> int:
    """Bytes a factory call asks for: its size (one sequence or several ints) times its dtype's element size."""
    size = args[0] if args and isinstance(args[0], (tuple, list, torch.Size)) else args
    return math.prod(kwargs.get("size", size)) * (kwargs.get("dtype") or torch.get_default_dtype()).itemsize


class _OnTheCpu(TorchFunctionMode):
    """Tensors asked for on "cuda" are made on the CPU."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if "device" in kwargs:
            kwargs["device"] = _on_cpu(kwargs["device"])
        if func is torch.Tensor.to:
            args = tuple(_on_cpu(a) for a in args)
        elif func is torch.Tensor.cuda:
            return args[0]
        return func(*args, **kwargs)


def _factory(fake: "FakeCuda", real):
    """`torch.empty` (zeros, ones) that asks the fake device for room first when the tensor is for "cuda": patched
    in as well as the mode, which does not reach the hooks autograd runs in backward (where a test runs out)."""
    def make(*args, **kwargs):
        if _is_cuda(kwargs.get("device")):
            fake.check_room(_requested_bytes(args, kwargs))
            kwargs["device"] = torch.device("cpu")
        return real(*args, **kwargs)
    return make


class _CpuAutocast(torch.autocast):
    """`torch.autocast("cuda", ...)` on the fake: the CPU's autocast, whose kernels the CPU tensors run."""

    def __init__(self, device_type: str, *args, **kwargs):
        super().__init__("cpu" if device_type == "cuda" else device_type, *args, **kwargs)


class _CpuGradScaler(torch.amp.GradScaler):
    """`torch.amp.GradScaler("cuda")` on the fake: the CPU's scaler (same rule: skip on inf, halve, grow)."""

    def __init__(self, device: str = "cuda", *args, **kwargs):
        super().__init__("cpu" if device == "cuda" else device, *args, **kwargs)


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
        self.ooms = 0                # out-of-memory errors raised (by a factory or the cap)
        self._rec: CpuAllocations | None = None
        self._mode: _OnTheCpu | None = None
        self._cap_hook = None
        self._in_function = 0        # custom autograd Functions whose forward is running now
        self._since = 0            # events before this index came before the last reset_peak_memory_stats
        self._peak = 0

    # --- the allocator's counters ------------------------------------------------------------------------------
    def memory_allocated(self, device=None) -> int:
        return cpu_allocated_now()

    def max_memory_allocated(self, device=None) -> int:
        if not self._readable():
            # the profiler cannot be stopped to read its events here (`_readable`): answer the peak as of the last
            # read, a lower bound (rev.measure.memory reads the counter inside backward for the forward phase's
            # peak; no test here checks that figure on the fake)
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
        if self._cap_hook is not None:
            self._cap_hook.remove()
            self._cap_hook = None
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None
        if self._rec is not None:
            self._rec.stop()
            self._rec = None

    # --- running out of memory -----------------------------------------------------------------------------------
    def limit_bytes(self) -> int:
        """What this process may reserve: the device less other processes' memory, and under the cap."""
        room = self.total_bytes - self.other_processes_bytes
        return min(room, int(self.memory_fraction * self.total_bytes)) if self.memory_fraction else room

    def _readable(self) -> bool:
        """Whether the profiler may be read now: not inside backward, nor inside a custom autograd Function's
        forward (a reversible trunk's), where autograd's own record of the call is open and stopping the profiler
        crashes it later, at garbage collection."""
        return torch._C._current_graph_task_id() == -1 and not self._in_function

    def _out_of_memory(self, wanted: int) -> None:
        self.ooms += 1
        held = f", {self.memory_allocated() / MIB:.2f} MiB allocated" if self._readable() else ""
        raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {wanted / MIB:.2f} MiB (fake GPU 0; "
                                     f"{self.total_bytes / MIB:.0f} MiB total{held}, limit "
                                     f"{self.limit_bytes() / MIB:.2f} MiB)")

    def check_room(self, wanted: int) -> None:
        """Raise CUDA's out-of-memory error when `wanted` more bytes do not fit. Where the allocator's count cannot be
        read, only when `wanted` alone is the whole limit or more (a device's whole memory never fits: CUDA's own
        context holds some of it)."""
        if wanted >= self.limit_bytes() or (self._readable() and self.memory_reserved() + wanted > self.limit_bytes()):
            self._out_of_memory(wanted)

    def _check_cap(self, module, args, output) -> None:
        """After the forward of each module that has modules inside it (a block, an attention, an MLP, the trunk,
        the model; not every linear layer, since each reading stops and restarts the profiler), under a cap: over it
        is out of memory (where it can be read: see `_readable`)."""
        if self.memory_fraction and self.memory_fraction < 1.0 and next(module.children(), None) is not None \
                and self._readable() and self.memory_reserved() > self.limit_bytes():
            self._out_of_memory(0)

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

    def get_per_process_memory_fraction(self, device=None) -> float:
        self._index(device)
        return 1.0 if self.memory_fraction is None else self.memory_fraction

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
            "get_per_process_memory_fraction": self.get_per_process_memory_fraction,
        }
        for name, fn in patches.items():
            monkeypatch.setattr(torch.cuda, name, fn)
        monkeypatch.setattr(torch, "autocast", _CpuAutocast)
        monkeypatch.setattr(torch.amp, "GradScaler", _CpuGradScaler)
        self._rec = CpuAllocations().start()
        for real in FACTORIES:
            monkeypatch.setattr(torch, real.__name__, _factory(self, real))
        self._mode = _OnTheCpu()
        self._mode.__enter__()
        self._cap_hook = torch.nn.modules.module.register_module_forward_hook(self._check_cap)
        monkeypatch.setattr(torch.autograd.Function, "apply", classmethod(self._counted(torch.autograd.Function)))
        return self

    def _counted(self, function_class):
        """`Function.apply` that counts the forwards running now (see `_check_cap`)."""
        real = function_class.__dict__["apply"].__func__

        def apply(cls, *args, **kwargs):
            self._in_function += 1
            try:
                return real(cls, *args, **kwargs)
            finally:
                self._in_function -= 1
        return apply
