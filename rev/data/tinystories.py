"""The TinyStories source of `rev.data.corpus`: the Hugging Face download, failing fast and clearly offline.

`python -m rev prepare --source tinystories` (and the `t4`/`full` profiles) read it through `load_splits`. Without a
network the error names the offline alternatives (`--source synthetic`, `--source text:PATH`).

`REV_TINYSTORIES=FOLDER` reads a local copy in the hub's layout instead (a `text` column in `train` and
`validation` splits, e.g. data/train-*.parquet and data/validation-*.parquet): a mirror, a machine without a
network, and the tests, which run the whole path on such a folder.
"""
from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from .tokens import EOT, DataError

TINYSTORIES = "roneneldan/TinyStories"
LOCAL_ENV = "REV_TINYSTORIES"

TEXT_COLUMN = "text"  # the column of the stories, in both splits


def dataset_path() -> str:
    """What `datasets.load_dataset` is given: the hub's name, or the local folder `REV_TINYSTORIES` names."""
    return os.environ.get(LOCAL_ENV, "").strip() or TINYSTORIES


def offline_message(reason: str) -> str:
    cache = ("it is not in the local Hugging Face cache either" if hub_offline() else
             "if it is already in your Hugging Face cache, set HF_HUB_OFFLINE=1 and HF_DATASETS_OFFLINE=1 and "
             "run again")
    return (f"cannot get {TINYSTORIES} from the Hugging Face hub ({reason}); {cache}. Without a network, "
            f"prepare the project's own corpus instead: `python -m rev prepare --source synthetic` "
            f"(prepare('synthetic', ...)), or your own stories: `--source text:PATH` (.txt files, stories "
            f"separated by {EOT} or blank lines).")


def hub_offline() -> bool:
    return any(os.environ.get(k, "").strip().lower() in ("1", "true", "yes", "on")
               for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def probe_hub(timeout: float = 5.0) -> None:
    """Fails in seconds when the hub is unreachable; `datasets` alone retries for half a minute or more."""
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    request = urllib.request.Request(f"{endpoint}/api/datasets/{TINYSTORIES}", method="HEAD")
    try:
        urllib.request.urlopen(request, timeout=timeout).close()
    except urllib.error.HTTPError:
        return  # the hub answered; `datasets` will report anything more specific
    except (urllib.error.URLError, OSError) as e:
        raise DataError(offline_message(f"{endpoint} is unreachable: {getattr(e, 'reason', e)}")) from None


def load_splits() -> dict[str, Any]:
    """The train and validation splits as `datasets` objects; a DataError that says what to do when the hub
    cannot be reached (or the local folder named by REV_TINYSTORIES is not there)."""
    path = dataset_path()
    local = path != TINYSTORIES
    if local and not Path(path).is_dir():
        raise DataError(f"{LOCAL_ENV}={path} is not a folder: point it at a copy of {TINYSTORIES} in the hub's "
                        f"layout (train and validation splits with a text column), or unset it to use the hub")
    if not local and not hub_offline():
        probe_hub()
    # short hub timeouts: read by huggingface_hub when first imported
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", "10")
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", "60")
    try:
        import datasets
    except ImportError as e:
        raise DataError("the tinystories source needs the `datasets` package: pip install datasets") from e
    try:
        splits = {split: datasets.load_dataset(path, split=hf) for split, hf in
                  (("train", "train"), ("val", "validation"))}
    except Exception as e:  # network, cache and hub errors come in many types; all mean "not available here"
        if local:
            raise DataError(f"{LOCAL_ENV}={path}: `datasets` cannot read it as {TINYSTORIES} ({type(e).__name__}: "
                            f"{e}); it needs train and validation splits with a text column") from e
        raise DataError(offline_message(f"{type(e).__name__}: {e}")) from e
    check_columns(splits, path)
    return splits


def check_columns(splits: dict[str, Any], path: str) -> None:
    """A DataError naming what was found when a split that loaded has no `text` column, or one that holds no
    text: another data set's layout reads without complaint and would otherwise fail deep inside tokenization."""
    where = f"{LOCAL_ENV}={path}" if path != TINYSTORIES else TINYSTORIES
    for split, ds in splits.items():
        found = list(ds.column_names)
        if TEXT_COLUMN not in found:
            raise DataError(f"{where}: its {split} split has the columns {', '.join(found) or '(none)'}, not the "
                            f"`{TEXT_COLUMN}` column {TINYSTORIES} stories are read from; point {LOCAL_ENV} at a "
                            f"copy in {TINYSTORIES}'s layout")
        feature = ds.features[TEXT_COLUMN]
        kind = getattr(feature, "dtype", type(feature).__name__)   # a list or struct feature has no dtype
        if kind not in ("string", "large_string"):
            raise DataError(f"{where}: the `{TEXT_COLUMN}` column of its {split} split holds {kind}, not the "
                            f"stories' text; point {LOCAL_ENV} at a copy in {TINYSTORIES}'s layout")
