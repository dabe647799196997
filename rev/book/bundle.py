"""`python -m rev bundle` (used by colab/revbook_colab.ipynb and notebook 07): the zips that carry the workbook to
another machine and its results back, and `merge`, which unpacks such a results zip.

* ``python -m rev bundle [--profile P] [--out PATH]`` -- the code (``rev/``, ``pyproject.toml``, ``README.md``,
  ``environment.yml``, ``tests/``, ``notebooks/``, ``colab/``, ``.ci/``) and, when it has been prepared here, the
  profile's corpus (``data/<data_name>/``: tokenizer, token files, meta.json), so a Colab session neither
  downloads nor tokenizes anything. Everything sits under one ``revbook/`` folder in the zip.
* ``python -m rev bundle --results PROFILE`` -- ``results/<PROFILE>/`` without checkpoints (small enough to
  download from Colab), with a marker file; ``python -m rev report --merge ARCHIVE`` takes it back in (`merge`).

Both zips are written to a temporary name and renamed at the end: an interrupted run leaves no half zip.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import tempfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import Iterator

from ..engine.cli import file_arg, folder_arg
from ..engine.files import atomic_path, read_json, write_json

BUNDLE_DIRS = ("rev", "tests", "notebooks", "colab", ".ci")
BUNDLE_FILES = ("pyproject.toml", "README.md", "environment.yml")
DATA_FILES = ("tokenizer.json", "train.bin", "val.bin", "meta.json")
TOP = "revbook"                           # the folder the code bundle unpacks into
RESULTS_MARKER = "ARCHIVE.json"           # written into results archives; `merge` checks it
RESULTS_KIND = "revbook-results"
MERGED_LOG = "MERGED.json"                # kept in a profile folder by `merge`: the archives unpacked into it
BUNDLE_MARKER = "BUNDLE.json"
# never packed: caches, build leftovers, executed notebook scratch, checkpoints of the results archive
_SKIP_DIRS = {"__pycache__", ".ipynb_checkpoints", ".pytest_cache"}
_SKIP_SUFFIXES = (".pyc", ".pyo", ".tmp")


def source_root() -> Path:
    """The checkout `rev` was imported from (the folder holding pyproject.toml and rev/)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file():
        raise ValueError(f"rev is not imported from a source checkout ({root} has no pyproject.toml): "
                         f"bundle from a clone of the repository, installed with `pip install -e .`")
    return root


def _walk(folder: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.endswith(".egg-info")
                             and not d.startswith(".report-") and not d.startswith(".merge-"))
        for f in sorted(filenames):
            if not f.endswith(_SKIP_SUFFIXES):
                yield Path(dirpath) / f


def code_files(root: Path) -> list[Path]:
    """The files of the code bundle, relative to `root`."""
    missing = [f for f in ("rev", "pyproject.toml") if not (root / f).exists()]
    if missing:
        raise ValueError(f"{root} is not a revbook checkout (missing {', '.join(missing)})")
    files = [Path(f) for f in BUNDLE_FILES if (root / f).is_file()]
    for d in BUNDLE_DIRS:
        if (root / d).is_dir():
            files += [p.relative_to(root) for p in _walk(root / d)]
    return files


def data_folder(profile: str, data_dir: Path) -> Path | None:
    """The profile's prepared corpus folder if it is complete here, else None."""
    from ..engine.corpus import profile_folder
    from ..engine.profiles import get_profile

    folder = profile_folder(get_profile(profile), data_dir)
    return folder if all((folder / f).is_file() for f in DATA_FILES) else None


def _atomic_zip(out: Path, entries: list[tuple[Path, str]], extra: dict[str, str]) -> Path:
    """Write `entries` ((source path, name in zip)) and `extra` (name -> text) into `out` atomically."""
    with atomic_path(out) as tmp, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        for src, name in entries:
            # token files are large and barely compress: fast deflate keeps bundling quick
            level = 1 if src.suffix == ".bin" else 6
            zf.write(src, name, compress_type=zipfile.ZIP_DEFLATED, compresslevel=level)
        for name, text in extra.items():
            zf.writestr(name, text)
    return out


def make_bundle(profile: str = "t4", out: str | Path | None = None, data_dir: str | Path | None = None,
                root: str | Path | None = None) -> Path:
    """Zip the code (and the profile's prepared data, when present) for another machine; returns the zip path.

    `root` is the checkout to pack (default: the one `rev` is imported from); `data_dir` defaults to
    ``<root>/data``; `out` to ``<root>/dist/revbook-<profile>.zip``.
    """
    from ..engine.profiles import resolve_profile_name

    profile = resolve_profile_name(profile)
    root = Path(root) if root is not None else source_root()
    data_dir = Path(data_dir) if data_dir is not None else root / "data"
    out = Path(out) if out is not None else root / "dist" / f"revbook-{profile}.zip"
    entries = [(root / f, f"{TOP}/{f.as_posix()}") for f in code_files(root)]
    data = data_folder(profile, data_dir)
    if data is not None:
        entries += [(data / f, f"{TOP}/data/{data.name}/{f}") for f in DATA_FILES]
    manifest = {"kind": "revbook-bundle", "profile": profile,
                "data": f"data/{data.name}" if data is not None else None,
                "files": [name[len(TOP) + 1:] for _, name in entries]}
    return _atomic_zip(out, entries, {f"{TOP}/{BUNDLE_MARKER}": json.dumps(manifest, indent=2)})


def _summaries(folder: Path) -> list[dict]:
    """Every readable run summary under `folder` (an unreadable one is skipped: it names no device)."""
    out = []
    for s in sorted(folder.rglob("summary.json")):
        try:
            summary = read_json(s)
        except (OSError, ValueError):
            continue
        if isinstance(summary, dict):
            out.append(summary)
    return out


def _devices(folder: Path) -> set[str]:
    """The devices the runs under `folder` were made on."""
    return {str(s["device"]) for s in _summaries(folder) if s.get("device")}


def make_results_archive(profile: str, results_root: str | Path = "results", out: str | Path | None = None,
                         max_file_mib: float = 20.0) -> Path:
    """Zip results/<profile>/ for `python -m rev report --merge`; returns the zip path.

    Checkpoints stay behind, and so does any other file over `max_file_mib` (a companion chapter's trace, say):
    the archive is meant to be downloaded from Colab. What was left out is listed in its ARCHIVE.json.
    """
    results_root = Path(results_root)
    folder = results_root / profile
    if not folder.is_dir():
        raise ValueError(f"no results for profile {profile!r} under {results_root}: run the workbook first "
                         f"(`python -m rev workbook --profile {profile}`)")
    # hidden entries are scratch (a report being written, a merge in progress): not results
    candidates = [p for p in _walk(folder) if p.name != RESULTS_MARKER
                  and not p.relative_to(folder).parts[0].startswith(".")]
    limit = max_file_mib * 2**20
    left_out = [p for p in candidates if p.name == "ckpt.pt" or p.stat().st_size > limit]
    files = [p for p in candidates if p not in left_out]
    if not any(p.name in ("summary.json", "log.csv", "maxbatch.json", "screening.json") for p in files):
        raise ValueError(f"{folder} holds no run results yet (no summary.json or log.csv): nothing to archive")
    marker = {"kind": RESULTS_KIND, "format": 1, "profile": profile, "devices": sorted(_devices(folder)),
              "runs": sorted({str(s.get("run")) for s in _summaries(folder)}),
              "left_out": [p.relative_to(folder).as_posix() for p in left_out]}
    out = Path(out) if out is not None else results_root.parent / "dist" / f"results-{profile}.zip"
    entries = [(p, f"results/{profile}/{p.relative_to(folder).as_posix()}") for p in files]
    return _atomic_zip(out, entries, {f"results/{profile}/{RESULTS_MARKER}": json.dumps(marker, indent=2)})


# -------------------------------------------------------------------------------------------------------------
# Merging a results archive brought back from another machine
# -------------------------------------------------------------------------------------------------------------

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


def _merged_log(profile_dir: Path) -> list:
    """The archives merged into `profile_dir` so far (a damaged log starts afresh)."""
    try:
        log = read_json(profile_dir / MERGED_LOG) if (profile_dir / MERGED_LOG).exists() else []
    except (OSError, ValueError):
        log = []
    return log if isinstance(log, list) else []


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@+-]*$")


def _bad_archive(archive: Path, why: str) -> ValueError:
    return ValueError(f"{archive} is not a revbook results archive: {why}. Make one where the runs are with "
                      f"`python -m rev bundle --results PROFILE` and merge that zip.")


def _archive_layout(archive: Path, zf: zipfile.ZipFile) -> dict[str, list[str]]:
    """Profile -> member names, after checking that every member lies inside results/<profile>/."""
    files = [i for i in zf.infolist() if not i.is_dir()]
    if not files:
        raise _bad_archive(archive, "it is empty")
    layout: dict[str, list[str]] = {}
    for info in files:
        parts = PurePosixPath(info.filename).parts
        if "\\" in info.filename or info.filename.startswith("/") or ".." in parts:
            raise _bad_archive(archive, f"member {info.filename!r} points outside its folder")
        if len(parts) < 3 or parts[0] != "results" or not _NAME.match(parts[1]):
            raise _bad_archive(archive, f"member {info.filename!r} is not under results/<profile>/")
        layout.setdefault(parts[1], []).append(info.filename)
    for profile, names in layout.items():
        marker = f"results/{profile}/{RESULTS_MARKER}"
        if marker in names:
            try:
                kind = json.loads(zf.read(marker)).get("kind")
            except (ValueError, AttributeError):
                kind = None
            if kind != RESULTS_KIND:
                raise _bad_archive(archive, f"{marker} does not describe a results archive")
        runs = [n for n in names if n.endswith(("/summary.json", "/log.csv", "/maxbatch.json", "/screening.json"))]
        if not runs:
            raise _bad_archive(archive, f"results/{profile}/ holds no run results (no summary.json or log.csv)")
        for n in names:
            if n.endswith(".json"):
                try:
                    json.loads(zf.read(n))
                except ValueError:
                    raise _bad_archive(archive, f"{n} is not valid JSON") from None
    return layout


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.split("(")[0].lower()).strip("-") or "device"


def _destination(results_root: Path, profile: str, incoming: Path) -> Path:
    """Where an incoming profile folder goes: its own name, unless local runs of that name come from another
    device -- then `<profile>-<device>`, so that neither set of runs overwrites the other."""
    dest = results_root / profile
    new, old = _devices(incoming), _devices(dest) if dest.is_dir() else set()
    if not old or old <= new:
        return dest
    return results_root / f"{profile}-{_slug(sorted(new)[0]) if new else 'imported'}"


def _move_contents(src: Path, dest: Path) -> None:
    """Move every entry of `src` into `dest`, replacing entries of the same name."""
    dest.mkdir(parents=True, exist_ok=True)
    for entry in sorted(src.iterdir()):
        target = dest / entry.name
        if entry.name == MERGED_LOG:
            continue
        if target.exists():
            swap_in(entry, target)
        else:
            os.replace(entry, target)


def merge(archive: str | Path, results_root: str | Path) -> list[Path]:
    """Unpack a results archive (from `python -m rev bundle --results PROFILE`) into `results_root`.

    Each profile in the archive lands in ``results_root/<profile>/``, or in ``<profile>-<device>/`` when local
    runs of that profile were made on another device. Rows keep their `device`, so `load_all` shows both. An
    archive that is not a results archive raises ValueError before anything under `results_root` is touched.
    Returns the profile folders written.
    """
    archive, root = Path(archive), Path(results_root)
    if not archive.is_file():
        raise ValueError(f"no archive at {archive}: give the path of the zip downloaded from Colab")
    if not zipfile.is_zipfile(archive):
        raise _bad_archive(archive, "it is not a zip file")
    with zipfile.ZipFile(archive) as zf:
        layout = _archive_layout(archive, zf)
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".merge-", dir=root))
        try:
            for names in layout.values():
                for n in names:
                    zf.extract(n, tmp)
            written = []
            for profile in sorted(layout):
                incoming = tmp / "results" / profile
                dest = _destination(root, profile, incoming)
                devices = sorted(_devices(incoming))
                _move_contents(incoming, dest)
                log = _merged_log(dest)
                log.append({"archive": archive.name, "profile": profile, "devices": devices})
                write_json(dest / MERGED_LOG, log)
                written.append(dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return written


# -------------------------------------------------------------------------------------------------------------
# Command line
# -------------------------------------------------------------------------------------------------------------

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default="t4", help="whose prepared data to include (default t4, the Colab profile)")
    p.add_argument("--out", type=file_arg, help="zip to write (default dist/revbook-<profile>.zip or "
                                            "dist/results-<profile>.zip)")
    p.add_argument("--data-dir", type=folder_arg, help="data root (default: the checkout's data/)")
    p.add_argument("--results", metavar="PROFILE",
                   help="instead: archive results/<PROFILE>/ without checkpoints, for `report --merge`")
    p.add_argument("--results-dir", type=folder_arg, default=Path("results"), help="results root for --results")


def run_cli(args: argparse.Namespace) -> int:
    try:
        if args.results:
            path = make_results_archive(args.results, args.results_dir, args.out)
            with zipfile.ZipFile(path) as zf:
                left = json.loads(zf.read(f"results/{args.results}/{RESULTS_MARKER}"))["left_out"]
            ckpts = [f for f in left if f.endswith("ckpt.pt")]
            large = [f for f in left if f not in ckpts]
            print(f"wrote {path} ({path.stat().st_size / 2**20:.1f} MiB; left out: {len(ckpts)} checkpoints"
                  + (f" and {', '.join(large)}" if large else "") + f"): bring it back and run "
                  f"`python -m rev report --merge {path.name}`")
            return 0
        path = make_bundle(args.profile, args.out, args.data_dir)
    except ValueError as e:
        raise SystemExit(f"error: {e}")
    with zipfile.ZipFile(path) as zf:
        manifest = json.loads(zf.read(f"{TOP}/{BUNDLE_MARKER}"))
    data = manifest["data"] or f"none (profile {manifest['profile']!r} not prepared here; Colab will prepare it)"
    print(f"wrote {path} ({path.stat().st_size / 2**20:.1f} MiB, {len(manifest['files'])} files); data: {data}")
    return 0
