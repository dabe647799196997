"""How the residual stream is held and added to.

A trunk keeps a running state `x` and adds block outputs to it: `x <- x + c * f(.)`. Inverting the trunk
subtracts the same increment again, so the stream's arithmetic decides how exact the inversion is:

* `fp32`  -- the stream is float32. `(x + d) - d != x` in general: every add/subtract rounds, and the
             rounding errors of many layers accumulate when the trunk is walked backward.
* `fp64`  -- the stream is float64. Rounding still happens, but about 2^29 times more finely.
* `fixed` -- the stream is an int64 fixed-point number with 32 fractional bits (Q31.32). The increment
             `c * f(.)` is rounded to the grid once; integer add and subtract are exact, so inversion is
             bit-exact whenever the block is recomputed bit-identically. Why Q31.32: the integer part
             allows |x| < 2^31, far above any activation a layer-normed GPT produces, so overflow is
             impossible in practice; the grid step 2^-32 ~ 2.3e-10 is ~500x finer than float32's spacing
             at 1.0, so rounding to the grid adds nothing visible to the forward pass.

Blocks always compute in the model's compute dtype (what the parameters and autocast say); a stream only
decides how the *sum* is stored. Each stream has two faces with identical values:

* exact ops (`encode`, `decode`, `add`, `sub`) on the storage tensors, used without autograd by the
  memory-free reversible trunks, and
* a differentiable op (`add_diff`) on a floating "carrier" used by the stored (ordinary autograd) trunks.
  For `fixed`, the carrier is float64 holding grid values exactly and the rounding is treated as identity
  in backward (a straight-through estimator), so a stored twin computes the same numbers as the
  reversible trunk.
"""
from __future__ import annotations

import torch
from torch import Tensor


class Stream:
    """Floating-point stream stored in `dtype`."""

    name: str = "fp32"

    def __init__(self, name: str, dtype: torch.dtype):
        self.name = name
        self.dtype = dtype

    @property
    def carrier_dtype(self) -> torch.dtype:
        """Float dtype that holds this stream's values under autograd."""
        return self.dtype

    def encode(self, x: Tensor) -> Tensor:
        return x.to(self.dtype)

    def decode(self, s: Tensor, dtype: torch.dtype) -> Tensor:
        return s.to(dtype)

    def increment(self, c: Tensor, coef: float) -> Tensor:
        # The increment is formed in the stream's dtype, the same way in forward and inverse, so an
        # exact stream can subtract exactly what it added.
        return c.to(self.dtype) * coef

    def add(self, s: Tensor, c: Tensor, coef: float) -> Tensor:
        return s + self.increment(c, coef)

    def sub(self, s: Tensor, c: Tensor, coef: float) -> Tensor:
        return s - self.increment(c, coef)

    def encode_diff(self, x: Tensor) -> Tensor:
        """Differentiable `encode` onto the carrier (used by stored trunks)."""
        return x.to(self.carrier_dtype)

    def add_diff(self, s: Tensor, c: Tensor, coef: float) -> Tensor:
        """Differentiable `s + coef * c` on carrier tensors, same values as `add`."""
        return s + c.to(s.dtype) * coef

    def __repr__(self) -> str:
        return f"Stream({self.name})"


class FixedStream(Stream):
    """int64 fixed point with `frac_bits` fractional bits; add/sub are exact integer operations."""

    def __init__(self, frac_bits: int = 32):
        super().__init__("fixed", torch.int64)
        self.frac_bits = frac_bits
        self.scale = float(2 ** frac_bits)

    @property
    def carrier_dtype(self) -> torch.dtype:
        return torch.float64  # grid values k / 2^32 with |k| < 2^53 are exact in float64

    def _to_grid(self, x: Tensor) -> Tensor:
        return torch.round(x.to(torch.float64) * self.scale).to(torch.int64)

    def encode(self, x: Tensor) -> Tensor:
        return self._to_grid(x)

    def decode(self, s: Tensor, dtype: torch.dtype) -> Tensor:
        return (s.to(torch.float64) / self.scale).to(dtype)

    def increment(self, c: Tensor, coef: float) -> Tensor:
        return self._to_grid(c.to(torch.float64) * coef)

    def add_diff(self, s: Tensor, c: Tensor, coef: float) -> Tensor:
        inc = c.to(torch.float64) * coef
        on_grid = torch.round(inc * self.scale) / self.scale
        # straight-through: the value is rounded to the grid, the gradient passes as if it were not
        return s + inc + (on_grid - inc).detach()

    def encode_diff(self, x: Tensor) -> Tensor:
        # grid value, identity gradient
        x64 = x.to(torch.float64)
        return x64 + (torch.round(x64 * self.scale) / self.scale - x64).detach()


STREAMS = ("fp32", "fp64", "fixed")


def get_stream(name: str) -> Stream:
    """The stream called `name` (one of `STREAMS`)."""
    if name == "fp32":
        return Stream("fp32", torch.float32)
    if name == "fp64":
        return Stream("fp64", torch.float64)
    if name == "fixed":
        return FixedStream()
    raise ValueError(f"unknown stream {name!r}: choose one of {', '.join(STREAMS)}")

