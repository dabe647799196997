"""How the residual stream is held and added to.

A trunk keeps a running state `x` and adds block outputs to it: `x <- x + c * f(.)`. Inverting the trunk
subtracts the same increment again, so the stream's arithmetic decides how exact the inversion is:

* `fp32`  -- the stream is float32. `(x + d) - d != x` in general: every add/subtract rounds, and the
             rounding errors of many layers accumulate when the trunk is walked backward.
* `fp64`  -- the stream is float64. Rounding still happens, but about 2^29 times more finely.
* `fixed` -- the stream is an int64 fixed-point number with 32 fractional bits. The increment
             `c * f(.)` is rounded to the grid once; integer add and subtract are exact, so inversion is
             bit-exact whenever the block is recomputed bit-identically. Why 32 fractional bits: values up
             to |x| < 2^30 fit (far above any activation a layer-normed GPT produces), and the grid step
             2^-32 ~ 2.3e-10 is ~500x finer than float32's spacing at 1.0, so rounding to the grid adds
             nothing visible to the forward pass. A value that does not fit -- NaN, inf (an fp16
             overflow, say), |x| >= 2^30 -- becomes `FixedStream.INVALID`, which every later add or
             subtract keeps and `decode` turns into NaN: the loss then says so, on every device. (Casting
             NaN or inf to int64 directly is undefined: CPU and CUDA give different finite integers, so an
             overflow would turn finite and slip past every NaN check.) This costs a few elementwise ops
             per add, on the device, and never a host sync.

Blocks always compute in the model's compute dtype (what the parameters and autocast say); a stream only
decides how the *sum* is stored, and never stores it below the compute dtype: a float stream is promoted to
the dtype of what it adds up (`at_least`), so `model.double()` computes in float64 on the `fp32` stream too
(`fp64` and `fixed` keep their meaning at every dtype). Each stream has two faces with identical values:

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

    def at_least(self, dtype: torch.dtype) -> "Stream":
        """This stream storing its sums in no less than `dtype` (as `torch.promote_types` promotes), so the
        stream of a `.double()` model is float64 even when it is called `fp32`."""
        wider = torch.promote_types(self.dtype, dtype)
        return self if wider == self.dtype else Stream(self.name, wider)

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

    def sub_(self, s: Tensor, c: Tensor, coef: float) -> Tensor:
        """`sub` written over `s` (the same values), for a state nothing reads any more."""
        return s.sub_(self.increment(c, coef))

    def encode_diff(self, x: Tensor) -> Tensor:
        """Differentiable `encode` onto the carrier (used by stored trunks)."""
        return x.to(self.carrier_dtype)

    def add_diff(self, s: Tensor, c: Tensor, coef: float) -> Tensor:
        """Differentiable `s + coef * c` on carrier tensors, same values as `add`."""
        return s + c.to(s.dtype) * coef

    def __repr__(self) -> str:
        return f"Stream({self.name})"


class FixedStream(Stream):
    """int64 fixed point with `frac_bits` fractional bits; add/sub are exact integer operations.

    Valid grid values k satisfy |k| < `LIMIT` = 2^62 (|x| < 2^30 at 32 fractional bits). Anything else -- NaN,
    inf, too large -- is stored as `INVALID` (-2^63, outside the valid range) and stays `INVALID` through every
    add and subtract, whatever it is combined with (plain integer arithmetic would not: INVALID + INVALID wraps
    to 0); `decode` gives NaN for it."""

    LIMIT = 2 ** 62
    INVALID = -2 ** 63

    def __init__(self, frac_bits: int = 32):
        super().__init__("fixed", torch.int64)
        self.frac_bits = frac_bits
        self.scale = float(2 ** frac_bits)

    @property
    def carrier_dtype(self) -> torch.dtype:
        return torch.float64  # grid values k / 2^32 with |k| < 2^53 are exact in float64

    def at_least(self, dtype: torch.dtype) -> "Stream":
        return self  # exact at every compute dtype

    def _to_grid(self, x: Tensor) -> Tensor:
        k = torch.round(x.to(torch.float64) * self.scale)
        # only in-range values are cast: NaN/inf/huge -> int64 is undefined and differs between devices
        return torch.where(k.abs() < self.LIMIT, k, float(self.INVALID)).to(torch.int64)

    def _invalid(self, s: Tensor, inc: Tensor) -> Tensor:
        """Where `s` or `inc` is INVALID, before they are combined."""
        return (s == self.INVALID) | (inc == self.INVALID)

    def _checked(self, out: Tensor, bad: Tensor) -> Tensor:
        """`out` (a sum of two valid or INVALID grid values) with INVALID wherever an input was INVALID or the
        sum left the valid range. Two valid values sum to less than 2^63 in magnitude: no wrap-around."""
        return out.masked_fill_(bad | (out.abs() >= self.LIMIT), self.INVALID)

    def encode(self, x: Tensor) -> Tensor:
        return self._to_grid(x)

    def decode(self, s: Tensor, dtype: torch.dtype) -> Tensor:
        return (s.to(torch.float64) / self.scale).masked_fill_(s == self.INVALID, float("nan")).to(dtype)

    def increment(self, c: Tensor, coef: float) -> Tensor:
        return self._to_grid(c.to(torch.float64) * coef)

    def add(self, s: Tensor, c: Tensor, coef: float) -> Tensor:
        inc = self.increment(c, coef)
        return self._checked(s + inc, self._invalid(s, inc))

    def sub(self, s: Tensor, c: Tensor, coef: float) -> Tensor:
        inc = self.increment(c, coef)
        return self._checked(s - inc, self._invalid(s, inc))

    def sub_(self, s: Tensor, c: Tensor, coef: float) -> Tensor:
        inc = self.increment(c, coef)
        bad = self._invalid(s, inc)
        return self._checked(s.sub_(inc), bad)

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

