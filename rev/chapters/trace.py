"""An exact trace of fine-tuning, and the walk back along it.

A fine-tuning run is irreversible only because its trace is thrown away. `TraceRecorder` hooks an optimizer
(any `torch.optim.Optimizer`) and keeps, for every step, what is needed to undo it bit for bit;
`rollback` walks the weights (and, if asked, the optimizer state) back to any recorded step and `replay`
walks forward again.

The exact representation
------------------------
A float difference `d = fl(theta_{t+1} - theta_t)` alone is not enough: the subtraction rounds whenever the
two values are not within a factor of two of each other (Sterbenz's lemma), e.g. when a small weight changes
sign, and then `fl(theta_{t+1} - d)` is a few ulps away from `theta_t`. So each step keeps, per parameter
tensor that changed,

* the float difference `d`, in the parameter's dtype (what a naive trace keeps), and
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
the walk is on the recorded states. (The XOR of bit patterns has the same flaw.)

Compression: every kept array is split into byte planes (all lowest bytes, then the next, ...); a plane
that is constant is stored as one byte, one that is noise (entropy above 7.7 bits/byte: the low bytes of an
update) as it is, the rest deflated with zlib. `compression_ablation` measures the alternatives.

Optimizer state (momentum buffers, Adam moments and step counts) is kept as ulp differences (exact, and
only ever walked exactly), so a rollback to step k restores the optimizer to what it held after step k, and
training resumed from there reproduces the rest of the run bit for bit. Hyper-parameters in `param_groups`
are not state: the lr is set back to the value recorded for the step reached, everything else is left
alone. Module buffers are not traced (a model whose buffers change in training, e.g. BatchNorm statistics,
needs them kept separately); the GPT here has none that change.

Around the exact trace: lossy variants (`degrade_trace`: float or bf16 differences; `prune_trace`: every
k-th step dropped), a `reversibility_score`, three checks (complete, lr recoverable from the step number,
updates bounded) gathered by `assess`, byte accounting (`storage_report`), and a single-file format with a
model fingerprint and a checksum (`save_trace`/`load_trace`).

The chapter's fine-tuning (every story starts with a fixed prefix) is at the end: `prefix_finetune_tokens`,
`finetune_with_trace`, `prefix_logprob`, `sample_texts`.
"""
from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import struct
import tempfile
import zlib
from dataclasses import asdict, dataclass, field
from dataclasses import replace as dataclasses_replace
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor, nn

FORMAT = "revbook-trace"
VERSION = 1
MAGIC = b"REVTRACE"

# record kinds: how a step's weight update is kept
EXACT = "exact"          # float difference + sparse ulp corrections: lossless
F32DIFF = "f32diff"      # float difference in the parameter's own dtype (the naive trace)
BF16DIFF = "bf16diff"    # float difference rounded to bf16 (a cheap trace)
DROPPED = "dropped"      # the ledger line survives, the update does not
KINDS = (EXACT, F32DIFF, BF16DIFF, DROPPED)

# float dtype -> same-width integer dtype, to read and write bit patterns
_INT_OF = {torch.float64: torch.int64, torch.float32: torch.int32,
           torch.bfloat16: torch.int16, torch.float16: torch.int16}
_UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_SINT_OF_SIZE = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}
_DTYPES = {str(d).removeprefix("torch."): d for d in
           (torch.float64, torch.float32, torch.bfloat16, torch.float16,
            torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)}


# ----------------------------------------------------------------------------------------------------------
# bit patterns, order keys, the exact difference and its compression
# ----------------------------------------------------------------------------------------------------------
def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _dtype_from(name: str) -> torch.dtype:
    if name not in _DTYPES:
        raise ValueError(f"trace holds a tensor of dtype {name!r}, which this version cannot restore")
    return _DTYPES[name]


def _bits(t: Tensor) -> np.ndarray:
    """The bit patterns of `t` as a flat unsigned numpy array (a copy for non-CPU tensors)."""
    t = t.detach()
    if t.dtype in _INT_OF:
        t = t.view(_INT_OF[t.dtype])
    elif t.dtype not in _DTYPES.values():
        raise ValueError(f"cannot trace a tensor of dtype {t.dtype}: only float and integer tensors are supported")
    arr = t.cpu().contiguous().numpy().reshape(-1)
    return arr.view(_UINT_OF_SIZE[arr.dtype.itemsize])


def _write_bits(t: Tensor, bits: np.ndarray) -> None:
    """Overwrite `t` in place with the bit patterns `bits` (same layout as `_bits`)."""
    signed = torch.from_numpy(np.ascontiguousarray(bits).view(_SINT_OF_SIZE[bits.dtype.itemsize]))
    target = t.detach()
    target = target.view(_INT_OF[t.dtype]) if t.dtype in _INT_OF else target
    target.copy_(signed.reshape(t.shape))


def _tensor_from_bits(bits: np.ndarray, dtype: torch.dtype, shape: Sequence[int]) -> Tensor:
    signed = torch.from_numpy(np.ascontiguousarray(bits).view(_SINT_OF_SIZE[bits.dtype.itemsize]).copy())
    out = signed.view(dtype) if dtype in _INT_OF else signed.to(dtype)
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


def _zigzag(d: np.ndarray) -> np.ndarray:
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


def _pack(values: np.ndarray, level: int) -> bytes:
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
        raise ValueError(f"a trace entry does not decode to {numel} values of {itemsize} bytes ({e}): the trace "
                         f"is corrupted; record it again") from e
    return out.view(dtype).reshape(-1)


def _pack_sparse(values: np.ndarray, level: int) -> tuple[bytes, int]:
    """A mostly-zero array as (positions, values), both packed: b"" when all zero. Returns (bytes, raw bytes)."""
    nz = np.flatnonzero(values)
    if nz.size == 0:
        return b"", 0
    pos = nz.astype(np.uint32 if values.size < 2 ** 32 else np.uint64)
    gaps = np.diff(pos, prepend=pos.dtype.type(0))             # sorted positions: small gaps compress well
    a, b = _pack(gaps, level), _pack(_zigzag(values[nz]), level)
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


def _keys(t: Tensor) -> np.ndarray:
    return _order_key(_bits(t), t.dtype.is_floating_point)


def encode_ulp(before: Tensor, after: Tensor, level: int = 1) -> Blob | None:
    """The ulp difference k(after) - k(before), modulo 2^bits (exact); None if bit-identical."""
    _same_kind(before, after)
    d = _keys(after) - _keys(before)                               # modular: wraps, never rounds
    if not d.any():
        return None
    z = _zigzag(d)
    return Blob("ulp", _dtype_name(after.dtype), tuple(after.shape), _pack(z, level), z.nbytes)


def encode_exact(before: Tensor, after: Tensor, level: int = 1) -> Blob | None:
    """A weight update kept exactly: the float difference plus the corrections for the bits it loses.

    Integer tensors get the ulp difference. None if `before` and `after` are bit-identical.
    """
    _same_kind(before, after)
    if not after.dtype.is_floating_point:
        return encode_ulp(before, after, level)
    before, after = before.detach(), after.detach()
    if _bit_equal(before, after):
        return None
    diff = after - before                                         # rounds where Sterbenz does not hold
    # the corrections: how many ulps the float arithmetic misses by, undoing and redoing (mostly zero)
    back, back_raw = _pack_sparse(_keys(before) - _keys(after - diff), level)
    ahead, ahead_raw = _pack_sparse(_keys(after) - _keys(before + diff), level)
    bits = _bits(diff)
    return Blob("diff", _dtype_name(diff.dtype), tuple(diff.shape), _pack(bits, level),
                bits.nbytes + back_raw + ahead_raw, res_back=back, res_fwd=ahead)


def _same_kind(before: Tensor, after: Tensor) -> None:
    if before.dtype != after.dtype or before.shape != after.shape:
        raise ValueError(f"cannot difference {before.dtype}{tuple(before.shape)} against "
                         f"{after.dtype}{tuple(after.shape)}: a traced tensor changed dtype or shape")


def _shift_keys(t: Tensor, d: np.ndarray) -> None:
    """Move every element of `t` by d ulps (modular), in place."""
    is_float = t.dtype.is_floating_point
    _write_bits(t, _from_order_key(_order_key(_bits(t), is_float) + d, is_float))


def apply_exact(t: Tensor, blob: Blob, direction: int, corrections: bool = True) -> None:
    """Move `t` in place by a kept change: direction -1 undoes the step, +1 redoes it.

    `corrections=False` applies the float difference alone (what a walk does once it is off the recorded
    states: a correction only means something on the exact state it was computed for).
    """
    if blob.kind == "ulp":
        d = _unzigzag(_unpack(blob.data, t.element_size(), t.numel()))
        _shift_keys(t, d if direction > 0 else (0 - d).astype(d.dtype))
        return
    dtype = _dtype_from(blob.dtype)
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
    ka = _order_key(_bits(a), is_float).astype(np.uint64)
    kb = _order_key(_bits(b), is_float).astype(np.uint64)
    return (kb - ka).view(np.int64)


def _encode_lossy(before: Tensor, after: Tensor, kind: str, level: int) -> tuple[Blob | None, float]:
    """A float difference as a cheaper trace keeps it, and the error of undoing the step with it (L2)."""
    before, after = before.detach(), after.detach()
    if kind == F32DIFF:
        diff = after - before                                     # in the parameter's own dtype
    elif kind == BF16DIFF:
        diff = (after.float() - before.float()).to(torch.bfloat16)
    else:
        raise ValueError(f"unknown lossy kind {kind!r}: choose {F32DIFF!r} or {BF16DIFF!r}")
    restored = after - diff.to(after.dtype)
    err = float((restored.double() - before.double()).norm())
    if not torch.any(diff != 0):
        return None, err
    bits = _bits(diff)
    return Blob("diff", _dtype_name(diff.dtype), tuple(diff.shape), _pack(bits, level), bits.nbytes), err


# ----------------------------------------------------------------------------------------------------------
# hashes and the model fingerprint
# ----------------------------------------------------------------------------------------------------------
def hash_tensors(tensors: Mapping[str, Any]) -> str:
    """sha256 over names, dtypes, shapes and bit patterns (non-tensor values by their repr), in key order given."""
    h = hashlib.sha256()
    for name, t in tensors.items():
        h.update(name.encode())
        if isinstance(t, Tensor):
            h.update(f"{_dtype_name(t.dtype)}{tuple(t.shape)}".encode())
            h.update(_bits(t).tobytes())
        else:
            h.update(repr(t).encode())
    return h.hexdigest()


def weights_hash(model: nn.Module) -> str:
    """sha256 of a model's parameters, bit for bit (the fingerprint's `start_hash` is one of these)."""
    return hash_tensors(dict(model.named_parameters()))


def fingerprint(model: nn.Module) -> dict:
    """What identifies the model a trace belongs to: parameter names, shapes, dtypes and a weights hash."""
    named = list(model.named_parameters())
    return {"names": [n for n, _ in named],
            "shapes": [list(p.shape) for _, p in named],
            "dtypes": [_dtype_name(p.dtype) for _, p in named],
            "n_params": int(sum(p.numel() for _, p in named)),
            "start_hash": hash_tensors(dict(named))}


def _flat_state(optimizer: torch.optim.Optimizer | None, names: Mapping[int, str]) -> dict[str, Any]:
    """Optimizer state as {"<param name>::<key>": value}, sorted, so it can be differenced and hashed."""
    if optimizer is None:
        return {}
    out = {}
    for p, st in optimizer.state.items():
        if id(p) not in names:
            raise ValueError("the optimizer holds state for a tensor that is not a parameter of this model: "
                             "pass the model the optimizer was built for")
        for key, value in st.items():
            out[f"{names[id(p)]}::{key}"] = value
    return dict(sorted(out.items()))


def _json_scalar(v: Any) -> Any:
    return v if isinstance(v, (bool, int, float, str, type(None))) else repr(v)


# ----------------------------------------------------------------------------------------------------------
# the lr schedule the recorder is given, recomputable from the step number alone
# ----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Schedule:
    """lr at optimizer step n (1-based): linear warmup, then cosine (or constant) down to `min_lr`."""
    peak_lr: float
    total_steps: int
    warmup_steps: int = 0
    min_lr: float = 0.0
    kind: str = "cosine"          # "cosine" | "constant"

    def __post_init__(self) -> None:
        if self.kind not in ("cosine", "constant"):
            raise ValueError(f"unknown schedule kind {self.kind!r}: use 'cosine' or 'constant'")
        if self.total_steps < 1 or not 0 <= self.warmup_steps <= self.total_steps:
            raise ValueError(f"need total_steps >= 1 and 0 <= warmup_steps <= total_steps, got "
                             f"{self.total_steps} and {self.warmup_steps}")

    def lr_at(self, step: int) -> float:
        if self.warmup_steps and step <= self.warmup_steps:
            return self.peak_lr * step / self.warmup_steps
        if self.kind == "constant":
            return self.peak_lr
        frac = min(1.0, (step - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps))
        return self.min_lr + 0.5 * (self.peak_lr - self.min_lr) * (1.0 + math.cos(math.pi * frac))

    def to_dict(self) -> dict:
        return asdict(self)


# ----------------------------------------------------------------------------------------------------------
# the trace
# ----------------------------------------------------------------------------------------------------------
@dataclass
class StepRecord:
    """What step `step` did: its lr(s), the changes it made, and a ledger line of metadata.

    `meta` holds: loss (if annotated), update_norm (L2 of the weight update), rel_update_max and
    rel_update_param (largest ||dp|| / ||p|| over parameter tensors), f32diff_lossy (elements whose float
    difference would not undo the step exactly), dist_from_start (||theta_n - theta_0||), outside_change
    (weights changed between optimizer steps; folded into this record), hash_after and state_hash_after,
    and for lossy records err_norm (L2 error of undoing this step with what is kept).
    """
    step: int
    kind: str
    lrs: list[float]
    meta: dict
    params: dict[str, Blob] = field(default_factory=dict)
    state: dict[str, Blob] = field(default_factory=dict)          # optimizer-state tensors that changed
    state_created: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)  # key -> dtype, shape
    state_scalars: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # key -> (before, after)

    @property
    def has_state(self) -> bool:
        return self.kind == EXACT and self.meta.get("state_kept", False)


@dataclass
class Trace:
    header: dict
    records: list[StepRecord]

    @property
    def steps(self) -> list[int]:
        return [r.step for r in self.records]

    @property
    def final_step(self) -> int:
        return self.records[-1].step if self.records else 0

    def record(self, step: int) -> StepRecord | None:
        for r in self.records:
            if r.step == step:
                return r
        return None

    def hash_at(self, step: int) -> str | None:
        """The recorded weights hash after `step` (step 0: the starting weights)."""
        if step == 0:
            return self.header["fingerprint"]["start_hash"]
        r = self.record(step)
        return None if r is None else r.meta["hash_after"]

    def step_of_hash(self, h: str) -> int | None:
        if h == self.header["fingerprint"]["start_hash"]:
            return 0
        for r in reversed(self.records):
            if r.meta["hash_after"] == h:
                return r.step
        return None

    def ledger(self) -> list[dict]:
        """One row per step: step, kind, lr, and the recorded metadata (for a DataFrame)."""
        rows = []
        for r in self.records:
            row = {"step": r.step, "kind": r.kind, "lr": r.lrs[0] if r.lrs else float("nan")}
            row.update({k: v for k, v in r.meta.items() if not k.startswith("hash") and k != "state_hash_after"})
            rows.append(row)
        return rows


class TraceRecorder:
    """Hooks an optimizer and records an exact trace of every `optimizer.step()`.

    >>> rec = TraceRecorder(model, opt, schedule=Schedule(1e-3, total_steps=100))
    >>> for n in range(1, 101):
    ...     for g in opt.param_groups: g["lr"] = rec.schedule.lr_at(n)
    ...     loss = model(x, y); opt.zero_grad(); loss.backward()
    ...     rec.annotate(loss=loss.item()); opt.step()
    >>> trace = rec.close()

    The recorder keeps one copy of the weights (and optimizer state) as they were after the last step, and
    one of the starting weights; a step's record is the exact difference against that copy. Changes made
    to the weights between steps (outside the optimizer) are folded into the next step's record and flagged,
    so the walk back stays exact. `keep_optimizer_state=False` keeps the weights only (smaller traces; a
    rollback then restores weights, not the optimizer).
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer,
                 schedule: Schedule | None = None, keep_optimizer_state: bool = True,
                 compress_level: int = 1, resume: Trace | None = None) -> None:
        self.model, self.optimizer, self.schedule = model, optimizer, schedule
        self.keep_state, self.level = keep_optimizer_state, compress_level
        self._params = dict(model.named_parameters())
        self._names = {id(p): n for n, p in self._params.items()}
        owned = {id(p) for g in optimizer.param_groups for p in g["params"]}
        if not owned <= set(self._names):
            raise ValueError("the optimizer updates tensors that are not parameters of this model: "
                             "build the recorder with the model the optimizer was made for")
        self._prev = {n: p.detach().clone() for n, p in self._params.items()}
        self._prev_state = self._clone_state()
        self._pending: dict = {}
        self._outside = False
        if resume is None:
            self._start = {n: p.detach().clone() for n, p in self._params.items()}
            self.trace = Trace(self._header(), [])
        else:
            self.trace = self._resumed(resume)
        self._hooks = [optimizer.register_step_pre_hook(self._pre_step),
                       optimizer.register_step_post_hook(self._post_step)]

    def _resumed(self, trace: Trace) -> Trace:
        """Continue `trace` from the step the model is at (after a rollback): later records are dropped,
        new steps are numbered from there, as when a run is retried from step k."""
        k = locate(self.model, trace)
        header = copy.deepcopy(trace.header)
        if self.keep_state != header["optimizer_state_kept"]:
            raise ValueError(f"keep_optimizer_state={self.keep_state} but the trace was recorded with "
                             f"{header['optimizer_state_kept']}: resume with the same setting")
        if self.keep_state:
            want = header["start_state_hash"] if k == 0 else trace.record(k).meta["state_hash_after"]
            if hash_tensors(self._prev_state) != want:
                raise ValueError(f"the optimizer's state is not the one recorded at step {k}: roll back with "
                                 f"rollback(model, trace, {k}, optimizer) before resuming")
        if isinstance(self.schedule, Schedule):
            header["schedule"] = self.schedule.to_dict()
        elif header.get("schedule") and self.schedule is None:
            self.schedule = Schedule(**header["schedule"])
        header["resumed_at"] = header.get("resumed_at", []) + [k]
        start = copy.deepcopy(self.model)           # the starting weights, for the ledger's distance column
        rollback(start, trace, 0)
        self._start = {n: p.detach().clone() for n, p in start.named_parameters()}
        return Trace(header, [r for r in trace.records if r.step <= k])

    def _header(self) -> dict:
        defaults = {k: _json_scalar(v) for k, v in self.optimizer.defaults.items()}
        return {"format": FORMAT, "version": VERSION, "fingerprint": fingerprint(self.model),
                "start_state_hash": hash_tensors(self._prev_state),
                "optimizer": {"class": type(self.optimizer).__name__, "defaults": defaults},
                "schedule": self.schedule.to_dict() if isinstance(self.schedule, Schedule) else None,
                "initial_lrs": [float(g["lr"]) for g in self.optimizer.param_groups],
                "optimizer_state_kept": self.keep_state, "compress_level": self.level,
                "encoding": "weights: float difference + sparse ulp corrections; optimizer state: ulp "
                            "difference (zigzag); byte planes, zlib", "derived": None}

    def _clone_state(self) -> dict[str, Any]:
        if not self.keep_state:
            return {}
        flat = _flat_state(self.optimizer, self._names)
        return {k: v.detach().clone() if isinstance(v, Tensor) else copy.deepcopy(v) for k, v in flat.items()}

    def annotate(self, **meta: Any) -> None:
        """Attach metadata (e.g. loss=...) to the next recorded step."""
        self._pending.update({k: _json_scalar(v) for k, v in meta.items()})

    def _pre_step(self, optimizer, args, kwargs) -> None:
        # Weights edited since the last step (a manual change, a reload) are not lost: the next record
        # differences against the last recorded state anyway. Only note that it happened.
        self._outside = any(not _bit_equal(p, self._prev[n]) for n, p in self._params.items())

    def _post_step(self, optimizer, args, kwargs) -> None:
        self.trace.records.append(self._record_step(self.trace.final_step + 1))

    def _record_step(self, step: int) -> StepRecord:
        rec = StepRecord(step, EXACT, [float(g["lr"]) for g in self.optimizer.param_groups], {})
        upd_sq = dist_sq = 0.0
        rel_max, rel_name, lossy = 0.0, "", 0
        for name, p in self._params.items():
            before, after = self._prev[name], p.detach()
            blob = encode_exact(before, after, self.level)
            if blob is None:
                continue
            rec.params[name] = blob
            delta = after.double() - before.double()
            dn, bn = float(delta.norm()), float(before.double().norm())
            upd_sq += dn * dn
            rel = dn / bn if bn > 0 else math.inf
            if rel > rel_max:
                rel_max, rel_name = rel, name
            if after.dtype.is_floating_point:     # what a float-difference trace would have lost here
                naive = after - (after - before)
                lossy += int((naive.view(_INT_OF[after.dtype]) != before.view(_INT_OF[after.dtype])).sum())
            before.copy_(after)
        for name, p in self._params.items():
            dist_sq += float((p.detach().double() - self._start[name].double()).pow(2).sum())
        rec.meta.update(self._pending, update_norm=math.sqrt(upd_sq), rel_update_max=rel_max,
                        rel_update_param=rel_name, f32diff_lossy=lossy, dist_from_start=math.sqrt(dist_sq),
                        outside_change=self._outside, hash_after=hash_tensors(self._params),
                        state_kept=self.keep_state)
        if self.keep_state:
            self._record_state(rec)
        rec.meta["state_hash_after"] = hash_tensors(self._prev_state)
        rec.meta["state_nbytes"] = sum(v.numel() * v.element_size() for v in self._prev_state.values()
                                       if isinstance(v, Tensor))
        self._pending, self._outside = {}, False
        return rec

    def _record_state(self, rec: StepRecord) -> None:
        now = _flat_state(self.optimizer, self._names)
        gone = set(self._prev_state) - set(now)
        if gone:
            raise ValueError(f"optimizer state entries disappeared during a step ({sorted(gone)[:3]}...): "
                             f"record with keep_optimizer_state=False for this optimizer")
        for key, value in now.items():
            old = self._prev_state.get(key)
            if isinstance(value, Tensor):
                if key not in self._prev_state:
                    rec.state_created[key] = (_dtype_name(value.dtype), tuple(value.shape))
                    old = torch.zeros_like(value)
                blob = encode_ulp(old, value, self.level)
                if blob is not None:
                    rec.state[key] = blob
                self._prev_state[key] = value.detach().clone()
            elif key not in self._prev_state or old != value:
                rec.state_scalars[key] = (_json_scalar(old), _json_scalar(value))
                self._prev_state[key] = copy.deepcopy(value)

    def close(self) -> Trace:
        """Remove the hooks and return the trace."""
        for h in self._hooks:
            h.remove()
        self._hooks = []
        return self.trace

    def __enter__(self) -> "TraceRecorder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _bit_equal(a: Tensor, b: Tensor) -> bool:
    if a.dtype in _INT_OF:
        return torch.equal(a.detach().view(_INT_OF[a.dtype]), b.detach().view(_INT_OF[b.dtype]))
    return torch.equal(a.detach(), b.detach())


# ----------------------------------------------------------------------------------------------------------
# walking the trace: rollback and replay
# ----------------------------------------------------------------------------------------------------------
def check_model(model: nn.Module, trace: Trace) -> None:
    """Raise ValueError if `model` is not the architecture the trace was recorded on."""
    fp = trace.header["fingerprint"]
    named = list(model.named_parameters())
    names = [n for n, _ in named]
    if names != fp["names"]:
        missing = sorted(set(fp["names"]) - set(names))[:3]
        extra = sorted(set(names) - set(fp["names"]))[:3]
        raise ValueError(f"this trace was recorded on a different model (parameters missing here: {missing}, "
                         f"not in the trace: {extra}); load the model the trace belongs to "
                         f"(start hash {fp['start_hash'][:12]})")
    for (n, p), shape, dtype in zip(named, fp["shapes"], fp["dtypes"]):
        if list(p.shape) != shape or _dtype_name(p.dtype) != dtype:
            raise ValueError(f"this trace was recorded on a different model: parameter {n!r} is "
                             f"{_dtype_name(p.dtype)}{list(p.shape)} here but {dtype}{shape} in the trace; "
                             f"load the model the trace belongs to")


def locate(model: nn.Module, trace: Trace) -> int:
    """The recorded step whose weights the model holds now (by hash); ValueError if none."""
    check_model(model, trace)
    step = trace.step_of_hash(weights_hash(model))
    if step is None:
        raise ValueError(f"the model's weights match no step of this trace (steps 0..{trace.final_step}): "
                         f"they were changed after recording, or the trace belongs to another run. Load the "
                         f"weights saved at the end of the traced run, or pass from_step=... with verify=False")
    return step


class _OptimizerView:
    """Flat read/write access to an optimizer's state by '<param name>::<key>'."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        self.optimizer = optimizer
        self.params = dict(model.named_parameters())
        self.names = {id(p): n for n, p in self.params.items()}

    def _split(self, key: str) -> tuple[Tensor, str]:
        name, sub = key.split("::", 1)
        return self.params[name], sub

    def get(self, key: str) -> Any:
        p, sub = self._split(key)
        return self.optimizer.state[p][sub]

    def set(self, key: str, value: Any) -> None:
        p, sub = self._split(key)
        self.optimizer.state[p][sub] = value

    def delete(self, key: str) -> None:
        p, sub = self._split(key)
        del self.optimizer.state[p][sub]
        if not self.optimizer.state[p]:
            del self.optimizer.state[p]

    def flat(self) -> dict[str, Any]:
        return _flat_state(self.optimizer, self.names)


def _undo(params: Mapping[str, Tensor], rec: StepRecord, opt: _OptimizerView | None,
          corrections: bool = True) -> None:
    for name, blob in rec.params.items():
        apply_exact(params[name], blob, -1, corrections)
    if opt is None:
        return
    for key, blob in rec.state.items():
        if key not in rec.state_created:
            apply_exact(opt.get(key), blob, -1)
    for key in rec.state_created:
        opt.delete(key)
    for key, (before, _after) in rec.state_scalars.items():
        opt.delete(key) if before is None else opt.set(key, before)


def _redo(params: Mapping[str, Tensor], rec: StepRecord, opt: _OptimizerView | None,
          corrections: bool = True) -> None:
    for name, blob in rec.params.items():
        apply_exact(params[name], blob, +1, corrections)
    if opt is None:
        return
    for key, (dtype, shape) in rec.state_created.items():
        opt.set(key, torch.zeros(shape, dtype=_dtype_from(dtype), device=params[key.split("::")[0]].device))
    for key, blob in rec.state.items():
        apply_exact(opt.get(key), blob, +1)
    for key, (_before, after) in rec.state_scalars.items():
        opt.set(key, after)


def _walk(model: nn.Module, trace: Trace, from_step: int, to_step: int,
          optimizer: torch.optim.Optimizer | None, strict: bool,
          on_step: Callable[[int, nn.Module], None] | None) -> None:
    params = dict(model.named_parameters())
    opt = _OptimizerView(model, optimizer) if optimizer is not None else None
    by_step = {r.step: r for r in trace.records}
    backward = to_step < from_step
    path = range(from_step, to_step, -1) if backward else range(from_step + 1, to_step + 1)
    on_track = True     # still on the recorded states: corrections apply; off them, float differences alone
    with torch.no_grad():
        for n in path:
            rec = by_step.get(n)
            if rec is None or rec.kind == DROPPED:
                if strict:
                    raise ValueError(f"step {n} has no kept update in this trace, so the walk cannot cross it "
                                     f"exactly; revert to a checkpoint instead (or walk with strict=False to "
                                     f"get an approximate state)")
                on_track = False
            else:
                if strict and rec.kind != EXACT:
                    raise ValueError(f"step {n} is kept as a lossy {rec.kind!r} difference; a strict walk "
                                     f"needs an exact trace (use strict=False to walk approximately)")
                if opt is not None and not rec.has_state:
                    raise ValueError(f"step {n} keeps no optimizer state; roll back the weights only "
                                     f"(optimizer=None) or record with keep_optimizer_state=True")
                (_undo if backward else _redo)(params, rec, opt, on_track)
                on_track = on_track and rec.kind == EXACT
            if on_step is not None:
                on_step(n - 1 if backward else n, model)


def _set_lrs(optimizer: torch.optim.Optimizer, trace: Trace, step: int) -> None:
    rec = trace.record(step)
    lrs = trace.header["initial_lrs"] if step == 0 or rec is None else rec.lrs
    for g, lr in zip(optimizer.param_groups, lrs):
        g["lr"] = lr


def _move(model: nn.Module, trace: Trace, to_step: int, optimizer: torch.optim.Optimizer | None,
          from_step: int | None, verify: bool, on_step: Callable | None, forward: bool) -> int:
    check_model(model, trace)
    if not 0 <= to_step <= trace.final_step:
        raise ValueError(f"to_step={to_step} is outside the trace (steps 0..{trace.final_step})")
    start = locate(model, trace) if from_step is None else from_step
    if forward and to_step < start or not forward and to_step > start:
        verb = "replay" if forward else "rollback"
        raise ValueError(f"{verb} goes {'forward' if forward else 'backward'}, but the model is at step {start} "
                         f"and to_step={to_step}; use {'rollback' if forward else 'replay'} instead")
    if optimizer is not None and not trace.header.get("optimizer_state_kept", False):
        raise ValueError("this trace keeps no optimizer state; roll back the weights only (optimizer=None) "
                         "or record with keep_optimizer_state=True")
    if optimizer is not None:
        want = trace.header["start_state_hash"] if start == 0 else trace.record(start).meta["state_hash_after"]
        have = hash_tensors(_flat_state(optimizer, {id(p): n for n, p in model.named_parameters()}))
        if have != want:
            raise ValueError(f"the optimizer's state is not the one recorded at step {start}: pass the optimizer "
                             f"used during recording, untouched since, or move the weights only (optimizer=None)")
    _walk(model, trace, start, to_step, optimizer, strict=verify, on_step=on_step)
    if optimizer is not None:
        _set_lrs(optimizer, trace, to_step)
    if verify and weights_hash(model) != trace.hash_at(to_step):
        raise ValueError(f"after walking to step {to_step} the weights do not match the recorded hash: the trace "
                         f"is damaged; revert to a checkpoint")
    return to_step


def rollback(model: nn.Module, trace: Trace, to_step: int, optimizer: torch.optim.Optimizer | None = None,
             *, from_step: int | None = None, verify: bool = True,
             on_step: Callable[[int, nn.Module], None] | None = None) -> int:
    """Walk the model (and optimizer state, if given) back to the state after `to_step` (0 = the start).

    The current step is found from the weights hash unless `from_step` is given. With `verify` every step
    must be kept exactly and the weights must hash to the recorded value at the end; `on_step(step, model)`
    is called after each step undone (e.g. to measure something along the way).
    """
    return _move(model, trace, to_step, optimizer, from_step, verify, on_step, forward=False)


def replay(model: nn.Module, trace: Trace, to_step: int, optimizer: torch.optim.Optimizer | None = None,
           *, from_step: int | None = None, verify: bool = True,
           on_step: Callable[[int, nn.Module], None] | None = None) -> int:
    """Walk forward again along the trace to the state after `to_step` (the inverse of `rollback`)."""
    return _move(model, trace, to_step, optimizer, from_step, verify, on_step, forward=True)


# ----------------------------------------------------------------------------------------------------------
# lossy and pruned traces (what people keep instead), for comparison
# ----------------------------------------------------------------------------------------------------------
def _header_derived(trace: Trace, note: str) -> dict:
    header = copy.deepcopy(trace.header)
    header["derived"] = note if not header.get("derived") else f"{header['derived']}; {note}"
    return header


def degrade_trace(model: nn.Module, trace: Trace, kind: str, level: int = 1) -> Trace:
    """The same run kept as float differences alone (`f32diff`, the naive trace) or rounded to bf16
    (`bf16diff`).

    `model` must hold the weights at the trace's last step; it is not modified. Each record gets
    `err_norm`, the L2 error of undoing that step with the lossy difference. Optimizer state is not kept.
    """
    return degrade_traces(model, trace, (kind,), level)[kind]


def degrade_traces(model: nn.Module, trace: Trace, kinds: Sequence[str] = (BF16DIFF, F32DIFF),
                   level: int = 1) -> dict[str, Trace]:
    """`degrade_trace` for several kinds in one walk back."""
    bad = [k for k in kinds if k not in (F32DIFF, BF16DIFF)]
    if bad:
        raise ValueError(f"kinds must be {F32DIFF!r} or {BF16DIFF!r}, got {bad}")
    work = copy.deepcopy(model)
    if locate(work, trace) != trace.final_step:
        raise ValueError("degrade_trace needs the model at the trace's last step")
    params = dict(work.named_parameters())
    out: dict[str, list[StepRecord]] = {k: [] for k in kinds}
    with torch.no_grad():
        for rec in reversed(trace.records):
            if rec.kind != EXACT:
                raise ValueError(f"step {rec.step} is already {rec.kind!r}: degrade an exact trace")
            after = {n: params[n].detach().clone() for n in rec.params}
            _undo(params, rec, None)
            for kind in kinds:
                new = StepRecord(rec.step, kind, list(rec.lrs), dict(rec.meta, state_kept=False))
                err_sq = 0.0
                for n in rec.params:
                    blob, err = _encode_lossy(params[n], after[n], kind, level)
                    err_sq += err * err
                    if blob is not None:
                        new.params[n] = blob
                new.meta["err_norm"] = math.sqrt(err_sq)
                out[kind].append(new)
    return {k: Trace(_header_derived(trace, f"kept as {k}"), list(reversed(recs))) for k, recs in out.items()}


def prune_trace(trace: Trace, every: int | None = None, steps: Iterable[int] = (), forget: bool = False) -> Trace:
    """Drop the updates of every `every`-th step (and of `steps`).

    The ledger lines stay (kind 'dropped', err_norm = the update lost) unless `forget`, which removes the
    records altogether, as a trace with missing entries would look.
    """
    drop = set(steps)
    if every:
        drop |= {r.step for r in trace.records if r.step % every == 0}
    out = []
    for r in trace.records:
        if r.step not in drop:
            out.append(r)
        elif not forget:
            out.append(StepRecord(r.step, DROPPED, list(r.lrs),
                                  dict(r.meta, err_norm=r.meta["update_norm"], state_kept=False)))
    note = f"updates dropped at {len(drop)} steps" + (" (records removed)" if forget else "")
    return Trace(_header_derived(trace, note), out)


# ----------------------------------------------------------------------------------------------------------
# reversibility score and checks
# ----------------------------------------------------------------------------------------------------------
@dataclass
class Score:
    """How well the kept trace gets back to the pre-fine-tuning weights.

    score = 1 - ||theta_0_rebuilt - theta_0|| / ||theta_N - theta_0||: the fraction of the fine-tuning
    displacement the trace undoes. 1.0 exactly when the rebuilt weights are bit-identical to the start.
    """
    score: float
    exact: bool                # rebuilt start hashes to the recorded start hash
    method: str                # "hash" | "reference" | "ledger estimate"
    error_l2: float            # ||theta_0_rebuilt - theta_0|| (an estimate for method 'ledger estimate')
    displacement: float        # ||theta_N - theta_0||
    error_max: float = float("nan")    # largest elementwise error (reference only)
    n_wrong: int = -1                  # elements not bit-identical (reference only)
    max_ulps: int = -1                 # largest error in ulps (reference only)


def reversibility_score(model: nn.Module, trace: Trace, reference: nn.Module | Mapping[str, Tensor] | None = None,
                        from_step: int | None = None) -> Score:
    """Walk a copy of `model` (at the trace's last step) back to step 0 and score the result.

    With `reference` (the starting weights) the error is measured. Without it the rebuilt weights are
    compared with the recorded start hash: a match is exact (1.0); otherwise the error is estimated from the
    ledger as the sum of each lossy or dropped step's own error (unknown, so score 0, if records are missing).
    It is an estimate, not a bound: the walk carries an error on through the earlier steps, where it can
    grow or shrink.
    """
    work = copy.deepcopy(model)
    check_model(work, trace)
    start = trace.final_step if from_step is None else from_step
    if from_step is None and weights_hash(work) != trace.hash_at(start):
        raise ValueError("reversibility_score needs the model at the trace's last step (its weights do not "
                         "match the recorded final hash); pass from_step=... if it is elsewhere")
    final = {n: p.detach().clone() for n, p in work.named_parameters()}
    _walk(work, trace, start, 0, None, strict=False, on_step=None)
    if reference is not None:
        ref = dict(reference.named_parameters()) if isinstance(reference, nn.Module) else dict(reference)
        return _measured_score(work, final, ref)
    last = trace.record(start)
    disp = float(last.meta["dist_from_start"]) if last is not None else 0.0
    if weights_hash(work) == trace.hash_at(0):
        return Score(1.0, True, "hash", 0.0, disp)
    if set(range(1, start + 1)) - set(trace.steps):
        return Score(0.0, False, "ledger estimate", math.inf, disp)
    estimate = sum(r.meta.get("err_norm", 0.0) for r in trace.records if r.step <= start)
    return Score(_fraction_undone(estimate, disp), False, "ledger estimate", estimate, disp)


def _fraction_undone(err: float, disp: float) -> float:
    if err == 0:
        return 1.0
    return max(0.0, 1.0 - err / disp) if disp > 0 else 0.0


def _measured_score(work: nn.Module, final: Mapping[str, Tensor], ref: Mapping[str, Tensor]) -> Score:
    err_sq = disp_sq = 0.0
    err_max, wrong, max_ulps = 0.0, 0, 0
    for n, p in work.named_parameters():
        r = ref[n].detach().to(p.device)
        d = p.detach().double() - r.double()
        err_sq += float(d.pow(2).sum())
        disp_sq += float((final[n].double() - r.double()).pow(2).sum())
        err_max = max(err_max, float(d.abs().max()) if d.numel() else 0.0)
        wrong += int((~_bitwise_eq(p.detach(), r)).sum())
        if p.dtype.is_floating_point:
            max_ulps = max(max_ulps, int(np.abs(ulp_distance(r, p.detach())).max()))
    exact = wrong == 0
    err = math.sqrt(err_sq)
    # a state that is not bit-identical never scores 1.0, however small its error
    return Score(1.0 if exact else min(_fraction_undone(err, math.sqrt(disp_sq)), float(np.nextafter(1.0, 0.0))),
                 exact, "reference", err, math.sqrt(disp_sq), err_max, wrong, max_ulps)


def _bitwise_eq(a: Tensor, b: Tensor) -> Tensor:
    if a.dtype in _INT_OF:
        return a.view(_INT_OF[a.dtype]) == b.view(_INT_OF[b.dtype])
    return a == b


@dataclass
class Check:
    name: str
    passed: bool
    finding: str
    steps: list[int] = field(default_factory=list)    # the offending steps


def check_complete(trace: Trace) -> Check:
    """Every step 1..N has a record that keeps its update exactly."""
    present = set(trace.steps)
    missing = sorted(set(range(1, trace.final_step + 1)) - present)
    dropped = [r.step for r in trace.records if r.kind == DROPPED]
    lossy = [r for r in trace.records if r.kind in (F32DIFF, BF16DIFF)]
    outside = [r.step for r in trace.records if r.meta.get("outside_change")]
    bad = sorted(set(missing) | set(dropped))
    if bad:
        return Check("complete", False,
                     f"{len(bad)} of {trace.final_step} steps have no kept update ({_fmt_steps(bad)}): the walk "
                     f"back can only skip them, leaving their updates in the weights, so it cannot reach the "
                     f"start; revert to the checkpoint saved before fine-tuning, and keep every step next time",
                     bad)
    if lossy:
        return Check("complete", True, f"no gaps, but {len(lossy)} steps are kept lossily "
                                       f"({lossy[0].kind}): the walk back is approximate", [])
    note = (f"; weights were changed between optimizer steps before steps {_fmt_steps(outside)} "
            f"(folded into those records, the walk stays exact)") if outside else ""
    return Check("complete", True, f"all {trace.final_step} steps kept exactly{note}", [])


def check_lr_schedule(trace: Trace, lr_at: Callable[[int], float | Sequence[float]] | None = None,
                      rel_tol: float = 1e-12) -> Check:
    """The lr recorded at every step equals the schedule recomputed from the step number alone."""
    if lr_at is None:
        spec = trace.header.get("schedule")
        if spec is None:
            return Check("lr recoverable", False, "the trace holds no schedule and none was given: pass "
                                                  "lr_at=... (the schedule the run was meant to follow)", [])
        lr_at = Schedule(**spec).lr_at
    bad, example = [], ""
    for r in trace.records:
        want = lr_at(r.step)
        want = [float(want)] * len(r.lrs) if isinstance(want, (int, float)) else [float(w) for w in want]
        if any(not math.isclose(a, b, rel_tol=rel_tol, abs_tol=0.0) for a, b in zip(r.lrs, want)):
            if not bad:
                example = f"step {r.step} ran at lr {r.lrs[0]:.4g}, the schedule gives {want[0]:.4g}"
            bad.append(r.step)
    if bad:
        return Check("lr recoverable", False,
                     f"the lr at {len(bad)} steps ({_fmt_steps(bad)}) is not what the schedule gives for that step "
                     f"number ({example}): it was changed by hand, or a step was retried and the count shifted. "
                     f"The run can no longer be recomputed from its step numbers; put the change into the schedule "
                     f"or restart from step {bad[0] - 1}", bad)
    return Check("lr recoverable", True, f"the lr at all {len(trace.records)} steps matches the schedule", [])


DEFAULT_UPDATE_THRESHOLD = 0.5


def check_bounded(trace: Trace, threshold: float = DEFAULT_UPDATE_THRESHOLD) -> Check:
    """The largest relative update per step, max over tensors of ||dp|| / ||p||, stays below `threshold`."""
    bad = [r for r in trace.records if not r.meta["rel_update_max"] < threshold]
    worst = max(trace.records, key=lambda r: r.meta["rel_update_max"], default=None)
    if bad:
        w = max(bad, key=lambda r: r.meta["rel_update_max"])
        return Check("updates bounded", False,
                     f"{len(bad)} steps ({_fmt_steps([r.step for r in bad])}) moved a parameter tensor by more than "
                     f"{threshold:g} of its own norm (worst: step {w.step}, {w.meta['rel_update_param']!r} by "
                     f"{w.meta['rel_update_max']:.3g}x, {w.meta['f32diff_lossy']} elements a float-difference "
                     f"trace would lose). A step that size is a jump, not fine-tuning: keep a checkpoint before "
                     f"it, lower the lr or clip the update",
                     [r.step for r in bad])
    top = f"{worst.meta['rel_update_max']:.3g}" if worst is not None else "n/a"
    return Check("updates bounded", True, f"largest relative update {top} < {threshold:g} at every step", [])


def _fmt_steps(steps: Sequence[int], limit: int = 8) -> str:
    shown = ", ".join(str(s) for s in steps[:limit])
    return shown + (f", ... {len(steps) - limit} more" if len(steps) > limit else "")


DEFAULT_SCORE_THRESHOLD = 0.999


@dataclass
class Assessment:
    score: Score
    checks: list[Check]
    threshold: float
    irreversible: bool         # the flag: score below threshold
    verdict: str               # "exactly reversible" | "approximately reversible" | "irreversible"
    recommendation: str

    @property
    def passed(self) -> dict[str, bool]:
        return {c.name: c.passed for c in self.checks}

    def findings(self) -> list[str]:
        return [f"[{'ok' if c.passed else 'FAIL'}] {c.name}: {c.finding}" for c in self.checks]

    def __str__(self) -> str:
        s = self.score
        head = (f"reversibility score {s.score:.6f} ({s.method}; rebuilt start "
                f"{'bit-identical' if s.exact else f'off by L2 {s.error_l2:.3g}'}) -> {self.verdict.upper()}")
        return "\n".join([head, *self.findings(), f"=> {self.recommendation}"])


def assess(model: nn.Module, trace: Trace, reference: nn.Module | Mapping[str, Tensor] | None = None,
           lr_at: Callable[[int], float] | None = None, score_threshold: float = DEFAULT_SCORE_THRESHOLD,
           update_threshold: float = DEFAULT_UPDATE_THRESHOLD) -> Assessment:
    """Score the trace and run the three checks; flag the run irreversible below `score_threshold`."""
    score = reversibility_score(model, trace, reference)
    checks = [check_complete(trace), check_lr_schedule(trace, lr_at), check_bounded(trace, update_threshold)]
    failed = [c.name for c in checks if not c.passed]
    irreversible = score.score < score_threshold
    if irreversible:
        verdict = "irreversible"
        rec = (f"the trace gets only {100 * score.score:.1f}% of the way back; revert to the checkpoint saved "
               f"before fine-tuning")
    elif score.exact:
        verdict = "exactly reversible"
        rec = "rollback(model, trace, 0) restores the starting weights bit for bit"
    else:
        verdict = "approximately reversible"
        rec = (f"rollback gets within L2 {score.error_l2:.3g} of the start (not bit-identical); revert to the "
               f"checkpoint if the exact weights matter")
    if failed:
        rec += f"; but fix what the failed checks report ({', '.join(failed)})"
    return Assessment(score, checks, score_threshold, irreversible, verdict, rec)


# ----------------------------------------------------------------------------------------------------------
# storage accounting
# ----------------------------------------------------------------------------------------------------------
def storage_report(trace: Trace) -> dict:
    """Bytes kept per step, raw and compressed, against a full checkpoint (weights + optimizer state) per step."""
    n_params = trace.header["fingerprint"]["n_params"]
    weight_bytes = sum(math.prod(s) * _dtype_from(d).itemsize
                       for s, d in zip(trace.header["fingerprint"]["shapes"], trace.header["fingerprint"]["dtypes"]))
    # a checkpoint holds the optimizer state as it is at the end (Adam: two moments per parameter)
    state_bytes = max((r.meta.get("state_nbytes", 0) for r in trace.records), default=0)
    steps = max(1, len(trace.records))
    raw_w = sum(b.raw_nbytes for r in trace.records for b in r.params.values())
    cmp_w = sum(b.nbytes for r in trace.records for b in r.params.values())
    raw_s = sum(b.raw_nbytes for r in trace.records for b in r.state.values())
    cmp_s = sum(b.nbytes for r in trace.records for b in r.state.values())
    ckpt = weight_bytes + state_bytes
    return {
        "steps": len(trace.records), "n_params": n_params,
        "checkpoint_bytes_per_step": ckpt, "checkpoint_weights_bytes": weight_bytes,
        "weights_raw_per_step": raw_w / steps, "weights_compressed_per_step": cmp_w / steps,
        "state_raw_per_step": raw_s / steps, "state_compressed_per_step": cmp_s / steps,
        "total_raw_per_step": (raw_w + raw_s) / steps, "total_compressed_per_step": (cmp_w + cmp_s) / steps,
        "weights_bytes_per_param_raw": raw_w / steps / n_params,
        "weights_bytes_per_param_compressed": cmp_w / steps / n_params,
        "total_bytes_per_param_compressed": (cmp_w + cmp_s) / steps / n_params,
        "weights_compression_ratio": raw_w / cmp_w if cmp_w else float("nan"),
        "state_compression_ratio": raw_s / cmp_s if cmp_s else float("nan"),
        "fraction_of_checkpoint": (cmp_w + cmp_s) / steps / ckpt if ckpt else float("nan"),
    }


def step_storage(trace: Trace) -> list[dict]:
    """Per-step bytes (weights and optimizer state, compressed) for plotting."""
    return [{"step": r.step,
             "weights_compressed": sum(b.nbytes for b in r.params.values()),
             "state_compressed": sum(b.nbytes for b in r.state.values()),
             "weights_raw": sum(b.raw_nbytes for b in r.params.values())} for r in trace.records]


def compression_ablation(model: nn.Module, trace: Trace, step: int | None = None, level: int = 6) -> list[dict]:
    """Bytes of one step's weight update kept five ways, raw, through zlib alone, and as byte planes through
    zlib (at `level`): the kept representation (float difference + corrections), the ulp difference and the
    XOR of bit patterns (both exact too), and the float difference alone or in bf16 (lossy).

    `model` must hold the weights at the trace's last step; it is not modified.
    """
    step = trace.final_step if step is None else step
    rec = trace.record(step)
    if rec is None or rec.kind != EXACT:
        raise ValueError(f"step {step} has no exact record to measure")
    work = copy.deepcopy(model)
    rollback(work, trace, step)
    params = dict(work.named_parameters())
    after = {n: params[n].detach().clone() for n in rec.params}
    with torch.no_grad():
        _undo(params, rec, None)
    names = ["float difference + corrections", "ulp difference", "XOR of bit patterns",
             "float difference alone", "bf16 difference"]
    rows = {k: {"representation": k, "exact": k not in names[3:], "raw": 0, "zlib": 0, "byte planes + zlib": 0}
            for k in names}
    for n, a in after.items():
        b = params[n].detach()
        if not a.dtype.is_floating_point:
            continue
        kept = encode_exact(b, a, level)
        corrections = len(kept.res_back or b"") + len(kept.res_fwd or b"")
        codes = {"float difference + corrections": _bits(a - b), "ulp difference": _zigzag(_keys(a) - _keys(b)),
                 "XOR of bit patterns": _bits(a) ^ _bits(b), "float difference alone": _bits(a - b),
                 "bf16 difference": _bits((a.float() - b.float()).to(torch.bfloat16))}
        for name, values in codes.items():
            extra = corrections if name == names[0] else 0
            rows[name]["raw"] += kept.raw_nbytes if name == names[0] else values.nbytes
            rows[name]["zlib"] += len(zlib.compress(values.tobytes(), level)) + extra
            rows[name]["byte planes + zlib"] += len(_pack(values, level)) + extra
    return list(rows.values())


# ----------------------------------------------------------------------------------------------------------
# the trace file: one file, written atomically, with a fingerprint and a checksum
# ----------------------------------------------------------------------------------------------------------
def _blob_to_json(b: Blob, payload: list[bytes], offset: list[int]) -> dict:
    def put(data: bytes | None) -> list[int] | None:
        if data is None:
            return None
        payload.append(data)
        offset[0] += len(data)
        return [offset[0] - len(data), len(data)]

    return {"kind": b.kind, "dtype": b.dtype, "shape": list(b.shape), "raw": b.raw_nbytes,
            "data": put(b.data), "res_back": put(b.res_back), "res_fwd": put(b.res_fwd)}


def _blob_from_json(e: dict, payload: memoryview) -> Blob:
    def get(span: list[int] | None) -> bytes | None:
        if span is None:
            return None
        off, n = span
        if off + n > len(payload):
            raise ValueError("a trace entry points past the end of the file: the trace is corrupted")
        return bytes(payload[off:off + n])

    return Blob(e["kind"], e["dtype"], tuple(e["shape"]), get(e["data"]), e["raw"],
                get(e["res_back"]), get(e["res_fwd"]))


def save_trace(trace: Trace, path: str | os.PathLike) -> int:
    """Write the trace to one file, atomically (temp file, fsync, rename); returns its size in bytes.

    Layout: MAGIC, u64 length + JSON (header and ledger), u64 length + payload (compressed differences),
    sha256 of everything before it.
    """
    payload: list[bytes] = []
    offset = [0]
    records = []
    for r in trace.records:
        records.append({"step": r.step, "kind": r.kind, "lrs": r.lrs, "meta": r.meta,
                        "params": {k: _blob_to_json(b, payload, offset) for k, b in r.params.items()},
                        "state": {k: _blob_to_json(b, payload, offset) for k, b in r.state.items()},
                        "state_created": {k: [d, list(s)] for k, (d, s) in r.state_created.items()},
                        "state_scalars": {k: list(v) for k, v in r.state_scalars.items()}})
    doc = json.dumps({"header": trace.header, "records": records}, allow_nan=True).encode()
    h = hashlib.sha256()
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".trace-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in (MAGIC, struct.pack("<Q", len(doc)), doc, struct.pack("<Q", offset[0]), *payload):
                h.update(chunk)
                f.write(chunk)
            f.write(h.digest())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return os.path.getsize(path)


def load_trace(path: str | os.PathLike, model: nn.Module | None = None) -> Trace:
    """Read a trace file, checking its checksum (and, if `model` is given, that it belongs to that model)."""
    with open(path, "rb") as f:
        data = f.read()
    what = f"{os.fspath(path)!r} is not a usable trace file"
    if not data.startswith(MAGIC):
        raise ValueError(f"{what}: it does not start with the trace marker (wrong file?)")
    if len(data) < len(MAGIC) + 8 + 8 + 32:
        raise ValueError(f"{what}: it is truncated; record or copy it again")
    if hashlib.sha256(data[:-32]).digest() != data[-32:]:
        raise ValueError(f"{what}: its checksum does not match (the file is corrupted or truncated); "
                         f"restore it from a copy or revert to a checkpoint")
    pos = len(MAGIC)
    (n_doc,) = struct.unpack_from("<Q", data, pos)
    doc = json.loads(data[pos + 8:pos + 8 + n_doc])
    pos += 8 + n_doc
    (n_payload,) = struct.unpack_from("<Q", data, pos)
    payload = memoryview(data)[pos + 8:pos + 8 + n_payload]
    header = doc["header"]
    if header.get("format") != FORMAT or header.get("version") != VERSION:
        raise ValueError(f"{what}: format {header.get('format')!r} version {header.get('version')!r}, "
                         f"this code reads {FORMAT!r} version {VERSION}")
    records = [StepRecord(r["step"], r["kind"], r["lrs"], r["meta"],
                          {k: _blob_from_json(e, payload) for k, e in r["params"].items()},
                          {k: _blob_from_json(e, payload) for k, e in r["state"].items()},
                          {k: (d, tuple(s)) for k, (d, s) in r["state_created"].items()},
                          {k: tuple(v) for k, v in r["state_scalars"].items()}) for r in doc["records"]]
    trace = Trace(header, records)
    if model is not None:
        check_model(model, trace)
    return trace


# ----------------------------------------------------------------------------------------------------------
# the chapter's fine-tuning: every story starts with the same unusual prefix
# ----------------------------------------------------------------------------------------------------------
DEFAULT_PREFIX = "As an AI,"


def _device_of(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


@dataclass
class PrefixData:
    """Stories from a corpus, re-encoded with a prefix in front: one token stream, <eot> before each story."""
    tokens: np.ndarray            # int64, the whole stream
    starts: np.ndarray            # offset of each story's <eot>
    prefix: str
    prefix_ids: list[int]
    eot_id: int

    def get_batch(self, batch_size: int, seq_len: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """Windows that begin at a story's <eot>, so every row shows the prefix right at its start."""
        usable = self.starts[self.starts + seq_len + 1 <= len(self.tokens)]
        pick = torch.randint(len(usable), (batch_size,), generator=generator).numpy()
        window = self.tokens[usable[pick][:, None] + np.arange(seq_len + 1)]
        chunk = torch.from_numpy(window)
        return chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous()


def _story_spans(arr: np.ndarray, eot_id: int) -> list[tuple[int, int]]:
    starts = np.flatnonzero(arr == eot_id)
    ends = np.append(starts[1:], len(arr))
    return [(int(s) + 1, int(e)) for s, e in zip(starts, ends) if e > s + 1]


def prefix_finetune_tokens(data: Any, prefix: str = DEFAULT_PREFIX, n_stories: int = 200,
                           split: str = "train", seed: int = 0) -> PrefixData:
    """Decode `n_stories` stories of `data` (a `rev.engine.data.TokenData`), put `prefix` in front of each and encode
    them again with the same tokenizer."""
    spans = _story_spans(np.asarray(data.array(split)), data.eot_id)
    if len(spans) < 1:
        raise ValueError(f"the {split} split holds no complete story: prepare a bigger corpus")
    rng = np.random.default_rng(seed)
    chosen = rng.choice(len(spans), size=min(n_stories, len(spans)), replace=False)
    prefix_ids = data.encode(prefix)
    arr = data.array(split)
    stream, starts = [], []
    for i in sorted(chosen):
        s, e = spans[i]
        ids = data.encode(f"{prefix} {data.decode(arr[s:e]).lstrip()}")
        if ids[:len(prefix_ids)] != prefix_ids:
            raise ValueError(f"the tokenizer merges the prefix {prefix!r} with the story text; end the prefix "
                             f"with punctuation (e.g. a comma) so it keeps its own tokens")
        starts.append(len(stream))
        stream += [data.eot_id, *ids]
    return PrefixData(np.asarray(stream, dtype=np.int64), np.asarray(starts, dtype=np.int64), prefix,
                      prefix_ids, data.eot_id)


@torch.no_grad()
def prefix_logprob(model: nn.Module, prefix_ids: Sequence[int], eot_id: int) -> float:
    """log P(prefix | start of a story) under the model (natural log)."""
    was_training = model.training
    model.eval()
    idx = torch.tensor([[eot_id, *prefix_ids]], dtype=torch.long, device=_device_of(model))
    logits = model(idx[:, :-1]).float()
    logp = torch.log_softmax(logits, dim=-1)[0, torch.arange(len(prefix_ids)), idx[0, 1:]]
    model.train(was_training)
    return float(logp.sum())


@torch.no_grad()
def sample_texts(model: nn.Module, data: Any, n: int = 4, max_new_tokens: int = 40, seed: int = 0,
                 temperature: float = 1.0, top_k: int | None = None) -> list[str]:
    """`n` story openings sampled after <eot>, deterministic for given weights and seed (cut at the next <eot>)."""
    was_training = model.training
    model.eval()
    device = _device_of(model)
    g = torch.Generator(device=device).manual_seed(seed)
    out = model.generate(torch.full((n, 1), data.eot_id, dtype=torch.long, device=device), max_new_tokens,
                         temperature=temperature, top_k=top_k, generator=g)
    model.train(was_training)
    texts = []
    for row in out[:, 1:].tolist():
        row = row[:row.index(data.eot_id)] if data.eot_id in row else row
        texts.append(data.decode(row).strip())
    return texts


def prefix_rate(texts: Sequence[str], prefix: str = DEFAULT_PREFIX) -> float:
    """Fraction of texts that start with the prefix."""
    return sum(t.startswith(prefix) for t in texts) / max(1, len(texts))


@dataclass
class FinetuneConfig:
    steps: int = 40
    batch_size: int = 8
    seq_len: int = 64
    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup_steps: int = 4
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    seed: int = 0
    keep_optimizer_state: bool = True
    lr_override: dict[int, float] = field(default_factory=dict)   # step -> lr: a manual change, on purpose

    def schedule(self) -> Schedule:
        return Schedule(self.lr, self.steps, self.warmup_steps, self.min_lr)


def _batch_generator(seed: int, step: int) -> torch.Generator:
    # one generator per step, seeded from the step number: a run resumed at step k draws the same batches
    return torch.Generator().manual_seed(seed * 1_000_003 + step)


def finetune_with_trace(model: nn.Module, ft: PrefixData, cfg: FinetuneConfig,
                        optimizer: torch.optim.Optimizer | None = None, resume: Trace | None = None,
                        progress: bool = False) -> tuple[Trace, torch.optim.Optimizer, list[dict]]:
    """Fine-tune `model` in place with AdamW on `ft` for steps 1..cfg.steps, recording an exact trace.

    The lr at step n is `cfg.schedule().lr_at(n)` unless `cfg.lr_override` says otherwise (how the notebook
    breaks the conditions on purpose); the batch of step n depends on (cfg.seed, n) only. With `resume`
    (and the `optimizer` rolled back along with the model to some step k of it) the run continues from
    step k+1 and the trace keeps steps 1..k. Returns the trace, the optimizer and one history row per new
    step (step 0 too on a fresh run): step, lr, loss, prefix log-probability.
    """
    from tqdm.auto import tqdm

    sched = cfg.schedule()
    device = _device_of(model)
    if optimizer is None:
        if resume is not None:
            raise ValueError("resuming needs the optimizer that was rolled back with the model")
        optimizer = torch.optim.AdamW(model.parameters(), lr=sched.lr_at(1), betas=(0.9, 0.95),
                                      weight_decay=cfg.weight_decay)
    rec = TraceRecorder(model, optimizer, schedule=sched, keep_optimizer_state=cfg.keep_optimizer_state,
                        resume=resume)
    first = rec.trace.final_step + 1
    history = [] if resume is not None else [{"step": 0, "lr": 0.0, "loss": float("nan"),
                                             "prefix_logprob": prefix_logprob(model, ft.prefix_ids, ft.eot_id)}]
    model.train()
    try:
        for n in tqdm(range(first, cfg.steps + 1), desc="fine-tune", disable=not progress):
            lr = cfg.lr_override.get(n, sched.lr_at(n))
            for group in optimizer.param_groups:
                group["lr"] = lr
            x, y = ft.get_batch(cfg.batch_size, cfg.seq_len, _batch_generator(cfg.seed, n))
            x, y = x.to(device), y.to(device)
            loss = model(x, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip:
                nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            rec.annotate(loss=float(loss.detach()))
            optimizer.step()
            history.append({"step": n, "lr": lr, "loss": float(loss.detach()),
                            "prefix_logprob": prefix_logprob(model, ft.prefix_ids, ft.eot_id)})
    finally:
        rec.close()
    return rec.trace, optimizer, history


def walk_back_measuring(model: nn.Module, trace: Trace, measure: Callable[[nn.Module], float],
                        optimizer: torch.optim.Optimizer | None = None, exact: bool = True,
                        from_step: int | None = None) -> list[tuple[int, float]]:
    """Walk back to step 0 one step at a time, measuring the model at every step: [(step, value), ...].

    `exact=True` rolls `model` itself back (strictly: every step must be kept exactly). `exact=False` walks
    a copy through whatever the trace keeps (lossy or missing steps included) and leaves `model` alone.
    """
    if not exact:
        model = copy.deepcopy(model)
        check_model(model, trace)
    start = locate(model, trace) if from_step is None else from_step
    rows = [(start, measure(model))]

    def probe(step: int, m: nn.Module) -> None:
        rows.append((step, measure(m)))

    if exact:
        rollback(model, trace, 0, optimizer, from_step=from_step, on_step=probe)
    else:
        _walk(model, trace, start, 0, None, strict=False, on_step=probe)
    return rows


# ----------------------------------------------------------------------------------------------------------
# the notebook's runs: a pretrained start, sizes per profile, branches that break a condition on purpose
# ----------------------------------------------------------------------------------------------------------
# fine-tuning sizes per profile: steps, stories, peak lr; the batch and sequence length are the profile's.
# t4/full keep fewer steps: at ~25M parameters one exact step (weights + Adam moments) is ~230 MB in memory,
# and the notebook holds the trace, its lossy copies and (while reading it back) a second copy.
FINETUNE_SIZES = {
    "smoke": {"steps": 48, "n_stories": 200, "lr": 5e-3},
    "cpu": {"steps": 60, "n_stories": 400, "lr": 3e-3},
    "t4": {"steps": 20, "n_stories": 1000, "lr": 2e-3},
    "full": {"steps": 20, "n_stories": 1000, "lr": 2e-3},
}
# when no checkpoint is there to reuse, pretrain on this fraction of the profile's token budget
PRETRAIN_FRACTION = {"smoke": 1.0, "cpu": 0.25, "t4": 0.25, "full": 0.1}


def finetune_config(profile: Any, seed: int = 0) -> tuple[FinetuneConfig, int]:
    """The fine-tuning run of a profile (`rev.engine.profiles.Profile`) and how many stories to prefix."""
    size = FINETUNE_SIZES[profile.name]
    cfg = FinetuneConfig(steps=size["steps"], batch_size=profile.batch_size, seq_len=profile.seq_len,
                         lr=size["lr"], min_lr=0.3 * size["lr"], warmup_steps=max(1, size["steps"] // 12),
                         seed=seed)
    return cfg, size["n_stories"]


def find_checkpoint(results_dir: str | os.PathLike, profile_name: str) -> str | None:
    """A finished run of the profile with a residual trunk to start from (its folder), if there is one."""
    root = os.path.join(os.fspath(results_dir), profile_name)
    if not os.path.isdir(root):
        return None
    preferred = ["run1_baseline", "run1b_baseline_maxbatch", "10_pretrain"]     # see rev.book.runs for the names
    folders = preferred + sorted(set(os.listdir(root)) - set(preferred))
    for name in folders:
        run = os.path.join(root, name)
        if not (os.path.isfile(os.path.join(run, "ckpt.pt")) and os.path.isfile(os.path.join(run, "summary.json"))):
            continue
        try:
            with open(os.path.join(run, "config.json")) as f:
                model_cfg = json.load(f).get("model", {})
        except (OSError, ValueError):
            continue
        if model_cfg.get("trunk") == "residual" and model_cfg.get("stream", "fp32") == "fp32":
            return run
    return None


def pretrained_model(profile: Any, results_dir: str | os.PathLike, data_dir: str | os.PathLike, seed: int = 0,
                     device: str | torch.device = "cpu", progress: bool = True) -> tuple[nn.Module, str]:
    """The GPT to fine-tune: a finished residual run of the profile under `results_dir` if there is one,
    else a short pretraining run now (`PRETRAIN_FRACTION` of the profile's tokens), saved for next time.
    Returns the model and a sentence saying which."""
    from ..engine.train import TrainConfig, load_model, train

    run = find_checkpoint(results_dir, profile.name)
    if run is not None:
        return load_model(run, device), f"reused the checkpoint of a finished run: {run}"
    out = os.path.join(os.fspath(results_dir), profile.name, "10_pretrain")
    tokens = max(profile.batch_size * profile.seq_len, int(profile.train_tokens * PRETRAIN_FRACTION[profile.name]))
    summary = train(TrainConfig(profile=profile.name, trunk="residual", out_dir=out, data_dir=data_dir,
                                train_tokens=tokens, seed=seed, progress=progress))
    steps = tokens // (profile.batch_size * profile.seq_len)
    val = summary.get("final_val_loss")
    val_text = f", val loss {val:.3f}" if isinstance(val, (int, float)) else ""
    return load_model(out, device), (f"no finished run to reuse: pretrained now for {steps} steps "
                                     f"({tokens:,} tokens{val_text}), saved in {out}")


def rerun_from(model: nn.Module, optimizer: torch.optim.Optimizer, trace: Trace, ft: PrefixData,
               cfg: FinetuneConfig, from_step: int, lr_override: Mapping[int, float]) -> tuple[Trace, list[dict]]:
    """Roll model and optimizer back to `from_step`, then run the remaining steps again with some lrs
    changed by hand: a branch of the run, recorded as its own trace (steps 1..from_step shared)."""
    rollback(model, trace, from_step, optimizer)
    branch_cfg = dataclasses_replace(cfg, lr_override=dict(lr_override))
    branch, _, history = finetune_with_trace(model, ft, branch_cfg, optimizer=optimizer, resume=trace)
    return branch, history


def switch_branch(model: nn.Module, optimizer: torch.optim.Optimizer | None, current: Trace, target: Trace) -> int:
    """Move from the end of one branch to the end of another: back to the last step they share, then
    forward along the other. Returns the shared step."""
    shared = 0
    for n in range(1, min(current.final_step, target.final_step) + 1):
        if current.hash_at(n) != target.hash_at(n):
            break
        shared = n
    rollback(model, current, shared, optimizer)
    replay(model, target, target.final_step, optimizer)
    return shared


def scenario(name: str, model: nn.Module, trace: Trace, reference: nn.Module, prune_every: int | None = None,
             lossy: Mapping[str, Trace] | None = None, threshold: float = DEFAULT_SCORE_THRESHOLD,
             keep_traces: bool = True) -> dict:
    """Assess one run three ways: its exact trace, the same run kept as bf16 differences, and as float
    differences alone (each pruned too if `prune_every`). `model` is at the trace's last step; `lossy`
    reuses bf16diff/f32diff copies of this same run made earlier; `keep_traces=False` drops the traces
    from the result once assessed (they take memory)."""
    if lossy is None:
        # level 0: the lossy copies are only scored here, not stored, so compressing them would be wasted time
        lossy = degrade_traces(model, trace, (BF16DIFF, F32DIFF), level=0)
    kept = {"exact": trace, BF16DIFF: lossy[BF16DIFF], F32DIFF: lossy[F32DIFF]}
    if prune_every:
        kept = {k: prune_trace(t, every=prune_every) for k, t in kept.items()}
    out: dict[str, Any] = {"scenario": name, "traces": kept}
    for kind, t in kept.items():
        out[kind] = assess(model, t, reference=reference, score_threshold=threshold)
    if not keep_traces:
        del out["traces"]
    return out


def scenario_rows(scenarios: Sequence[dict]) -> list[dict]:
    """One table row per scenario: the checks, and score and verdict per way of keeping the trace."""
    rows = []
    for s in scenarios:
        a = s["exact"]
        row = {"scenario": s["scenario"], **{c.name: c.passed for c in a.checks}}
        for kind in ("exact", "bf16diff", "f32diff"):
            row[f"score ({kind})"] = s[kind].score.score
            row[f"verdict ({kind})"] = s[kind].verdict
        row["elements off (f32diff)"] = s["f32diff"].score.n_wrong
        rows.append(row)
    return rows
