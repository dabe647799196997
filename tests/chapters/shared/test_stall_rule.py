"""The stall rule (`run_log.run_start(...).stalled`) on two written logs: one that sits on the context-free line
after a burst of large early steps, one that passes through the band on its way down."""
import csv

import numpy as np

from rev.chapters.shared.run_log import LOG_FIELDS, PLATEAU_NATS, run_start

CONTEXT_FREE = 5.78


def _write(folder, losses, grad_norms, warmup):
    folder.mkdir()
    peak = 6e-3
    with open(folder / "log.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=LOG_FIELDS)
        w.writeheader()
        for step, (loss, norm) in enumerate(zip(losses, grad_norms)):
            lr = peak * min(1.0, (step + 1) / warmup)
            w.writerow({k: "" for k in LOG_FIELDS} | {"step": step, "tokens": (step + 1) * 1000, "loss": loss,
                                                        "lr": lr, "grad_norm": norm})
    return folder


def test_a_run_that_sits_on_the_line_is_stalled_and_one_passing_through_is_not(tmp_path):
    steps = 150
    rng = np.random.default_rng(0)
    noise = 0.02 * rng.standard_normal(steps)
    # stalled: down to the line in 10 steps, sits there until step 70, then learns
    sits = np.concatenate([np.linspace(7.6, CONTEXT_FREE, 10), np.full(60, CONTEXT_FREE),
                           np.linspace(CONTEXT_FREE, 4.5, steps - 70)]) + noise
    norms = np.full(steps, 1.6)
    norms[2] = 19.2
    stalled = run_start(_write(tmp_path / "stalled", sits, norms, warmup=2), CONTEXT_FREE)
    # healthy: falls steadily through the band
    falls = np.linspace(7.6, 2.5, steps) + noise
    healthy = run_start(_write(tmp_path / "healthy", falls, np.full(steps, 1.6), warmup=20), CONTEXT_FREE)

    assert stalled.stalled and stalled.plateau_steps >= 55 and stalled.warmup_steps == 2
    assert stalled.max_grad_norm == 19.2 and stalled.max_grad_step == 2
    assert not healthy.stalled and healthy.plateau_steps <= 2 * PLATEAU_NATS / (5.1 / steps) + 10
    assert healthy.warmup_steps == 20


def test_the_early_spike_is_measured_against_the_whole_runs_median_norm(tmp_path):
    """Large norms through the first quarter (4.0, one spike of 19.2), 1.0 after: the run's median is 1.0, the
    first quarter's 4.0. The spike is 19x the run's median, not 5x the early steps'."""
    steps = 150
    norms = np.where(np.arange(steps) < steps // 4, 4.0, 1.0)
    norms[2] = 19.2
    sits = np.concatenate([np.linspace(7.6, CONTEXT_FREE, 10), np.full(60, CONTEXT_FREE),
                           np.linspace(CONTEXT_FREE, 4.5, steps - 70)])
    run = _write(tmp_path / "stalled", sits, norms, warmup=2)
    st = run_start(run, CONTEXT_FREE)
    assert st.median_grad_norm == 1.0 and st.max_grad_norm == 19.2
    assert st.max_grad_step == 2 and round(st.max_grad_norm / st.median_grad_norm) == 19   # not 5x
