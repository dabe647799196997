"""`python -m rev bundle`: zips that carry the workbook to another machine and its results back.

* ``python -m rev bundle [--profile P] [--out PATH]`` -- the code (``rev/``, ``pyproject.toml``, ``README.md``,
  ``environment.yml``, ``tests/``, ``notebooks/``, ``colab/``, ``.ci/``) and, when it has been prepared here, the
  profile's corpus (``data/<data_name>/``: tokenizer, token files, meta.json), so a Colab session neither
  downloads nor tokenizes anything. Everything sits under one ``revbook/`` folder in the zip.
* ``python -m rev bundle --results PROFILE`` -- ``results/<PROFILE>/`` without checkpoints (small enough to
  download from Colab), with a marker file; ``python -m rev report --merge ARCHIVE`` takes it back in.

Both zips are written to a temporary name and renamed at the end: an interrupted run leaves no half zip.
"""
from __future__ import annotations

import argparse
import json
import os
import zipfile
from pathlib import Path
from typing import Iterator

BUNDLE_DIRS = ("rev", "tests", "notebooks", "colab", ".ci")
BUNDLE_FILES = ("pyproject.toml", "README.md", "environment.yml")
DATA_FILES = ("tokenizer.json", "train.bin", "val.bin", "meta.json")
TOP = "revbook"                           # the folder the code bundle unpacks into
RESULTS_MARKER = "ARCHIVE.json"           # written into results archives; `report.merge` checks it
RESULTS_KIND = "revbook-results"
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
    from ..engine.profiles import get_profile

    folder = data_dir / get_profile(profile).data_name
    return folder if all((folder / f).is_file() for f in DATA_FILES) else None


def _atomic_zip(out: Path, entries: list[tuple[Path, str]], extra: dict[str, str]) -> Path:
    """Write `entries` ((source path, name in zip)) and `extra` (name -> text) into `out` atomically."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
            for src, name in entries:
                # token files are large and barely compress: fast deflate keeps bundling quick
                level = 1 if src.suffix == ".bin" else 6
                zf.write(src, name, compress_type=zipfile.ZIP_DEFLATED, compresslevel=level)
            for name, text in extra.items():
                zf.writestr(name, text)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
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
    out = []
    for s in sorted(folder.rglob("summary.json")):
        try:
            out.append(json.loads(s.read_text()))
        except (OSError, ValueError):
            continue
    return out


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
    summaries = _summaries(folder)
    devices = sorted({str(s["device"]) for s in summaries if isinstance(s, dict) and s.get("device")})
    marker = {"kind": RESULTS_KIND, "format": 1, "profile": profile, "devices": devices,
              "runs": sorted({str(s.get("run")) for s in summaries if isinstance(s, dict)}),
              "left_out": [p.relative_to(folder).as_posix() for p in left_out]}
    out = Path(out) if out is not None else results_root.parent / "dist" / f"results-{profile}.zip"
    entries = [(p, f"results/{profile}/{p.relative_to(folder).as_posix()}") for p in files]
    return _atomic_zip(out, entries, {f"results/{profile}/{RESULTS_MARKER}": json.dumps(marker, indent=2)})


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default="t4", help="whose prepared data to include (default t4, the Colab profile)")
    p.add_argument("--out", type=Path, help="zip to write (default dist/revbook-<profile>.zip or "
                                            "dist/results-<profile>.zip)")
    p.add_argument("--data-dir", type=Path, help="data root (default: the checkout's data/)")
    p.add_argument("--results", metavar="PROFILE",
                   help="instead: archive results/<PROFILE>/ without checkpoints, for `report --merge`")
    p.add_argument("--results-dir", type=Path, default=Path("results"), help="results root for --results")


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
