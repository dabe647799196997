"""Test-session settings.

The suite runs as two single-threaded workers (`pytest -n 2`): nearly every test works on tiny tensors, where
intra-op threads cost more in synchronisation than they gain, and two processes keep both cores busy."""
from pathlib import Path

import pytest
import torch

torch.set_num_threads(1)

# Tests that run the CUDA path where a GPU is visible (the `device` fixture or parameter: CPU, plus CUDA when
# there is one) or through the CUDA double (`fake_cuda`) carry the `cuda` marker. They pass on any device, so
# `pytest -m cuda` is the selection a GPU machine runs (the Colab driver does); the rest of the suite checks
# promises made on a CPU (bit-exact resume, CPU figures) and runs there.
CUDA_FIXTURES = {"device", "fake_cuda"}


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
    from rev.engine.corpus import prepare_profile
    from rev.engine.profiles import get_profile

    root = tmp_path_factory.mktemp("data")
    prepare_profile(get_profile("smoke"), root, progress=False)
    return root


@pytest.fixture
def fake_cuda(monkeypatch):
    """A fake T4 (16 GiB, capability 7.5) whose allocator counters follow the CPU allocator (tests/fake_cuda.py):
    code paths taken only on CUDA run here, on CPU tensors."""
    from fake_cuda import FakeCuda

    fake = FakeCuda().install(monkeypatch)
    yield fake
    fake.close()


@pytest.fixture
def force_cpu(monkeypatch):
    """For tests that must run on the CPU whatever the machine has: `torch.cuda.is_available()` answers False here,
    and subprocesses the test starts see no GPU (CUDA_VISIBLE_DEVICES is empty)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
