"""Device and mixed-precision choices, made in one place.

bf16 autocast only where the GPU's compute capability is >= 8 (Ampere and newer): older GPUs such as the
T4 report `is_bf16_supported()` in some builds yet emulate it slowly, so the decision is made from the
capability. T4-class GPUs get fp16 autocast with a GradScaler; the CPU computes in fp32 unless asked.
"""
from __future__ import annotations

import contextlib
import os
from typing import Iterator

import torch
from .units import GIB

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
# GiB of GPU memory this process may use, when set: a larger GPU then runs as a smaller one would (the caching
# allocator's per-process cap). `REV_GPU_MEMORY_GIB=15 python -m rev workbook --profile t4` rehearses a T4's memory
# on a larger GPU; `python -m rev gpucheck --notebooks` runs notebooks so.
MEMORY_CAP_ENV = "REV_GPU_MEMORY_GIB"


def _named_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError:  # torch's "Invalid device string"
        dev = None
    if dev is None or dev.type not in ("cpu", "cuda"):
        raise ValueError(f"unknown device {name!r}: use auto, cpu, cuda or cuda:N")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} requested but no CUDA GPU is visible; use --device cpu")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"device {name!r}: only {torch.cuda.device_count()} CUDA GPU(s) visible "
                         f"(cuda:0 to cuda:{torch.cuda.device_count() - 1})")
    return dev


def pick_device(name: str = "auto") -> torch.device:
    """`auto` -> cuda when available, else cpu; a name that is not a usable cpu or cuda device raises ValueError. A
    CUDA device gets the memory cap `REV_GPU_MEMORY_GIB` asks for, if any (`apply_memory_cap`)."""
    dev = _named_device(name)
    if dev.type == "cuda":
        apply_memory_cap(dev)
    return dev


def apply_memory_cap(dev: torch.device) -> None:
    """Cap this process's CUDA allocator on `dev` at `REV_GPU_MEMORY_GIB` GiB when that is set (never above the
    device); a value that is not a positive number raises ValueError."""
    text = os.environ.get(MEMORY_CAP_ENV, "").strip()
    if not text:
        return
    try:
        gib = float(text)
    except ValueError:
        gib = float("nan")
    if not gib > 0:
        raise ValueError(f"{MEMORY_CAP_ENV}={text!r}: give the GPU memory to use as a positive number of GiB "
                         f"(15 for a T4), or unset it to use the whole GPU")
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    total = torch.cuda.get_device_properties(index).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, gib * GIB / total), index)


def amp_dtype(device: torch.device, precision: str = "auto") -> torch.dtype | None:
    """The autocast dtype for `device` (None means plain fp32)."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
    if precision == "fp32":
        return None
    if precision == "bf16":
        return torch.bfloat16
    if precision == "fp16":
        if device.type != "cuda":
            raise ValueError("fp16 autocast needs a CUDA GPU; on CPU use precision 'bf16' or 'fp32'")
        return torch.float16
    if device.type != "cuda":
        return None
    major, _ = torch.cuda.get_device_capability(device)
    return torch.bfloat16 if major >= 8 else torch.float16


def autocast(device: torch.device, dtype: torch.dtype | None) -> contextlib.AbstractContextManager:
    """Autocast to `dtype` on `device`'s type; nothing at all for None or for fp32, the parameters' own dtype
    (CPU autocast does not support fp32 and would warn on every run)."""
    if dtype is None or dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


@contextlib.contextmanager
def single_thread() -> Iterator[None]:
    """Run the enclosed work on one intra-op thread, restoring the previous setting after. Small tensors gain
    nothing from extra threads, and on a busy machine the threads mostly wait for each other."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def describe(device: torch.device, dtype: torch.dtype | None) -> str:
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    return f"{name} ({device.type}), {'fp32' if dtype is None else str(dtype).replace('torch.', '')} compute"
