"""`python -m rev bundle` (used by colab/revbook_colab.ipynb and notebook 07): the zips that carry the workbook to
another machine and its results back (the results zip and its `merge` live in `rev.base.results_folder`).

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
import zipfile
from pathlib import Path

from ..base.cli import file_arg, folder_arg
from ..base.files import atomic_zip, walk_files
from ..base.results_folder import RESULTS_MARKER, make_results_archive
from ..base.units import MIB

BUNDLE_DIRS = ("rev", "tests", "notebooks", "colab", ".ci")
BUNDLE_FILES = ("pyproject.toml", "README.md", "environment.yml")
DATA_FILES = ("tokenizer.json", "train.bin", "val.bin", "meta.json")
TOP = "revbook"                           # the folder the code bundle unpacks into
BUNDLE_MARKER = "BUNDLE.json"


def source_root() -> Path:
    """The checkout `rev` was imported from (the folder holding pyproject.toml and rev/)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file():
        raise ValueError(f"rev is not imported from a source checkout ({root} has no pyproject.toml): "
                         f"bundle from a clone of the repository, installed with `pip install -e .`")
    return root


def code_files(root: Path) -> list[Path]:
    """The files of the code bundle, relative to `root`."""
    missing = [f for f in ("rev", "pyproject.toml") if not (root / f).exists()]
    if missing:
        raise ValueError(f"{root} is not a revbook checkout (missing {', '.join(missing)})")
    files = [Path(f) for f in BUNDLE_FILES if (root / f).is_file()]
    for d in BUNDLE_DIRS:
        if (root / d).is_dir():
            files += [p.relative_to(root) for p in walk_files(root / d)]
    return files


def data_folder(profile: str, data_dir: Path) -> Path | None:
    """The profile's prepared corpus folder if it is complete here, else None."""
    from ..data.corpus import profile_folder
    from ..base.profiles import get_profile

    folder = profile_folder(get_profile(profile), data_dir)
    return folder if all((folder / f).is_file() for f in DATA_FILES) else None


def make_bundle(profile: str = "t4", out: str | Path | None = None, data_dir: str | Path | None = None,
                root: str | Path | None = None, force: bool = False) -> Path:
    """Zip the code (and the profile's prepared data, when present) for another machine; returns the zip path.

    `root` is the checkout to pack (default: the one `rev` is imported from); `data_dir` defaults to
    ``<root>/data``; `out` to ``<root>/dist/revbook-<profile>.zip``. A file at `out` that is not a bundle is
    replaced only with `force`.
    """
    from ..base.profiles import resolve_profile_name

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
    return atomic_zip(out, entries, {f"{TOP}/{BUNDLE_MARKER}": json.dumps(manifest, indent=2)}, force)


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
    p.add_argument("--force", action="store_true", help="replace --out although it is not a zip this command wrote")


def run_cli(args: argparse.Namespace) -> int:
    if args.results:
        path = make_results_archive(args.results, args.results_dir, args.out, force=args.force)
        with zipfile.ZipFile(path) as zf:
            left = json.loads(zf.read(f"results/{args.results}/{RESULTS_MARKER}"))["left_out"]
        ckpts = [f for f in left if f.endswith("ckpt.pt")]
        large = [f for f in left if f not in ckpts]
        print(f"wrote {path} ({path.stat().st_size / MIB:.1f} MiB; left out: {len(ckpts)} checkpoints"
              + (f" and {', '.join(large)}" if large else "") + f"): bring it back and run "
              f"`python -m rev report --merge {path.name}`")
        return 0
    path = make_bundle(args.profile, args.out, args.data_dir, force=args.force)

    with zipfile.ZipFile(path) as zf:
        manifest = json.loads(zf.read(f"{TOP}/{BUNDLE_MARKER}"))
    data = manifest["data"] or f"none (profile {manifest['profile']!r} not prepared here; Colab will prepare it)"
    print(f"wrote {path} ({path.stat().st_size / MIB:.1f} MiB, {len(manifest['files'])} files); data: {data}")
    return 0
