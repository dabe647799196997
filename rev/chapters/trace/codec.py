"""Notebook 10 (fine-tune trace and rollback): the bit-exact codec of one tensor's change in one step.

A float difference `d = fl(theta_{t+1} - theta_t)` alone is not enough: the subtraction rounds whenever the
two values are not within a factor of two of each other (Sterbenz's lemma), e.g. when a small weight changes
sign, and then `fl(theta_{t+1} - d)` is a few ulps away from `theta_t`. So a change is kept as

* the float difference `d`, in the tensor's dtype (what a naive trace keeps), and
* two sparse corrections, `r- = k(theta_t) - k(fl(theta_{t+1} - d))` and
  `r+ = k(theta_{t+1}) - k(fl(theta_t + d))`, modulo 2^bits,

where `k` is the *order key* of a float: its bit pattern read as an unsigned integer with the bits of
negative numbers flipped, so that integers sort exactly like floats and a key difference counts the
representable values in between (ulps). Undo is `theta_t = k^-1(k(fl(theta_{t+1} - d)) + r-)`, redo is
`theta_{t+1} = k^-1(k(fl(theta_t + d)) + r+)`. Both are exact for every bit pattern (NaN, inf and -0.0
included): IEEE addition and subtraction are deterministic, `k` is a bijection, and the correction is
modular integer arithmetic. The corrections are non-zero only where the float arithmetic rounded (a few
elements in a thousand per step in fine-tuning) and are stored as (position, value) pairs.

Why not the ulp difference `k(theta_{t+1}) - k(theta_t)` alone? It is exact too and a little smaller, but it
is logarithmic: applied to a state that is already off (walking on past a missing or lossy step) it
multiplies the error near zero, where ulps are tiny. The float difference moves a value by the same amount
whatever the state, so a damaged trace still walks back gracefully; the corrections are applied only while
the walk is on the recorded states. (The XOR of bit patterns has the same flaw.) Optimizer state is kept as
ulp differences (`encode_ulp`): exact, and only ever walked exactly.

Compression: every kept array is split into byte planes (all lowest bytes, then the next, ...); a plane
that is constant is stored as one byte, one that is noise (entropy above 7.7 bits/byte: the low bytes of an
update) as it is, the rest deflated with zlib. `storage.compression_ablation` measures the alternatives.
"""
from __future__ import annotations

import math
import struct
import zlib
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from torch import Tensor

# float dtype -> same-width integer dtype, to read and write bit patterns
INT_OF = {torch.float64: torch.int64, torch.float32: torch.int32,
           torch.bfloat16: torch.int16, torch.float16: torch.int16}
_UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_SINT_OF_SIZE = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}
_DTYPES = {str(d).removeprefix("torch."): d for d in
           (torch.float64, torch.float32, torch.bfloat16, torch.float16,
            torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def dtype_from(name: str) -> torch.dtype:
    if name not in _DTYPES:
        raise ValueError(f"cannot restore dtype {name!r}")
    return _DTYPES[name]


def bits_of(t: Tensor) -> np.ndarray:
    """The bit patterns of `t` as a flat unsigned numpy array (a copy for non-CPU tensors)."""
    t = t.detach()
    if t.dtype in INT_OF:
        t = t.view(INT_OF[t.dtype])
    elif t.dtype not in _DTYPES.values():
        raise ValueError(f"cannot trace dtype {t.dtype}: floats and integers only")
    arr = t.cpu().contiguous().numpy().reshape(-1)
    return arr.view(_UINT_OF_SIZE[arr.dtype.itemsize])


def _write_bits(t: Tensor, bits: np.ndarray) -> None:
    """Overwrite `t` in place with the bit patterns `bits` (same layout as `bits_of`)."""
    signed = torch.from_numpy(np.ascontiguousarray(bits).view(_SINT_OF_SIZE[bits.dtype.itemsize]))
    target = t.detach()
    target = target.view(INT_OF[t.dtype]) if t.dtype in INT_OF else target
    target.copy_(signed.reshape(t.shape))


def _tensor_from_bits(bits: np.ndarray, dtype: torch.dtype, shape: Sequence[int]) -> Tensor:
    signed = torch.from_numpy(np.ascontiguousarray(bits).view(_SINT_OF_SIZE[bits.dtype.itemsize]).copy())
    out = signed.view(dtype) if dtype in INT_OF else signed.to(dtype)
    return out.reshape(tuple(shape))


def _order_key(u: np.ndarray, is_float: bool) -> np.ndarray:
    """Unsigned integers that sort like the floats whose bits are `u` (identity-like for integer tensors).

    Positive floats get their top bit set, negative floats have all bits flipped; integers (two's
    complement) only need their sign bit flipped. Both maps are involution-free bijections, undone below.
    """
    nbits = u.dtype.itemsize * 8
    top_bit = u.dtype.type(1 << (nbits - 1))
    if not is_float:
        return u ^ top_bit
    all_ones = u.dtype.type((1 << nbits) - 1)
    negative = u >> u.dtype.type(nbits - 1)                       # 0 or 1
    return u ^ ((negative * all_ones) | top_bit)


def _from_order_key(k: np.ndarray, is_float: bool) -> np.ndarray:
    nbits = k.dtype.itemsize * 8
    top_bit = k.dtype.type(1 << (nbits - 1))
    if not is_float:
        return k ^ top_bit
    all_ones = k.dtype.type((1 << nbits) - 1)
    positive = k >> k.dtype.type(nbits - 1)                       # the key's top bit marks a positive float
    return k ^ (((1 - positive) * all_ones) | top_bit)


def zigzag_code(d: np.ndarray) -> np.ndarray:
    """Modular difference (unsigned) -> zigzag code, so that small moves of either sign are small numbers."""
    nbits = d.dtype.itemsize * 8
    sign = d.view(_SINT_OF_SIZE[d.dtype.itemsize]) >> (nbits - 1)     # arithmetic shift: 0 or -1
    return (d << d.dtype.type(1)) ^ sign.view(d.dtype)


def _unzigzag(z: np.ndarray) -> np.ndarray:
    all_ones = z.dtype.type((1 << (z.dtype.itemsize * 8)) - 1)
    return (z >> z.dtype.type(1)) ^ ((z & z.dtype.type(1)) * all_ones)


def _plane_entropy(counts: np.ndarray) -> float:
    """Shannon entropy in bits per byte, from a byte histogram."""
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log2(p)).sum())


# A byte plane this close to 8 bits/byte (the low bytes of an update are rounding noise) is stored as is:
# deflating it would cost time for a gain of a few per cent at most.
_RAW_PLANE_ENTROPY = 7.7
_SMALL = 1024            # arrays below this many bytes are stored raw: compressing them costs more than it saves
_RAW, _PLANES = 0, 1                     # layouts
_PLANE_RAW, _PLANE_ZLIB, _PLANE_CONST = 0, 1, 2


def pack_bits(values: np.ndarray, level: int) -> bytes:
    """Byte planes (all lowest bytes first), each deflated with zlib unless it is constant or noise.

    Layout: one byte, _RAW (then the array's bytes; small arrays, or level 0) or _PLANES (then per plane: a
    flag byte, u32 length, the bytes).
    """
    values = np.ascontiguousarray(values).reshape(-1)
    if values.nbytes < _SMALL or level == 0:
        return bytes([_RAW]) + values.tobytes()
    size = values.dtype.itemsize
    planes = np.ascontiguousarray(values.view(np.uint8).reshape(-1, size).T)
    out = [bytes([_PLANES])]
    for plane in planes:
        counts = np.bincount(plane, minlength=256)
        if counts.max() == plane.size:
            flag, body = _PLANE_CONST, plane[:1].tobytes()
        elif _plane_entropy(counts) > _RAW_PLANE_ENTROPY:
            flag, body = _PLANE_RAW, plane.tobytes()
        else:
            flag, body = _PLANE_ZLIB, zlib.compress(plane.tobytes(), level)
        out += [struct.pack("<BI", flag, len(body)), body]
    return b"".join(out)


def _unpack(blob: bytes, itemsize: int, numel: int) -> np.ndarray:
    dtype = _UINT_OF_SIZE[itemsize]
    try:
        if blob[:1] == bytes([_RAW]):
            if len(blob) - 1 != itemsize * numel:
                raise ValueError("size mismatch")
            return np.frombuffer(blob, dtype=np.uint8, offset=1).view(dtype).copy()
        out = np.empty((numel, itemsize), dtype=np.uint8)
        pos = 1
        for i in range(itemsize):
            flag, n = struct.unpack_from("<BI", blob, pos)
            body = blob[pos + 5:pos + 5 + n]
            pos += 5 + n
            if flag == _PLANE_CONST:
                out[:, i] = body[0]
            else:
                out[:, i] = np.frombuffer(zlib.decompress(body) if flag == _PLANE_ZLIB else body, dtype=np.uint8)
        if pos != len(blob):
            raise ValueError("trailing bytes")
    except (struct.error, zlib.error, ValueError, IndexError) as e:
        raise ValueError(f"a trace entry does not decode ({e}): the trace is corrupted") from e
    return out.view(dtype).reshape(-1)


def _pack_sparse(values: np.ndarray, level: int) -> tuple[bytes, int]:
    """A mostly-zero array as (positions, values), both packed: b"" when all zero. Returns (bytes, raw bytes)."""
    nz = np.flatnonzero(values)
    if nz.size == 0:
        return b"", 0
    pos = nz.astype(np.uint32 if values.size < 2 ** 32 else np.uint64)
    gaps = np.diff(pos, prepend=pos.dtype.type(0))             # sorted positions: small gaps compress well
    a, b = pack_bits(gaps, level), pack_bits(zigzag_code(values[nz]), level)
    head = struct.pack("<BQQ", pos.dtype.itemsize, nz.size, len(a))
    return head + a + b, nz.size * (pos.dtype.itemsize + values.dtype.itemsize)


def _unpack_sparse(blob: bytes, itemsize: int, numel: int) -> np.ndarray:
    out = np.zeros(numel, dtype=_UINT_OF_SIZE[itemsize])
    if not blob:
        return out
    try:
        pos_size, count, n_a = struct.unpack_from("<BQQ", blob, 0)
    except struct.error as e:
        raise ValueError(f"a trace correction cannot be decoded ({e}): the trace is corrupted") from e
    off = struct.calcsize("<BQQ")
    gaps = _unpack(blob[off:off + n_a], pos_size, count)
    pos = np.cumsum(gaps, dtype=np.uint64)
    if count and int(pos[-1]) >= numel:
        raise ValueError("a trace correction points outside its tensor: the trace is corrupted")
    out[pos.astype(np.int64)] = _unzigzag(_unpack(blob[off + n_a:], itemsize, count))
    return out


@dataclass
class Blob:
    """One tensor's change in one step, compressed.

    kind "diff": `data` is the float difference after - before in dtype `dtype` (the parameter's own for
    an exact or f32diff record, bfloat16 for bf16diff); `res_back` and `res_fwd` are the sparse ulp
    corrections that make undo and redo exact, None when not kept (a lossy record).
    kind "ulp": `data` is the ulp difference itself (optimizer state and integer tensors; always exact).
    """
    kind: str
    dtype: str
    shape: tuple[int, ...]
    data: bytes
    raw_nbytes: int                   # bytes of the uncompressed representation
    res_back: bytes | None = None
    res_fwd: bytes | None = None

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def exact(self) -> bool:
        return self.kind == "ulp" or (self.res_back is not None and self.res_fwd is not None)

    @property
    def nbytes(self) -> int:
        """Bytes kept (compressed)."""
        return len(self.data) + len(self.res_back or b"") + len(self.res_fwd or b"")


def state_keys(t: Tensor) -> np.ndarray:
    return _order_key(bits_of(t), t.dtype.is_floating_point)


def encode_ulp(before: Tensor, after: Tensor, level: int = 1) -> Blob | None:
    """The ulp difference k(after) - k(before), modulo 2^bits (exact); None if bit-identical."""
    _same_kind(before, after)
    d = state_keys(after) - state_keys(before)                               # modular: wraps, never rounds
    if not d.any():
        return None
    z = zigzag_code(d)
    return Blob("ulp", dtype_name(after.dtype), tuple(after.shape), pack_bits(z, level), z.nbytes)


def encode_exact(before: Tensor, after: Tensor, level: int = 1) -> Blob | None:
    """A weight update kept exactly: the float difference plus the corrections for the bits it loses.

    Integer tensors get the ulp difference. None if `before` and `after` are bit-identical.
    """
    _same_kind(before, after)
    if not after.dtype.is_floating_point:
        return encode_ulp(before, after, level)
    before, after = before.detach(), after.detach()
    if bit_equal(before, after):
        return None
    diff = after - before                                         # rounds where Sterbenz does not hold
    # the corrections: how many ulps the float arithmetic misses by, undoing and redoing (mostly zero)
    back, back_raw = _pack_sparse(state_keys(before) - state_keys(after - diff), level)
    ahead, ahead_raw = _pack_sparse(state_keys(after) - state_keys(before + diff), level)
    bits = bits_of(diff)
    return Blob("diff", dtype_name(diff.dtype), tuple(diff.shape), pack_bits(bits, level),
                bits.nbytes + back_raw + ahead_raw, res_back=back, res_fwd=ahead)


def _same_kind(before: Tensor, after: Tensor) -> None:
    if before.dtype != after.dtype or before.shape != after.shape:
        raise ValueError(f"a traced tensor changed to {after.dtype}{tuple(after.shape)}")


def _shift_keys(t: Tensor, d: np.ndarray) -> None:
    """Move every element of `t` by d ulps (modular), in place."""
    is_float = t.dtype.is_floating_point
    _write_bits(t, _from_order_key(_order_key(bits_of(t), is_float) + d, is_float))


def apply_exact(t: Tensor, blob: Blob, direction: int, corrections: bool = True) -> None:
    """Move `t` in place by a kept change: direction -1 undoes the step, +1 redoes it.

    `corrections=False` applies the float difference alone (what a walk does once it is off the recorded
    states: a correction only means something on the exact state it was computed for).
    """
    if blob.kind == "ulp":
        d = _unzigzag(_unpack(blob.data, t.element_size(), t.numel()))
        _shift_keys(t, d if direction > 0 else (0 - d).astype(d.dtype))
        return
    dtype = dtype_from(blob.dtype)
    diff = _tensor_from_bits(_unpack(blob.data, dtype.itemsize, blob.numel), dtype, blob.shape)
    diff = diff.to(t.device, t.dtype)
    with torch.no_grad():
        t.sub_(diff) if direction < 0 else t.add_(diff)
    res = blob.res_back if direction < 0 else blob.res_fwd
    if corrections and res:
        _shift_keys(t, _unpack_sparse(res, t.element_size(), t.numel()))


def ulp_distance(a: Tensor, b: Tensor) -> np.ndarray:
    """Signed number of representable values from a to b, elementwise (int64, modulo 2^64)."""
    is_float = a.dtype.is_floating_point
    ka = _order_key(bits_of(a), is_float).astype(np.uint64)
    kb = _order_key(bits_of(b), is_float).astype(np.uint64)
    return (kb - ka).view(np.int64)



def _as_bits(t: Tensor) -> Tensor:
    """A float tensor viewed as integers of its width, so equality means equal bit patterns (NaN == NaN)."""
    return t.detach().view(INT_OF[t.dtype]) if t.dtype in INT_OF else t.detach()


def bit_equal(a: Tensor, b: Tensor) -> bool:
    return torch.equal(_as_bits(a), _as_bits(b))


def bitwise_equal(a: Tensor, b: Tensor) -> Tensor:
    """Elementwise: True where the bit patterns agree."""
    return _as_bits(a) == _as_bits(b)
