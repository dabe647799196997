"""Training's CUDA-only paths, on the fake CUDA or with the CPU's own GradScaler: one process per GPU under
torchrun (and a clear error when there are more processes than GPUs), and resuming a checkpoint written without a
loss scaler (fp32 on a CPU, say) where the scaler is on (fp16 on a T4)."""
from pathlib import Path

import pytest
import torch

from rev.training import loop as T
from rev.base.profiles import get_profile

pytestmark = pytest.mark.cuda  # the CUDA path (or its double): in the GPU selection
SMOKE = get_profile("smoke")
ONE_BATCH = SMOKE.batch_size * SMOKE.seq_len


@pytest.mark.parametrize("gpus, rank", [(1, 0), (2, 1)])
def test_each_torchrun_process_takes_its_own_gpu(gpus, rank, fake_cuda, monkeypatch):
    fake_cuda.count = gpus
    monkeypatch.setenv("LOCAL_RANK", str(rank))
    assert T._local_device(torch.device("cuda")) == torch.device("cuda", rank)
    assert fake_cuda.set_device_calls == [rank]


def test_more_processes_than_gpus_is_a_clear_error(fake_cuda, monkeypatch):
    """Two processes on one GPU: rank 1 used to ask for cuda:1, which does not exist."""
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    with pytest.raises(ValueError, match=r"1 GPU.*--nproc_per_node 1.*--device cpu"):
        T._local_device(torch.device("cuda"))
    assert fake_cuda.set_device_calls == []
    assert T._local_device(torch.device("cpu")) == torch.device("cpu")   # CPU processes need no GPU


def test_an_empty_scaler_state_resumes_under_an_enabled_scaler(capsys):
    saved_without = torch.amp.GradScaler("cpu", enabled=False).state_dict()   # fp32 / bf16 checkpoints hold this
    assert saved_without == {}
    with pytest.raises(RuntimeError, match="empty"):                          # what torch does with it
        torch.amp.GradScaler("cpu", init_scale=2.0 ** 16).load_state_dict(saved_without)
    fresh = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)
    T.load_scaler_state(fresh, saved_without)
    assert fresh.get_scale() == 2.0 ** 16 and "without a loss scaler" in capsys.readouterr().out
    used = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)
    used.scale(torch.ones(()))
    used.update(2.0 ** 9)                                                     # a scale reached in training
    again = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)
    T.load_scaler_state(again, used.state_dict())
    assert again.get_scale() == 2.0 ** 9
    T.load_scaler_state(torch.amp.GradScaler("cpu", enabled=False), used.state_dict())   # fp16 -> fp32: ignored


def test_explicit_resume_of_an_fp32_checkpoint_under_fp16(smoke_data: Path, tmp_path, monkeypatch):
    """A run checkpointed in fp32 (a CPU), resumed with `--resume` where fp16 and a GradScaler are the default (a
    T4): fp16 autocast with the CPU's GradScaler stands in for the T4's."""
    kw = dict(profile="smoke", trunk="reveuler_rev", data_dir=smoke_data, out_dir=tmp_path / "run",
              train_tokens=6 * ONE_BATCH, ckpt_every=2, progress=False, device="cpu")
    T.train(T.TrainConfig(stop_after=2, **kw))
    monkeypatch.setattr(T, "amp_dtype", lambda device, precision="auto": torch.float16)
    s = T.train(T.TrainConfig(resume=True, **kw))
    assert s["steps"] == 6 and "float16" in s["device"]
