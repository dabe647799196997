"""Loss and parameter gradients of a small GPT on a fixed random batch, and the worst relative gap between two
sets of gradients: what the chunk and slice tests compare a memory option against the model without it."""
import torch


def loss_and_grads(model, batch: int, autocast: bool = False) -> tuple[float, dict[str, torch.Tensor]]:
    """One forward and backward of `model` on `batch` fixed random sequences (bf16 autocast if asked)."""
    V, T = model.cfg.vocab_size, model.cfg.seq_len
    idx = torch.randint(0, V, (batch, T), generator=torch.Generator().manual_seed(1))
    tgt = torch.randint(0, V, (batch, T), generator=torch.Generator().manual_seed(2))
    model.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        loss = model(idx, tgt)
    loss.backward()
    return loss.item(), {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def worst_relative(a: dict, b: dict) -> float:
    """The largest relative norm gap |a - b| / |b| over the parameters."""
    return max(((a[n] - b[n]).norm() / b[n].norm()).item() for n in b)
