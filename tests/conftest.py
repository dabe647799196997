"""Test-session settings.

The suite runs as two single-threaded workers (`pytest -n 2`): nearly every test works on tiny tensors, where
intra-op threads cost more in synchronisation than they gain, and two processes keep both cores busy."""
import torch

torch.set_num_threads(1)
