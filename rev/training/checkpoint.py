"""A run's checkpoint, ckpt.pt: written atomically, read back with an error that says what to do, and the trained
model a run folder holds. What a checkpoint contains is the training loop's (`loop._Run.state`)."""
from __future__ import annotations

from pathlib import Path

import torch

from ..base.files import atomic_path
from ..core.model import GPT, GPTConfig


def save_checkpoint(path: Path, state: dict) -> None:
    """Write to a temporary name, then rename: a crash never leaves a half-written checkpoint."""
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load_scaler_state(scaler: torch.amp.GradScaler, state: dict) -> None:
    """Restore a checkpoint's GradScaler state. A checkpoint written without loss scaling (fp32 or bf16 compute, a
    disabled scaler: its state is empty, and torch's `load_state_dict` refuses it) resumed where fp16 turns the
    scaler on (a T4) starts from a fresh scale, and says so; a disabled scaler ignores any state."""
    if scaler.is_enabled() and not state:
        print("note: the checkpoint was written without a loss scaler (fp32 or bf16 compute); continuing under "
              "fp16 with a fresh GradScaler, so the numbers are not those of an uninterrupted run in either precision")
        return
    scaler.load_state_dict(state)


def load_checkpoint(path: Path, model_cfg: GPTConfig) -> dict:
    if not path.exists():
        raise ValueError(f"cannot resume: no checkpoint at {path}; run without --resume to start fresh "
                         f"(or with --resume auto: continue if there is a checkpoint, else start)")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # corrupt or not a checkpoint
        raise ValueError(f"cannot resume: {path} is not a readable checkpoint ({e})") from e
    if not isinstance(ckpt, dict) or ckpt.get("model_config") != model_cfg.to_dict():
        raise ValueError(f"cannot resume: {path} belongs to a different model/run "
                         f"(its config {ckpt.get('model_config') if isinstance(ckpt, dict) else '?'}); "
                         f"use another --out folder or drop --resume")
    return ckpt


def load_model(run_dir: str | Path, device: str | torch.device = "cpu") -> GPT:
    """The trained model of a run folder (from its checkpoint)."""
    path = Path(run_dir) / "ckpt.pt"
    if not path.exists():
        raise ValueError(f"no checkpoint at {path}: train the run first")
    ckpt = torch.load(path, map_location=device, weights_only=True)
    cfg = ckpt["model_config"]
    model = GPT(GPTConfig.from_dict(cfg))
    model.load_state_dict(ckpt["model"])
    return model.to(device)
