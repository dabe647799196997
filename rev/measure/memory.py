"""Peak memory of a callable (e.g. one training step), measured, not estimated.

Both devices report the same kind of figure: the bytes of `live` (parameters, gradients, optimizer state: what
the call starts from) plus the most the call adds on top of what was allocated when it started. Tensors the
process holds elsewhere (an earlier model and its AdamW state, kept by a notebook or by bench) count in neither.

* CUDA: the caching allocator's own counters, `max_memory_allocated` after `reset_peak_memory_stats` minus
  `memory_allocated` at the start (both are process-wide, so only their difference belongs to the call).
* CPU: PyTorch's CPU allocator reports every allocation and free to the profiler together with its running
  total of allocated bytes; the peak of that running total over the call, above its value at the start, is
  what the call adds. This counts every tensor the call allocates -- activations saved for backward,
  temporaries, gradients -- and nothing that is not a tensor.
* CPU, independent check: the process's peak resident set size (Linux `VmHWM`, reset through
  `/proc/self/clear_refs`). It sees the operating system's view, so it agrees with the allocator count up to
  allocator slack; tests use it to validate the first method on large allocations.
"""
from __future__ import annotations

import contextlib
import ctypes
import gc
import math
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import torch
from torch import Tensor


@dataclass
class MemoryReport:
    peak_bytes: int      # highest live tensor bytes during the call, `base_bytes` included
    base_bytes: int      # live tensor bytes counted before the call
    method: str          # "cuda-allocator" | "cpu-allocator"
    result: Any = field(default=None, repr=False, compare=False)   # what the measured call returned

    @property
    def added_bytes(self) -> int:
        """Peak bytes the call added on top of what was live before it."""
        return self.peak_bytes - self.base_bytes


def tensor_bytes(tensors: Iterable[Tensor]) -> int:
    """Bytes of the distinct storages behind `tensors` (views and shared weights counted once)."""
    seen: dict[int, int] = {}
    for t in tensors:
        if isinstance(t, Tensor) and t.device.type != "meta":
            s = t.untyped_storage()
            seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


def state_tensors(model: torch.nn.Module | None = None, optimizer: torch.optim.Optimizer | None = None) -> list[Tensor]:
    """Parameters, their gradients, buffers and optimizer state tensors."""
    out: list[Tensor] = []
    if model is not None:
        for p in model.parameters():
            out.append(p)
            if p.grad is not None:
                out.append(p.grad)
        out.extend(model.buffers())
    if optimizer is not None:
        for st in optimizer.state.values():
            out.extend(v for v in st.values() if isinstance(v, Tensor))
    return out


def peak_memory(fn: Callable[[], Any], live: Iterable[Tensor] = (), device: str | torch.device = "cpu") -> MemoryReport:
    """Run `fn()` once and return its peak memory (and, as `.result`, what it returned); `live` are tensors alive
    before the call to count in."""
    device = torch.device(device)
    result = None

    def call() -> None:
        nonlocal result
        result = fn()

    gc.collect()
    base = tensor_bytes(live)
    if device.type == "cuda":
        # the counters are the whole process's (other models, their optimizer state): take what the call adds
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        start = torch.cuda.memory_allocated(device)
        call()
        torch.cuda.synchronize(device)
        added = max(0, torch.cuda.max_memory_allocated(device) - start)
        return MemoryReport(base + added, base, "cuda-allocator", result)
    added = _cpu_added_peak(call)
    return MemoryReport(base + added, base, "cpu-allocator", result)


@contextlib.contextmanager
def _quiet_stderr():
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


class CpuAllocations:
    """The CPU allocator's allocation events between `start()` and `stop()`: (time ns, bytes, the allocator's
    running total of live bytes just after; a free has negative bytes). The total counts tensors allocated while
    some recording was running, so it tells what those hold before and during a call.

    Recordings nest: the profiler runs one session at a time, so starting or stopping one ends the running
    session, hands its events to every recording still open, and starts a new session for them."""

    _open: list["CpuAllocations"] = []      # the recordings running now, outermost first
    _session = None

    def __init__(self) -> None:
        self.events: list[tuple[int, int, int]] = []

    @classmethod
    def _flush(cls) -> None:
        from torch._C._profiler import _EventType

        if cls._session is None:
            return
        with _quiet_stderr():  # the profiler's C++ side logs its start and stop on fd 2
            cls._session.stop()
        events = []
        stack = list(cls._session.profiler.kineto_results.experimental_event_tree())
        cls._session = None
        while stack:
            node = stack.pop()
            if node.tag == _EventType.Allocation and node.extra_fields.device.type == "cpu":
                ef = node.extra_fields
                events.append((node.start_time_ns, ef.alloc_size, ef.total_allocated))
            stack.extend(node.children)
        for rec in cls._open:
            rec.events.extend(events)

    @classmethod
    def _begin(cls) -> None:
        from torch.profiler import ProfilerActivity, profile

        if cls._open:
            cls._session = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
            with _quiet_stderr():
                cls._session.start()

    def start(self) -> "CpuAllocations":
        type(self)._flush()
        type(self)._open.append(self)
        type(self)._begin()
        return self

    def flush(self) -> list[tuple[int, int, int]]:
        """The events so far (the recording goes on)."""
        type(self)._flush()
        type(self)._begin()
        return sorted(self.events)

    def stop(self) -> list[tuple[int, int, int]]:
        type(self)._flush()
        type(self)._open.remove(self)
        type(self)._begin()
        return sorted(self.events)


def _cpu_added_peak(fn: Callable[[], Any]) -> int:
    rec = CpuAllocations().start()
    try:
        fn()
    finally:
        events = rec.stop()
    if not events:
        return 0
    # The allocator's running total is process-wide; measure it relative to its value just before the call.
    t0, first_size, first_total = events[0]
    start = first_total - first_size
    return max(0, max(total for _, _, total in events) - start)


# --- the independent check: peak resident set size -------------------------------------------------------

def _read_status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not found in /proc/self/status")


def _release_free_heap(threshold: int = 128 * 1024) -> None:
    """Give freed heap memory back to the OS and serve large blocks from fresh mappings, so that what the
    call allocates shows up as new resident pages. (mallopt(M_MMAP_THRESHOLD) also turns off glibc's
    dynamic threshold; malloc_trim(0) returns free heap pages.)"""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, threshold)  # M_MMAP_THRESHOLD = -3
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass


def peak_rss_added(fn: Callable[[], Any]) -> int:
    """Peak resident bytes `fn()` adds to the process (Linux only). Noisier than `peak_memory` but
    independent of PyTorch: it is what the operating system sees."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS
    except OSError as e:
        raise RuntimeError("peak RSS needs Linux /proc/self/clear_refs") from e
    gc.collect()
    _release_free_heap()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = _read_status_kib("VmRSS")
    fn()
    return (_read_status_kib("VmHWM") - before) * 1024


@dataclass
class StepMemory:
    peak_bytes: int        # peak during forward + backward + optimizer step, gradients freed before it
    static_bytes: int      # parameters + gradients + optimizer state (what any trunk must hold)
    method: str
    activation_bytes: int  # what the step holds above the static part at its peak (see training_step_memory)


def saved_tensors_seen(on_pack: Callable[[Tensor], None] = lambda t: None,
                       on_unpack: Callable[[Tensor], None] = lambda t: None,
                       ) -> torch.autograd.graph.saved_tensors_hooks:
    """`torch.autograd.graph.saved_tensors_hooks` that show every tensor autograd saves (`on_pack(t)`) and gets back
    for backward (`on_unpack(t)`) without changing what backward computes.

    The pack hook stores `t.detach()`, never `t` itself. Autograd keeps what the pack hook returns inside the graph
    node, and a tensor saved as the output of its own node (scaled-dot-product attention's, tanh's, a custom
    Function's) would then hold that node while the node holds it: a cycle through C++ that the garbage collector
    cannot see. A backward that runs to its end breaks it; a step that raises part-way (a max-batch probe out of
    memory in forward or backward) or a forward measured without a backward never does, and its whole graph stays
    allocated. The detached tensor has the same storage and version counter, so backward gets the same values and
    gradients are bit-identical (tests/engine/test_probe_leaks.py); it has no graph of its own, so a double backward
    (`create_graph=True`) cannot run through a step measured this way."""
    def pack(t: Tensor) -> Tensor:
        on_pack(t)
        return t.detach()

    def unpack(t: Tensor) -> Tensor:
        on_unpack(t)
        return t

    return torch.autograd.graph.saved_tensors_hooks(pack, unpack)


class _ForwardPeak:
    """The most a call had added when its backward began: the first time autograd unpacks a saved tensor (the
    loss's own backward) ends forward. On CUDA the allocator's running maximum is read there. On CPU the
    profiler cannot be stopped inside backward, so the hook allocates and frees a marker of `MARKER_BYTES`
    (an odd size no tensor of floats has), and forward is every allocation event before it."""

    MARKER_BYTES = 4_101

    def __init__(self, device: torch.device) -> None:
        self.device, self._rec, self._start, self._cuda_added = device, None, 0, None
        self._marked = False

    def __enter__(self) -> "_ForwardPeak":
        if self.device.type == "cuda":
            self._start = torch.cuda.memory_allocated(self.device)   # after peak_memory's reset
        else:
            self._rec = CpuAllocations().start()
        self._hooks = saved_tensors_seen(on_unpack=self._unpack)
        self._hooks.__enter__()
        return self

    def _unpack(self, t: Tensor) -> None:
        if not self._marked:
            self._marked = True
            if self.device.type == "cuda":
                self._cuda_added = max(0, torch.cuda.max_memory_allocated(self.device) - self._start)
            else:
                del_me = torch.empty(self.MARKER_BYTES, dtype=torch.uint8)
                del del_me

    def __exit__(self, *exc) -> None:
        self._hooks.__exit__(*exc)
        if self._rec is not None:
            self._events = self._rec.stop()

    @property
    def added(self) -> int:
        if self.device.type == "cuda":
            if self._cuda_added is None:      # no backward ran: the whole call was forward
                return max(0, torch.cuda.max_memory_allocated(self.device) - self._start)
            return self._cuda_added
        events = self._events
        if not events:
            return 0
        start = events[0][2] - events[0][1]
        cut = next((i for i, (_, size, _) in enumerate(events) if size == self.MARKER_BYTES), len(events))
        return max([0] + [total - start for _, _, total in events[:cut]])


def training_step_memory(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None,
                         step: Callable[[], Any], device: str | torch.device = "cpu") -> StepMemory:
    """Peak memory of one training `step()` (forward, backward and, if given, the optimizer step).

    The peak is the training loop's: gradients are cleared first (`set_to_none`) so the step allocates them
    itself. The static part counts parameters, a gradient per parameter and the optimizer state as it stands
    after the step.

    `activation_bytes` is not the peak minus the static part: a stored trunk peaks at the end of forward, before
    any gradient exists, and subtracting every gradient there would understate its activations by the
    gradients' bytes. So it is the larger of what forward had added when backward began (no gradient exists
    yet) and what the whole step added less its gradients (a reversible trunk peaks in backward, where its
    blocks' gradients exist)."""
    device = torch.device(device)
    model.zero_grad(set_to_none=True)
    grad_bytes = tensor_bytes(p for p in model.parameters() if p.requires_grad)
    forward = _ForwardPeak(device)

    def measured() -> None:
        with forward:
            step()

    rep = peak_memory(measured, state_tensors(model, optimizer), device)
    static = tensor_bytes(model.parameters()) + grad_bytes + tensor_bytes(state_tensors(None, optimizer))
    model.zero_grad(set_to_none=True)
    activations = max(forward.added, rep.added_bytes - grad_bytes)
    return StepMemory(rep.peak_bytes, static, rep.method, activations)


@dataclass(frozen=True)
class MemoryLine:
    """A training step's peak as a straight line in the batch: `static_bytes + bytes_per_sequence * batch`.
    Parameters, gradients and Adam state do not depend on the batch; activations grow with it."""
    static_bytes: float
    bytes_per_sequence: float

    @classmethod
    def through(cls, b1: int, peak1: int, b2: int, peak2: int) -> "MemoryLine":
        """The line through two measured (batch, peak) points."""
        slope = (peak2 - peak1) / (b2 - b1)
        return cls(peak1 - slope * b1, slope)

    def max_batch(self, budget_bytes: int) -> int:
        """Largest batch the line keeps within `budget_bytes` (0 when the static part alone is over)."""
        if self.bytes_per_sequence <= 0:
            raise ValueError(f"the peak did not grow with the batch ({self.bytes_per_sequence:.0f} bytes per "
                             f"sequence): measure at two batches further apart")
        return max(0, math.floor((budget_bytes - self.static_bytes) / self.bytes_per_sequence))
