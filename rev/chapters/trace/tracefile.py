"""Notebook 10 (fine-tune trace and rollback): the trace file. One file per trace with the model's
fingerprint, the ledger, the compressed changes and a sha256 checksum, written atomically.

Layout: MAGIC, u64 length + JSON (header and ledger), u64 length + payload (compressed differences), sha256
of everything before it. `load_trace` refuses a file that is not a trace, is truncated, fails its checksum
(one flipped bit anywhere is enough), or was written by another format version.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct

from torch import nn

from ...base.files import atomic_path
from .codec import Blob
from .records import FORMAT, VERSION, StepRecord, Trace, check_model

MAGIC = b"REVTRACE"


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
    """Write the trace to one file, atomically (`rev.base.files.atomic_path`, fsynced); returns its size in bytes.

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
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        for chunk in (MAGIC, struct.pack("<Q", len(doc)), doc, struct.pack("<Q", offset[0]), *payload):
            h.update(chunk)
            f.write(chunk)
        f.write(h.digest())
        f.flush()
        os.fsync(f.fileno())           # on disk before the rename makes it the trace
    return os.path.getsize(path)


def load_trace(path: str | os.PathLike, model: nn.Module | None = None) -> Trace:
    """Read a trace file, checking its checksum (and, if `model` is given, that it belongs to that model)."""
    with open(path, "rb") as f:
        data = f.read()
    what = "not a usable trace file"
    if not data.startswith(MAGIC):
        raise ValueError(f"{what}: no trace marker")
    if len(data) < len(MAGIC) + 8 + 8 + 32:
        raise ValueError(f"{what}: truncated")
    if hashlib.sha256(data[:-32]).digest() != data[-32:]:
        raise ValueError(f"{what}: checksum mismatch (corrupted)")
    pos = len(MAGIC)
    (n_doc,) = struct.unpack_from("<Q", data, pos)
    doc = json.loads(data[pos + 8:pos + 8 + n_doc])
    pos += 8 + n_doc
    (n_payload,) = struct.unpack_from("<Q", data, pos)
    payload = memoryview(data)[pos + 8:pos + 8 + n_payload]
    header = doc["header"]
    if header.get("format") != FORMAT or header.get("version") != VERSION:
        raise ValueError(f"{what}: version {header.get('version')!r}, not {VERSION}")
    records = [StepRecord(r["step"], r["kind"], r["lrs"], r["meta"],
                          {k: _blob_from_json(e, payload) for k, e in r["params"].items()},
                          {k: _blob_from_json(e, payload) for k, e in r["state"].items()},
                          {k: (d, tuple(s)) for k, (d, s) in r["state_created"].items()},
                          {k: tuple(v) for k, v in r["state_scalars"].items()}) for r in doc["records"]]
    trace = Trace(header, records)
    if model is not None:
        check_model(model, trace)
    return trace
