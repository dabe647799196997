"""Autocast is entered only where it changes the compute dtype: CPU autocast to fp32 is not supported by torch
and warns on every run, so fp32 (the parameters' own dtype) must mean no autocast context at all."""
from __future__ import annotations

import contextlib
import warnings

import torch

from rev.base.device import amp_dtype, autocast


def test_fp32_enters_no_autocast_and_warns_nothing():
    cpu = torch.device("cpu")
    for dtype in (None, torch.float32, amp_dtype(cpu, "fp32"), amp_dtype(cpu, "auto")):
        ctx = autocast(cpu, dtype)
        assert isinstance(ctx, contextlib.nullcontext), f"{dtype}: an autocast context where none is needed"
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with ctx:
                assert not torch.is_autocast_enabled("cpu")
                torch.ones(2, 2) @ torch.ones(2, 2)


def test_bf16_still_autocasts_on_cpu():
    with autocast(torch.device("cpu"), torch.bfloat16):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16
