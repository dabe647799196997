"""A token-budgeted run: `python -m rev train`, and the GPU acceptance check that trains.

`loop` (`TrainConfig`, `train`: the loop, then the bookkeeping; resume; evaluation), `gpucheck` (`python -m rev
gpucheck`: the CUDA path on a real GPU, one table). Imports `rev.measure`, `rev.data`, `rev.base`, `rev.core`.
"""
