"""Test-session settings.

The suite runs as two single-threaded workers (`pytest -n 2`): nearly every test works on tiny tensors, where
intra-op threads cost more in synchronisation than they gain, and two processes keep both cores busy."""
import gc
import os
from pathlib import Path

import pytest
import torch

torch.set_num_threads(1)

# Tests that run the CUDA path where a GPU is visible (the `device` fixture or parameter: CPU, plus CUDA when
# there is one) or through the CUDA double (`fake_cuda`) carry the `cuda` marker. They pass on any device, so
# `pytest -m cuda` is the selection a GPU machine runs (the Colab driver does). Every other test checks what a
# CPU promises (a resumed run bit-exact, CPU figures), so on a machine with a GPU it runs as if there were none.
CUDA_FIXTURES = {"device", "fake_cuda"}
# Asked once, before any test hides the GPU: this also starts CUDA where there is one, which fixes the devices
# this process sees (CUDA_VISIBLE_DEVICES, emptied below for subprocesses, is read only then).
GPU_VISIBLE = torch.cuda.is_available()
VISIBLE_DEVICES = os.environ.get("CUDA_VISIBLE_DEVICES")


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "cuda: exercises the CUDA path (on a GPU where visible, else its CPU "
                                       "double); passes on any device")


def pytest_collection_modifyitems(items) -> None:
    for item in items:
        if CUDA_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.cuda)


@pytest.fixture(scope="module")
def smoke_data(tmp_path_factory) -> Path:
    """A prepared smoke-profile corpus in a temporary folder, shared by a test module."""
    from rev.data.corpus import prepare_profile
    from rev.base.profiles import get_profile

    root = tmp_path_factory.mktemp("data")
    prepare_profile(get_profile("smoke"), root, progress=False)
    return root


@pytest.fixture
def quick_collections():
    """The objects alive before the test (the suite's imports, fixtures) frozen out of the garbage collector, so the
    many full collections a memory test makes (each max-batch probe, each gpucheck row's memory count) scan only
    what the test allocates: one collection of the suite's imports takes ~0.2 s. What the test leaves behind is
    still collected, and counted."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


@pytest.fixture
def fake_cuda(monkeypatch):
    """A fake T4 (16 GiB, capability 7.5) whose allocator counters follow the CPU allocator (tests/fake_cuda.py):
    code paths taken only on CUDA run here, on CPU tensors."""
    from fake_cuda import FakeCuda

    fake = FakeCuda().install(monkeypatch)
    yield fake
    fake.close()


def _hide_gpu(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(torch.cuda, "is_available", lambda: False)   # so `auto` picks the CPU here,
    mp.setenv("CUDA_VISIBLE_DEVICES", "")                     # and in the subprocesses a test starts


@pytest.fixture(scope="session", autouse=True)
def _cpu_unless_marked_cuda():
    """On a machine with a GPU, the suite sees none (module fixtures included) except in tests marked `cuda`."""
    if not GPU_VISIBLE:
        yield
        return
    with pytest.MonkeyPatch.context() as mp:
        _hide_gpu(mp)
        yield


@pytest.fixture(autouse=True)
def _gpu_for_cuda_tests(request, monkeypatch):
    if GPU_VISIBLE and request.node.get_closest_marker("cuda") is not None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        if VISIBLE_DEVICES is None:
            monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        else:
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", VISIBLE_DEVICES)


@pytest.fixture
def force_cpu(monkeypatch):
    """Says in a test that it must run on the CPU (as every test not marked `cuda` does on a GPU machine anyway):
    `torch.cuda.is_available()` answers False, and subprocesses the test starts see no GPU."""
    _hide_gpu(monkeypatch)
