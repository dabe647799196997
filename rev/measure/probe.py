"""One probe: a real training step at a batch, its measured peak against a byte budget, and what the device has
free. Every memory search (the max-batch and depth searches, the GPU's slice plan) is made of these probes, so they
live below all of them: a probe that runs out of memory is a miss, and frees all it made before the next.

`make_training_step` builds the step (a fresh model, AdamW, a fixed batch), `step_peak` measures it (optimizer
state included, through `rev.measure.memory`), `measure_config` is the probe itself, `measure_probe` its rule for
misses; `cuda_budget`, `memory_cap`, `available_bytes` and `check_budget` say what a device can give a step.
"""
from __future__ import annotations

import gc
from typing import Callable

import torch

from ..base.device import autocast
from ..base.units import MIB
from ..core.model import GPT, GPTConfig
from ..core.optim import adamw
from .memory import training_step_memory




def make_training_step(cfg: GPTConfig, batch: int, device: torch.device, dtype, seed: int = 0):
    """A fresh model and AdamW, and `step()` running one real training step on a fixed random batch;
    `step.forward_backward()` runs the step's forward and backward alone (no update)."""
    torch.manual_seed(seed)
    model = GPT(cfg).to(device)
    opt = adamw(model, lr=1e-4)
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, cfg.vocab_size, (batch, cfg.seq_len + 1), generator=gen).to(device)

    def forward_backward() -> None:
        with autocast(device, dtype):
            loss = model(idx[:, :-1], idx[:, 1:])
        loss.backward()

    def step() -> None:
        forward_backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step.forward_backward = forward_backward
    return model, opt, step




def step_peak(cfg: GPTConfig, batch: int, device: torch.device, dtype) -> int:
    """Peak bytes of a real training step of a fresh `cfg` at `batch`, optimizer state included (raises
    torch.OutOfMemoryError on CUDA OOM)."""
    model, opt, step = make_training_step(cfg, batch, device, dtype)
    init_optimizer_state(model, opt)
    return training_step_memory(model, opt, step, device).peak_bytes




def init_optimizer_state(model: torch.nn.Module, opt: torch.optim.Optimizer) -> None:
    """Give `opt` its state (AdamW's two moments per parameter) as a first training step would, without the step's
    forward and backward: one update from zero gradients. A probe then measures one real step, not two."""
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    opt.zero_grad(set_to_none=True)


# How running out of memory is reported: CUDA's caching allocator raises torch.OutOfMemoryError; an allocation made
# outside it (cuBLAS's workspace and handle, a kernel launch) arrives as a plain RuntimeError with one of these; the
# CPU allocator, when the operating system refuses it memory, raises a RuntimeError ("DefaultCPUAllocator: can't
# allocate memory").
OOM_MESSAGES = ("out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "CUDNN_STATUS_ALLOC_FAILED", "can't allocate memory")






def is_out_of_memory(error: BaseException) -> bool:
    """Whether `error` says the device (a GPU, or the CPU's RAM) ran out of memory (any kind above)."""
    if isinstance(error, torch.cuda.OutOfMemoryError):   # torch.OutOfMemoryError is the same class
        return True
    return isinstance(error, RuntimeError) and any(m in str(error) for m in OOM_MESSAGES)




def measure_probe(run: Callable[[], int], budget: int, device: torch.device) -> tuple[int | None, bool]:
    """(peak bytes, fits) of one probe `run()` returning its peak; running out of memory (`is_out_of_memory`) is a
    miss with no peak, any other error propagates. Either way the probe's tensors are freed before this returns:
    the error is dropped first (its traceback holds the failed step's frames, and so its activations), then the
    garbage collector runs and the CUDA cache is emptied, so the next probe starts from the same memory."""
    failed = False
    try:
        peak = run()
    except RuntimeError as e:
        if not is_out_of_memory(e):
            raise
        failed = True
    finally:
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if failed:
        return None, False
    return peak, peak <= budget




def measure_config(cfg: GPTConfig, batch: int, device: torch.device, dtype, budget: int) -> tuple[int | None, bool]:
    """(peak bytes, fits) of one probe of `cfg` at `batch`: what every probe of the searches here measures (see
    `measure_probe`)."""
    return measure_probe(lambda: step_peak(cfg, batch, device, dtype), budget, device)




# the share of what a GPU can give a step that a search or a slice plan takes: the rest is for fragmentation, memory
# outside the caching allocator and other processes (`cuda_budget`)
CUDA_FRACTION = 0.9


def cuda_budget(dev: torch.device, fraction: float = CUDA_FRACTION) -> int:
    """`fraction` of what a CUDA device can give a new training step now: the driver's free memory plus what this
    process's caching allocator holds in reserve without using it (blocks freed by earlier probes or models; they
    serve new tensors before the driver is asked), and never more than the process's cap allows
    (`torch.cuda.set_per_process_memory_fraction`, how a larger GPU stands in for a 15 GiB T4: the driver's free
    figure does not know the cap). Tensors this process still holds (another model, its AdamW state) are not
    available and not counted; memory held by other processes (another kernel's CUDA context and cache, say a
    notebook's driver) is already missing from the free figure.

    What it ignores, and `fraction` leaves room for: fragmentation (a cached block may be free yet too small for
    one large tensor), memory the step takes outside the caching allocator (this process's CUDA context, cuBLAS
    and cuDNN handles), and whatever other processes allocate while the search runs."""
    free, total = torch.cuda.mem_get_info(dev)
    allocated = torch.cuda.memory_allocated(dev)
    unused_cache = torch.cuda.memory_reserved(dev) - allocated
    available = free + max(0, unused_cache)
    return int(fraction * min(available, memory_cap(dev, total) - allocated))




def memory_cap(dev: torch.device, total: int | None = None) -> int:
    """Bytes this process's caching allocator may hold on `dev`: the device's total under the per-process cap
    (`set_per_process_memory_fraction`; a torch without `get_per_process_memory_fraction` cannot tell it, and then
    the total is the answer)."""
    total = torch.cuda.mem_get_info(dev)[1] if total is None else total
    get_fraction = getattr(torch.cuda, "get_per_process_memory_fraction", None)
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    return int((1.0 if get_fraction is None else get_fraction(index)) * total)




def available_bytes(dev: torch.device) -> int | None:
    """What a new training step can have on `dev` now: on CUDA what `cuda_budget` counts (the driver's free memory
    and this process's unused cache); on a CPU what the operating system says is available without swapping
    (MemAvailable in /proc/meminfo, or psutil's figure where there is no /proc); None where nothing tells."""
    if dev.type == "cuda":
        return cuda_budget(dev, 1.0)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        import psutil
    except ImportError:
        return None
    return int(psutil.virtual_memory().available)




def check_budget(budget_bytes: int, dev: torch.device) -> None:
    """Refuse a budget larger than what `dev` has free (`available_bytes`), before the first probe: a search under
    it would probe batches the machine cannot hold, and end in an allocation failure, or in the operating system
    killing the process without a word."""
    have = available_bytes(dev)
    if have is not None and budget_bytes > have:
        where = "RAM" if dev.type == "cpu" else f"memory on {torch.cuda.get_device_name(dev)}"
        raise ValueError(f"budget {budget_bytes / MIB:,.0f} MiB is more than this machine has free "
                         f"({have / MIB:,.0f} MiB of {where}): give --budget-mib {int(0.9 * have / MIB):d} "
                         f"or less")
