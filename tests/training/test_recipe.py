"""The recipe that follows the batch: a warm-up with a floor in optimizer steps, and Adam's square-root rate rule
(saturating beyond a measured noise scale), as `plan_run` applies them to every run."""
import math

import pytest

from rev.core.optim import BETAS, WARMUP_FLOOR_STEPS, batch_ratio, peak_lr, warmup_steps
from rev.base.profiles import PROFILES, get_profile
from rev.training.loop import TrainConfig, plan_run


def test_the_floor_is_the_span_adams_second_moment_averages():
    assert WARMUP_FLOOR_STEPS == math.ceil(1 / (1 - BETAS[1])) == 20


def test_a_large_batch_warms_up_for_the_floor_not_for_its_few_token_counted_steps():
    cpu = get_profile("cpu")
    per_step = 143 * cpu.seq_len                          # run 3's batch on the cpu profile
    assert cpu.warmup_tokens // per_step == 2             # counted in tokens alone: two steps
    assert warmup_steps(cpu.warmup_tokens, per_step, 150) == WARMUP_FLOOR_STEPS
    assert warmup_steps(cpu.warmup_tokens, 16 * cpu.seq_len, 390) == 24   # run 1: its tokens give more than the floor
    assert warmup_steps(cpu.warmup_tokens, per_step, 12) == 12            # never longer than the run


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_profile_plans_its_runs_with_the_floor(profile):
    prof = get_profile(profile)
    big = 16 * prof.batch_size
    plan = plan_run(TrainConfig(profile=profile, batch_size=big, train_tokens=200 * big * prof.seq_len,
                                lr_scaling="sqrt"))
    assert plan.warmup_steps >= WARMUP_FLOOR_STEPS
    assert plan.lr == pytest.approx(prof.lr * 4)          # sqrt(16)


def test_the_square_root_rule_and_its_saturation_beyond_the_noise_scale():
    assert peak_lr(1e-3, 144, 16, "sqrt") == pytest.approx(3e-3)
    assert peak_lr(1e-3, 144, 16, "linear") == pytest.approx(9e-3)
    assert peak_lr(1e-3, 144, 16, "none") == 1e-3
    # a noise scale far above both batches changes nothing; one far below caps k near 1 + B_noise / base
    assert batch_ratio(144, 16, 1e9) == pytest.approx(9.0, rel=1e-6)
    assert batch_ratio(10_000, 16, 16.0) == pytest.approx(2.0 / (1 + 16 / 10_000))
    assert peak_lr(1e-3, 144, 16, "sqrt", noise_scale=16.0) < peak_lr(1e-3, 144, 16, "sqrt")


def test_a_run_given_the_measured_noise_scale_plans_the_saturated_rate():
    # cpu run 3: batch 143 against 16, run 1's B_noise at its end ~88 sequences: k = 6.5 / 1.62 ~ 4, rate ~ 2x, not 3x
    cpu = get_profile("cpu")
    kw = dict(profile="cpu", trunk="midpoint_rev", batch_size=143, train_tokens=150 * 143 * cpu.seq_len,
              lr_scaling="sqrt")
    plain, saturated = plan_run(TrainConfig(**kw)), plan_run(TrainConfig(**kw, noise_scale=88.0))
    assert plain.lr == pytest.approx(cpu.lr * math.sqrt(143 / 16))
    assert saturated.lr == pytest.approx(cpu.lr * math.sqrt((1 + 88 / 16) / (1 + 88 / 143)))
    assert 1.9 * cpu.lr < saturated.lr < 2.1 * cpu.lr
    assert saturated.min_lr == pytest.approx(cpu.min_lr * saturated.lr / cpu.lr)


@pytest.mark.parametrize("call, match", [
    (lambda: peak_lr(1e-3, 32, 16, "cubic"), "unknown lr_scaling"),
    (lambda: batch_ratio(32, 16, 0.0), "noise_scale must be a finite number > 0"),
    (lambda: warmup_steps(1000, 0, 10), "tokens_per_step"),
])
def test_bad_recipe_input_is_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()
