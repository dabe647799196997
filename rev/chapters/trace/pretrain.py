"""Notebook 10 (fine-tune trace and rollback): the pretrained starting point. A finished residual run of the
profile with the chapter's model geometry is reused when there is one (the baseline of notebook 04 first, where
the chapter fine-tunes the profile's own model); otherwise a short run of `rev.training.loop` is made now, at that
geometry on the profile's data, and saved for next time.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

import torch
from torch import nn

from ...base.files import read_json
from ..shared.main_runs import MAIN_RUNS
from ...training.loop import TrainConfig, train
from ...training.checkpoint import load_model
from .sizes import chapter_sizes, model_profile

PRETRAIN_RUN = "10_pretrain"      # the folder this chapter's own pretraining run is saved in


GEOMETRY = ("d_model", "n_layer", "n_head", "vocab_size", "seq_len")


def find_checkpoint(results_dir: str | os.PathLike, profile_name: str,
                    geometry: Mapping[str, int] | None = None) -> str | None:
    """A finished run of the profile with a residual trunk to start from (its folder), if there is one; with
    `geometry`, only a run whose model has those sizes (the chapter's own model where it is not the profile's)."""
    root = os.path.join(os.fspath(results_dir), profile_name)
    if not os.path.isdir(root):
        return None
    preferred = [*MAIN_RUNS, PRETRAIN_RUN]       # the main runs in workbook order; only residual ones qualify
    folders = preferred + sorted(set(os.listdir(root)) - set(preferred))
    for name in folders:
        run = os.path.join(root, name)
        if not (os.path.isfile(os.path.join(run, "ckpt.pt")) and os.path.isfile(os.path.join(run, "summary.json"))):
            continue
        try:
            model_cfg = read_json(os.path.join(run, "config.json")).get("model", {})
        except (OSError, ValueError):
            continue
        same = geometry is None or all(model_cfg.get(k) == v for k, v in geometry.items())
        if model_cfg.get("trunk") == "residual" and model_cfg.get("stream", "fp32") == "fp32" and same:
            return run
    return None


def pretrained_model(profile: Any, results_dir: str | os.PathLike, data_dir: str | os.PathLike, seed: int = 0,
                     device: str | torch.device = "cpu", progress: bool = True) -> tuple[nn.Module, str]:
    """The GPT to fine-tune: a finished residual run of the profile under `results_dir` if there is one,
    else a short pretraining run now (`TraceSize.pretrain_fraction` of the profile's tokens), saved for next
    time. Returns the model and a sentence saying which."""
    chapter = model_profile(profile)                # the profile, or the chapter's smaller model on its data
    run = find_checkpoint(results_dir, profile.name, {k: getattr(chapter, k) for k in GEOMETRY})
    if run is not None:
        return load_model(run, device), f"reused the finished run {Path(run).name}"
    out = os.path.join(os.fspath(results_dir), profile.name, PRETRAIN_RUN)
    fraction = chapter_sizes(profile).pretrain_fraction
    tokens = max(profile.batch_size * profile.seq_len, int(profile.train_tokens * fraction))
    summary = train(TrainConfig(profile=chapter, trunk="residual", out_dir=out, data_dir=data_dir,
                                train_tokens=tokens, seed=seed, progress=progress))
    steps = tokens // (profile.batch_size * profile.seq_len)
    val = summary.get("final_val_loss")
    val_text = f", val loss {val:.3f}" if isinstance(val, (int, float)) else ""
    return load_model(out, device), f"pretrained now: {steps} steps, {tokens:,} tokens{val_text}"
