"""Devices for the core tests: the CPU always, CUDA too when a GPU is visible. A test that takes the `device`
fixture runs once per device, so the CUDA path (autocast replay, the CUDA allocator's counters) is checked
wherever the suite runs on a GPU, with the very assertions the CPU run makes."""
import pytest
import torch

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(params=DEVICES)
def device(request) -> torch.device:
    return torch.device(request.param)
