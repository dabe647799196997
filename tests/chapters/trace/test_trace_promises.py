"""The trace walk's own safety checks: the final weights-hash verification and the learning rate restored to the
one recorded at the step walked to (not just at step 0)."""
import pytest

from rev.chapters import trace as T
from test_trace import N_STEPS, recorded, same_weights

ODD_LR = 0.0123  # an LR no schedule would give: only a walk that reads the record can restore it


def test_rollback_restores_the_lr_recorded_at_that_step():
    model, opt, trace, snaps = recorded("adamw", lr_override={5: ODD_LR})
    assert [g["lr"] for g in opt.param_groups] != [ODD_LR]
    T.rollback(model, trace, 5, opt)
    assert [g["lr"] for g in opt.param_groups] == [ODD_LR] == trace.record(5).lrs
    T.rollback(model, trace, 3, opt)
    assert [g["lr"] for g in opt.param_groups] == trace.record(3).lrs != [ODD_LR]
    T.replay(model, trace, N_STEPS, opt)
    assert [g["lr"] for g in opt.param_groups] == trace.record(N_STEPS).lrs
    assert same_weights(model, snaps[N_STEPS][0])


def test_walk_that_misses_the_recorded_hash_is_refused():
    """A record that lost one tensor's difference still walks, but lands on other weights: the final hash check
    must refuse the result; without `verify` the damage would go unnoticed."""
    for verify in (True, False):
        model, opt, trace, snaps = recorded("adamw")
        trace.record(4).params.pop(next(iter(trace.record(4).params)))
        if verify:
            with pytest.raises(ValueError, match="do not match the recorded hash"):
                T.rollback(model, trace, 2, opt)
        else:
            T.rollback(model, trace, 2, opt, verify=False)
            assert not same_weights(model, snaps[2][0])
