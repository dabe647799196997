"""Put this folder on PYTHONPATH, with `REV_KILL_AFTER_CHECKPOINT=<run folder name>`, and every Python process
started with it (a workbook's kernels included) dies by SIGKILL right after that run writes a checkpoint: no
clean-up runs, as when a Colab session disconnects. A test interrupts a notebook at a known point this way,
instead of racing a timer, and the training loop carries no hook for it."""
import os

_RUN = os.environ.get("REV_KILL_AFTER_CHECKPOINT")
if _RUN:
    import signal

    from rev.training import loop

    _save = loop.save_checkpoint

    def _save_then_die(path, state):
        _save(path, state)
        if path.parent.name == _RUN:
            os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))

    loop.save_checkpoint = _save_then_die
