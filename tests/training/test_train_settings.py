"""Settings of the training loop measured where they act: at the optimizer step.

One short smoke run is watched through a global optimizer step pre-hook, which sees each step's learning
rates, weight-decay groups and the gradient the optimizer is about to apply (after clipping). The log alone
could not show these: it records what the loop computed, not what the optimizer used.
"""
import csv
import dataclasses

import pytest
import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from rev.training import loop as train_mod
from rev.data.corpus import prepare_profile
from rev.core.optim import adamw, lr_at
from rev.base.profiles import get_profile
from rev.training.loop import TrainConfig, plan_run, train

CLIP = 0.05  # far below the smoke run's gradient norms, so every step is clipped
SMOKE = dataclasses.replace(get_profile("smoke"), grad_clip=CLIP)
STEPS, EVAL_EVERY = 12, 5


@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    """(plan, log rows, one record per optimizer step) of a 12-step smoke run with a small clip."""
    root = tmp_path_factory.mktemp("settings")
    prepare_profile(SMOKE, root / "data", progress=False)
    seen: list[dict] = []

    def hook(opt, args, kwargs):
        params = [p for g in opt.param_groups for p in g["params"] if p.grad is not None]
        seen.append({"lrs": [g["lr"] for g in opt.param_groups],
                     "decay": [(g["weight_decay"], {p.dim() >= 2 for p in g["params"]}) for g in opt.param_groups],
                     "grad_norm": float(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params])))})

    cfg = TrainConfig(profile="smoke", data_dir=root / "data", out_dir=root / "run", progress=False,
                      train_tokens=STEPS * SMOKE.batch_size * SMOKE.seq_len, eval_every=EVAL_EVERY, ckpt_every=100,
                      warmup_floor=1)   # the warm-up its tokens give (8 steps), so the decay after it is seen too
    mp = pytest.MonkeyPatch()
    mp.setattr(train_mod, "get_profile", lambda name: SMOKE)
    handle = register_optimizer_step_pre_hook(hook)
    try:
        train(cfg)
        plan = plan_run(cfg)
    finally:
        handle.remove()
        mp.undo()
    with open(root / "run" / "log.csv") as f:
        rows = list(csv.DictReader(f))
    return plan, rows, seen


def test_every_step_applies_the_scheduled_lr_with_warmup(watched):
    plan, rows, seen = watched
    assert len(seen) == len(rows) == plan.steps == STEPS and plan.warmup_steps > 2
    for n, s in enumerate(seen):
        want = lr_at(n, plan.steps, plan.warmup_steps, plan.lr, plan.min_lr)
        assert s["lrs"] == [want] * len(s["lrs"]) and float(rows[n]["lr"]) == want, n
    used = [s["lrs"][0] for s in seen]
    assert used[0] == pytest.approx(plan.lr / plan.warmup_steps)  # warm-up starts low ...
    assert used[plan.warmup_steps - 1] == pytest.approx(plan.lr)  # ... reaches the peak ...
    assert used[-1] < used[plan.warmup_steps]                      # ... and then decays


def test_gradients_are_clipped_before_the_step(watched):
    _, rows, seen = watched
    logged = [float(r["grad_norm"]) for r in rows]  # the norm before clipping
    assert min(logged) > 2 * CLIP, "the clip would not bite: lower CLIP"
    assert all(s["grad_norm"] <= CLIP * (1 + 1e-4) for s in seen), [s["grad_norm"] for s in seen]


def test_weight_decay_on_matrices_only(watched):
    _, _, seen = watched
    assert seen[0]["decay"] == [(SMOKE.weight_decay, {True}), (0.0, {False})]


def test_validation_on_the_eval_cadence_and_at_the_end(watched):
    _, rows, _ = watched
    evaluated = [int(r["step"]) for r in rows if r["val_loss"] != ""]
    assert evaluated == [EVAL_EVERY - 1, 2 * EVAL_EVERY - 1, STEPS - 1]


def test_adamw_decays_matrices_and_leaves_vectors_alone():
    """With zero gradients, one AdamW step shrinks decayed weights by exactly (1 - lr * wd) and moves nothing
    else."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))
    before = [p.detach().clone() for p in model.parameters()]
    opt = adamw(model, lr=0.1, weight_decay=0.5)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    for p, b in zip(model.parameters(), before):
        torch.testing.assert_close(p.detach(), b * (1 - 0.05) if p.dim() >= 2 else b, rtol=1e-6, atol=0)
