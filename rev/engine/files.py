"""Writing files so that a crash never leaves a half-written one, and reading JSON with an error that says which
file is broken. Every module that writes results, checkpoints, logs or archives goes through `atomic_path`."""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator


_UMASK = os.umask(0)
os.umask(_UMASK)


@contextlib.contextmanager
def atomic_path(path: str | Path, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path beside `path`; when the block ends without error it replaces `path` in one rename
    (readers see the old file or the new one, never half of one); on error it is removed and `path` is untouched.
    `suffix` ends the temporary name, for writers that go by the extension (papermill wants `.ipynb`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        if tmp.exists():      # mkstemp makes the file owner-only; give it the mode a plain open() would
            os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text(path: str | Path, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def write_bytes(path: str | Path, data: bytes) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_json(path: str | Path, obj: Any) -> Path:
    """JSON, indented, written atomically; values JSON does not know (paths, numpy scalars) become strings."""
    return write_text(path, json.dumps(obj, indent=2, default=str))


def read_json(path: str | Path) -> Any:
    """Parse a JSON file; a missing or corrupt file raises ValueError naming it."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{path} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not valid JSON ({e}); delete it and re-create it") from None
