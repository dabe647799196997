"""What a step costs and what a comparison shows: memory, batch slices, the max-batch search, benches, statistics.

`memory` (a training step's peak, measured), `ledger` (where a sequence's memory goes, predicted), `slicing` (the
batch-slice policy: `auto` resolved here and nowhere else), `search` (the largest-that-fits search),
`maxbatch` (the largest batch under a budget), `bench` (every trunk side by side), `stats` (intervals and their
bootstraps), `noise_scale` (the gradient noise scale). Training uses this room; this room never imports training.
Imports `rev.base` and `rev.core` only.
"""
