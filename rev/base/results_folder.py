"""The results folder, ``results/<profile>/``: the names its readers agree on, and the zip that carries it between
machines.

Training runs, the report (`REPORT_NAME`, its figures in `PLOTS_DIR`) and the companion chapters write here; the
HTML edition and the report read it. A results archive (`make_results_archive`, made by ``python -m rev bundle
--results PROFILE`` on Colab, say) holds one profile's folder without checkpoints; `merge` (``python -m rev report
--merge ARCHIVE``) unpacks it beside the local results, into ``<profile>-<device>/`` when local runs of that
profile come from another device. Both write atomically: an interrupted run leaves no half zip and no half folder.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

from .files import atomic_zip, read_json, swap_in, walk_files, write_json
from .units import MIB

REPORT_NAME = "REPORT.md"                 # results/<profile>/REPORT.md, with its figures in PLOTS_DIR beside it
PLOTS_DIR = "plots"
RESULTS_MARKER = "ARCHIVE.json"           # written into results archives; `merge` checks it
RESULTS_KIND = "revbook-results"
MERGED_LOG = "MERGED.json"                # kept in a profile folder by `merge`: the archives unpacked into it


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
                         max_file_mib: float = 20.0, force: bool = False) -> Path:
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
    candidates = [p for p in walk_files(folder) if p.name != RESULTS_MARKER
                  and not p.relative_to(folder).parts[0].startswith(".")]
    limit = max_file_mib * MIB
    left_out = [p for p in candidates if p.name == "ckpt.pt" or p.stat().st_size > limit]
    files = [p for p in candidates if p not in left_out]
    if not any(p.name in ("summary.json", "log.csv", "maxbatch.json", "screening.json") for p in files):
        raise ValueError(f"{folder} holds no run results yet (no summary.json or log.csv): nothing to archive")
    marker = {"kind": RESULTS_KIND, "format": 1, "profile": profile, "devices": sorted(_devices(folder)),
              "runs": sorted({str(s.get("run")) for s in _summaries(folder)}),
              "left_out": [p.relative_to(folder).as_posix() for p in left_out]}
    out = Path(out) if out is not None else results_root.parent / "dist" / f"results-{profile}.zip"
    entries = [(p, f"results/{profile}/{p.relative_to(folder).as_posix()}") for p in files]
    return atomic_zip(out, entries, {f"results/{profile}/{RESULTS_MARKER}": json.dumps(marker, indent=2)}, force)



# --- merging a results archive brought back from another machine -------------------------------------------------------

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
