"""The CUDA memory path on the fake CUDA (tests/fake_cuda.py): peaks count what a call adds on top of its live
state, as on CPU; bench is not skewed by the models it measured before; the max-batch budget counts the
allocator's unused cache and not other tensors; both kinds of CUDA out-of-memory are a miss, with the probe's
memory freed, and any other error still raises."""
import gc
import weakref

import pytest
import torch

from fake_cuda import MIB
from rev.measure import bench
from rev.measure import maxbatch
from rev.measure.memory import peak_memory, training_step_memory
from rev.base.profiles import get_profile
from rev.measure import probe

pytestmark = pytest.mark.cuda  # the CUDA path (or its double): in the GPU selection
GEOMETRY = dict(vocab_size=64, seq_len=64, n_layer=2, n_head=2, d_model=32)
SLACK = 64 * 1024          # the profiler's own small allocations around a measurement


def test_the_fake_counters_follow_real_tensors(fake_cuda):
    before = torch.cuda.memory_allocated()
    t = torch.empty(8 * MIB, dtype=torch.uint8)
    assert torch.cuda.memory_allocated() - before == pytest.approx(8 * MIB, abs=SLACK)
    torch.cuda.reset_peak_memory_stats()
    del t
    u = torch.empty(2 * MIB, dtype=torch.uint8)
    del u
    assert torch.cuda.max_memory_allocated() - torch.cuda.memory_allocated() == pytest.approx(8 * MIB, abs=SLACK)


def test_the_double_runs_the_cuda_path_on_the_cpu_and_runs_out_of_memory_as_a_gpu_does(fake_cuda):
    """"cuda" tensors are CPU tensors, autocast and GradScaler on "cuda" are the CPU's; an allocation over the room
    left raises CUDA's error before allocating; under a cap, a module whose forward leaves the process over it."""
    model = torch.nn.Sequential(torch.nn.Linear(64, 64)).to("cuda")
    x = torch.randn(8, 64).to(torch.device("cuda"), non_blocking=True)
    assert next(model.parameters()).device.type == x.device.type == torch.zeros(2, device="cuda").device.type == "cpu"
    with torch.autocast("cuda", dtype=torch.float16):
        assert model(x).dtype == torch.float16
    scaler = torch.amp.GradScaler("cuda", init_scale=2.0 ** 4)
    scaler.scale(model(x).sum()).backward()
    assert scaler.get_scale() == 16.0
    with pytest.raises(torch.OutOfMemoryError, match="Tried to allocate 16384.00 MiB"):
        torch.empty(16 * 2**30, dtype=torch.uint8, device="cuda")
    big = torch.nn.Sequential(torch.nn.Linear(64, 4096)).to("cuda")     # its output: 8 x 4096 floats, 128 KiB
    torch.cuda.set_per_process_memory_fraction((torch.cuda.memory_allocated() + 64 * 1024) / fake_cuda.total_bytes, 0)
    assert big[0](x).numel()                                           # a single layer is not checked
    with pytest.raises(torch.OutOfMemoryError):
        big(x)                                                         # the block it sits in is
    assert fake_cuda.ooms == 2


def test_cuda_peak_counts_what_the_call_adds_on_top_of_its_live_state(fake_cuda):
    """On a GPU `max_memory_allocated` is the whole process's: an earlier model held elsewhere must not count."""
    earlier_model = torch.empty(32 * MIB, dtype=torch.uint8)   # another model the notebook still holds
    weights = torch.empty(MIB, dtype=torch.uint8)

    def step():
        scratch = torch.empty(4 * MIB, dtype=torch.uint8)
        del scratch

    cuda, cpu = peak_memory(step, [weights], "cuda"), peak_memory(step, [weights], "cpu")
    assert cuda.method == "cuda-allocator" and cpu.method == "cpu-allocator"
    assert cuda.base_bytes == cpu.base_bytes == MIB
    assert cuda.peak_bytes == pytest.approx(5 * MIB, abs=SLACK)
    assert cuda.peak_bytes == pytest.approx(cpu.peak_bytes, abs=SLACK)
    assert earlier_model.numel()  # still alive through both measurements


def _bench(measure_on: str, monkeypatch) -> dict:
    if measure_on == "cuda":   # the models run on the CPU; their memory is read through the CUDA counters
        real = bench.training_step_memory
        monkeypatch.setattr(bench, "training_step_memory",
                            lambda model, opt, step, device: real(model, opt, step, torch.device("cuda")))
    res = bench.bench_trunks(GEOMETRY, 4, trunks=("residual", "reveuler_rev", "midpoint_rev"), steps=1,
                             device="cpu", progress=False, per_sequence=True)
    return {r["trunk"]: r for r in res["runs"]}


def test_bench_figures_do_not_include_the_models_measured_before(fake_cuda, monkeypatch):
    """bench keeps every model (and its AdamW state) alive for the interleaved timing; on CUDA each later trunk's
    peak, and the per-sequence slope (a second model at twice the batch), must still be its own."""
    cpu = _bench("cpu", monkeypatch)
    cuda = _bench("cuda", monkeypatch)
    for trunk, row in cpu.items():
        assert cuda[trunk]["peak_bytes"] == pytest.approx(row["peak_bytes"], rel=0.02, abs=SLACK), trunk
        assert cuda[trunk]["bytes_per_sequence"] == pytest.approx(row["bytes_per_sequence"], rel=0.05), trunk


def test_budget_is_free_memory_plus_the_unused_cache_not_other_tensors(fake_cuda):
    fake_cuda.total_bytes, fake_cuda.other_processes_bytes = 8 * 2**30, 2**30   # another kernel's context
    fake_cuda.cached_bytes = 512 * MIB                 # freed by earlier probes, kept by the caching allocator
    held = torch.empty(256 * MIB, dtype=torch.uint8)   # a model this process still holds: not available
    allocated = torch.cuda.memory_allocated()
    free, _ = torch.cuda.mem_get_info()
    budget = probe.cuda_budget(torch.device("cuda"), fraction=1.0)
    assert budget == pytest.approx(free + fake_cuda.cached_bytes, abs=SLACK)
    assert budget == pytest.approx(fake_cuda.total_bytes - fake_cuda.other_processes_bytes - allocated, abs=SLACK)
    fake_cuda.cached_bytes = 0                         # handing the cache back to the driver changes nothing
    assert probe.cuda_budget(torch.device("cuda"), 0.5) == pytest.approx(budget / 2, abs=SLACK)
    del held



def test_under_a_cap_the_budget_is_what_the_cap_leaves(fake_cuda):
    """A 15 GiB cap on a 16 GiB device (a T4 emulated on a larger GPU): the driver's free memory does not know the
    cap, so the budget must come from the cap, less what this process holds; without a cap, from the free memory."""
    fake_cuda.other_processes_bytes = 0
    held = torch.empty(64 * MIB, dtype=torch.uint8)
    allocated = torch.cuda.memory_allocated()
    free_budget = probe.cuda_budget(torch.device("cuda"), fraction=1.0)
    torch.cuda.set_per_process_memory_fraction(15 / 16, 0)
    assert probe.memory_cap(torch.device("cuda")) == 15 * 2**30
    capped = probe.cuda_budget(torch.device("cuda"), fraction=1.0)
    assert capped == pytest.approx(15 * 2**30 - allocated, abs=SLACK)
    assert free_budget == pytest.approx(16 * 2**30 - allocated, abs=SLACK)
    torch.cuda.set_per_process_memory_fraction(0.5, 0)          # a cap below the free memory binds
    assert probe.cuda_budget(torch.device("cuda"), 0.9) == pytest.approx(0.9 * (8 * 2**30 - allocated), abs=SLACK)
    del held

OOMS = [torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
        RuntimeError("CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported"),
        RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`")]


@pytest.mark.parametrize("error", OOMS, ids=["OutOfMemoryError", "cuda-error", "cublas-alloc"])
def test_both_kinds_of_out_of_memory_are_a_miss_and_the_probe_is_freed(error, fake_cuda):
    kept: list = []

    def failing() -> int:
        activations = torch.empty(64 * MIB, dtype=torch.uint8)   # what the failed step had allocated
        kept.append(weakref.ref(activations))
        raise type(error)(*error.args)   # a fresh one, as CUDA raises (a shared one would keep its traceback)

    gc.collect()
    before = torch.cuda.memory_allocated()
    fake_cuda.cached_bytes = 64 * MIB
    assert probe.measure_probe(failing, 10**12, torch.device("cuda")) == (None, False)
    assert kept[0]() is None, "the failed probe's tensors are still alive"
    assert torch.cuda.memory_allocated() - before <= SLACK
    assert fake_cuda.empty_cache_calls >= 1 and fake_cuda.cached_bytes == 0


def test_any_other_runtime_error_still_raises(fake_cuda):
    def failing() -> int:
        raise RuntimeError("CUDA error: device-side assert triggered")

    with pytest.raises(RuntimeError, match="device-side assert"):
        probe.measure_probe(failing, 10**12, torch.device("cuda"))


def test_the_search_treats_a_cublas_failure_as_a_miss(fake_cuda, monkeypatch):
    def step_peak(cfg, batch, device, dtype) -> int:
        if batch > 5:
            raise RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasSgemm( handle, ...)`")
        return batch * MIB

    monkeypatch.setattr(probe, "step_peak", step_peak)
    res = maxbatch.find_max_batch(get_profile("smoke").model_config("residual"), device="cuda", limit=64,
                                  progress=False)
    assert res.batch == 5
    assert {p.batch for p in res.probes if p.peak_bytes is None} >= {6}
    assert all(p.fits == (p.batch <= 5) for p in res.probes)


def test_training_step_memory_is_the_same_figure_on_both_paths(fake_cuda):
    cfg = get_profile("smoke").model_config("reveuler_rev")
    model, opt, step = probe.make_training_step(cfg, 2, torch.device("cpu"), None)
    step()
    cuda = training_step_memory(model, opt, step, "cuda")
    cpu = training_step_memory(model, opt, step, "cpu")
    assert cuda.static_bytes == cpu.static_bytes
    assert cuda.peak_bytes == pytest.approx(cpu.peak_bytes, rel=0.02)


def test_rev_gpu_memory_gib_caps_the_allocator_when_a_cuda_device_is_picked(fake_cuda, monkeypatch):
    """How a kernel started by the workbook runs capped (gpucheck --notebooks; a T4 rehearsed on a larger GPU)."""
    from rev.base.device import pick_device

    pick_device("cuda")
    assert fake_cuda.memory_fraction is None                  # unset: the whole device
    monkeypatch.setenv("REV_GPU_MEMORY_GIB", "2")
    pick_device("cpu")
    assert fake_cuda.memory_fraction is None                  # only a CUDA device is capped
    assert pick_device("auto").type == "cuda" and fake_cuda.memory_fraction == pytest.approx(2 / 16)
    monkeypatch.setenv("REV_GPU_MEMORY_GIB", "40")            # more than the device: the whole device
    pick_device("cuda:0")
    assert fake_cuda.memory_fraction == 1.0
    for bad in ("two", "0", "-1", "nan"):
        monkeypatch.setenv("REV_GPU_MEMORY_GIB", bad)
        with pytest.raises(ValueError, match="positive number of GiB"):
            pick_device("cuda")
