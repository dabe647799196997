"""Writing files so that a crash never leaves a half-written one, and reading JSON with an error that says which
file is broken. Every module that writes results, checkpoints, logs or archives goes through `atomic_path`."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import zipfile
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


# never walked: caches, build leftovers, compiled and temporary files
_SKIP_DIRS = {"__pycache__", ".ipynb_checkpoints", ".pytest_cache"}
_SKIP_SUFFIXES = (".pyc", ".pyo", ".tmp")


def walk_files(folder: Path) -> Iterator[Path]:
    """Every file under `folder`, sorted, leaving out caches, build leftovers and the hidden scratch folders of a
    report being written or a merge in progress."""
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.endswith(".egg-info")
                             and not d.startswith(".report-") and not d.startswith(".merge-"))
        for f in sorted(filenames):
            if not f.endswith(_SKIP_SUFFIXES):
                yield Path(dirpath) / f


def atomic_zip(out: Path, entries: list[tuple[Path, str]], extra: dict[str, str]) -> Path:
    """Write `entries` ((source path, name in zip)) and `extra` (name -> text) into `out` atomically."""
    with atomic_path(out) as tmp, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        for src, name in entries:
            # token files are large and barely compress: fast deflate keeps bundling quick
            level = 1 if src.suffix == ".bin" else 6
            zf.write(src, name, compress_type=zipfile.ZIP_DEFLATED, compresslevel=level)
        for name, text in extra.items():
            zf.writestr(name, text)
    return out


def swap_in(new: Path, dest: Path) -> None:
    """Put `new` (a file or a folder) where `dest` is; an existing `dest` is moved aside first and removed only
    afterwards, so a reader never finds `dest` half replaced."""
    old = dest.with_name(f".{dest.name}.old")
    if old.exists():
        shutil.rmtree(old) if old.is_dir() else old.unlink()
    if dest.exists():
        os.replace(dest, old)
    os.replace(new, dest)
    if old.exists():
        shutil.rmtree(old) if old.is_dir() else old.unlink()


CHECKOUT = Path(__file__).resolve().parents[2]


def shown_path(path: str | Path) -> str:
    """A path as printed for a reader: relative to the checkout when it lies inside it, so a saved notebook names
    no machine's folders; absolute otherwise (the reader chose that place)."""
    p = Path(path).resolve()
    return str(p.relative_to(CHECKOUT)) if p.is_relative_to(CHECKOUT) else str(p)
