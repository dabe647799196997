"""A token-budgeted run: `python -m rev train`, and the GPU acceptance check that trains.

`loop` (`TrainConfig`, `train`: the loop, then the bookkeeping; resume; evaluation), `checkpoint` (ckpt.pt
written atomically and read back; `load_model`), `gpucheck` (`python -m rev
gpucheck`: the CUDA path on a real GPU, one table) and `device_checks` (its rows that check the reversible trunk
itself on the device: gradients against the stored twin, loss head, GradScaler, fixed stream, memory, resume). Imports `rev.measure`, `rev.data`, `rev.base`, `rev.core`.
"""
