"""Writing files so that a crash never leaves a half-written one, and reading JSON with an error that says which
file is broken. Every module that writes results, checkpoints, logs or archives goes through `atomic_path`; every
command that writes for a person (editions, course, site, report, bundles, references) first asks `check_output`
where it may write and what it may replace."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Iterable, Iterator


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


def _same_kind_of_zip(path: Path, extra: dict[str, str]) -> bool:
    """Whether `path` is a zip that holds a file named as one of `extra`'s (a bundle's BUNDLE.json, an archive's
    ARCHIVE.json): one these commands wrote, which they replace."""
    markers = {name.rsplit("/", 1)[-1] for name in extra}
    try:
        with zipfile.ZipFile(path) as zf:
            return any(name.rsplit("/", 1)[-1] in markers for name in zf.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def atomic_zip(out: Path, entries: list[tuple[Path, str]], extra: dict[str, str], force: bool = False) -> Path:
    """Write `entries` ((source path, name in zip)) and `extra` (name -> text, its marker first) into `out`
    atomically. An existing `out` that is not such a zip is replaced only with `force` (`check_output`)."""
    out = Path(out)
    check_output(out, [out] if out.is_file() and not _same_kind_of_zip(out, extra) else [], force=force)
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


# --- the one rule every command that writes keeps ------------------------------------------------------------

# The checkout's own folders: what a person wrote (the instructor edition, the package, its tests). No command writes
# into them, nor into the checkout's root itself; the one exception is named by its command (`nbref` writes the
# reference outputs in tests/notebooks/, which is what it is for).
SOURCE_DIRS = ("notebooks", "rev", "tests")
WRITTEN_RECORD = ".revbook-written.json"   # what a command wrote into a folder, by content, to tell edits apart
_LISTED = 5                                # files named in a refusal; the rest are counted


def _protected(dest: Path, may_write: Iterable[Path]) -> str | None:
    """Why `dest` (resolved) is a place no command writes to, or None."""
    if any(dest == p or dest.is_relative_to(p) for p in (Path(m).resolve() for m in may_write)):
        return None
    if dest == CHECKOUT:
        return "the checkout itself"
    if CHECKOUT.is_relative_to(dest):
        return f"a folder that holds the checkout ({CHECKOUT})"
    for folder in SOURCE_DIRS:
        if dest.is_relative_to(CHECKOUT / folder):
            return f"inside the checkout's own {folder}/"
    return None


def check_output(dest: str | Path, replaced: Iterable[Path] = (), *, force: bool = False,
                 may_write: Iterable[Path] = (), what: str = "--out") -> None:
    """The rule every command that writes (student, course, bundle, site, report, nbref, workbook) keeps, checked
    before it writes anything; raises ValueError (one line, what to do) when it would break it.

    * `dest`, the folder or file it writes, is never the checkout, a folder holding it, or inside the checkout's
      own folders (`SOURCE_DIRS`), except under `may_write` (a command whose purpose is to write there);
    * `replaced`, the existing files it would overwrite or delete that a person may have edited (each command
      knows which: `edited_files` for the copies people work in), are replaced only with `force`; the refusal
      names them."""
    why = _protected(Path(dest).resolve(), may_write)
    if why is not None:
        raise ValueError(f"{what} would write into {Path(dest).resolve()}, {why}, where the project's own files "
                         f"are and nothing writes: give a folder outside the checkout's notebooks/, rev/ and tests/ "
                         f"(e.g. under build/)")
    lost = sorted({Path(p) for p in replaced})
    if lost and not force:
        names = ", ".join(shown_path(p) for p in lost[:_LISTED])
        more = f" and {len(lost) - _LISTED} more" if len(lost) > _LISTED else ""
        raise ValueError(f"{names}{more} would be replaced and may hold a person's work (edited since this "
                         f"command wrote {'it' if len(lost) == 1 else 'them'}, or not written by it): pass --force "
                         f"to replace {'it' if len(lost) == 1 else 'them'}, or give another {what}")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _record(folder: Path) -> dict[str, str]:
    try:
        record = json.loads((folder / WRITTEN_RECORD).read_text())
    except (OSError, ValueError):     # none yet, or damaged: nothing counts as written by a command
        return {}
    return record if isinstance(record, dict) else {}


def edited_files(folder: str | Path, paths: Iterable[Path]) -> list[Path]:
    """Of `paths` (files under `folder` a command is about to overwrite or delete), those that may hold a person's
    edits: each one that exists with content other than what a command recorded writing there
    (`record_written`). A file written before records were kept counts as edited: nothing says it was not."""
    folder, record = Path(folder), _record(Path(folder))
    return [p for p in map(Path, paths)
            if p.is_file() and record.get(p.relative_to(folder).as_posix()) != _digest(p)]


def record_written(folder: str | Path, paths: Iterable[Path]) -> None:
    """Note `paths` (under `folder`), just written by a command, by content; what the record held of files that
    are gone is dropped."""
    folder = Path(folder)
    record = {k: v for k, v in _record(folder).items() if (folder / k).is_file()}
    record.update({Path(p).relative_to(folder).as_posix(): _digest(Path(p)) for p in paths})
    write_json(folder / WRITTEN_RECORD, dict(sorted(record.items())))
