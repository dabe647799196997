"""The Colab bundle (code + prepared data) and the results archive that comes back from Colab."""
import json
import os
import site
import subprocess
import venv
import zipfile
from pathlib import Path

import pytest

from rev.book import bundle
from rev.base import results_folder
from rev.chapters.shared.results import load_runs
from rev.__main__ import main
from rev.base.profiles import get_profile

DATA_NAME = get_profile("smoke").data_name


@pytest.fixture
def data_dir(tmp_path) -> Path:
    """A stand-in prepared corpus: the bundle copies these files, it does not read them."""
    folder = tmp_path / "data" / DATA_NAME
    folder.mkdir(parents=True)
    for name in bundle.DATA_FILES:
        (folder / name).write_bytes(b"{}" if name.endswith(".json") else bytes(range(256)) * 8)
    return tmp_path / "data"


@pytest.fixture
def results(tmp_path) -> Path:
    """results/smoke with one run folder as `train` leaves it (checkpoint included)."""
    run = tmp_path / "results" / "smoke" / "run1_baseline"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"run": run.name, "device": "CPU (cpu), fp32 compute",
                                                  "final_val_loss": 5.4, "peak_memory_bytes": 9 * 2**20}))
    (run / "config.json").write_text("{}")
    (run / "log.csv").write_text("step,tokens,loss,lr,grad_norm,tokens_per_s,val_loss\n0,512,6.2,0.001,1.0,900,6.1\n")
    (run / "ckpt.pt").write_bytes(b"\0" * 4096)
    return tmp_path / "results"


def _names(path: Path) -> list[str]:
    with zipfile.ZipFile(path) as zf:
        return zf.namelist()


def test_bundle_holds_code_and_prepared_data(tmp_path, data_dir):
    path = bundle.make_bundle("smoke", tmp_path / "b.zip", data_dir)
    names = _names(path)
    for expected in ("revbook/rev/__init__.py", "revbook/rev/book/bundle.py", "revbook/pyproject.toml",
                     "revbook/README.md", "revbook/environment.yml", "revbook/tests/test_setup.py",
                     "revbook/BUNDLE.json", *(f"revbook/data/{DATA_NAME}/{f}" for f in bundle.DATA_FILES)):
        assert expected in names
    assert any(n.startswith("revbook/notebooks/") and n.endswith(".ipynb") for n in names)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc") or ".egg-info" in n]
    assert not [n for n in names if n.startswith("revbook/results/")]
    with zipfile.ZipFile(path) as zf:
        assert json.loads(zf.read("revbook/BUNDLE.json"))["data"] == f"data/{DATA_NAME}"


def test_bundle_without_prepared_data_says_so(tmp_path, capsys):
    assert main(["bundle", "--profile", "smoke", "--out", str(tmp_path / "b.zip"),
                 "--data-dir", str(tmp_path / "nothing")]) == 0
    assert "data: none" in capsys.readouterr().out
    assert not [n for n in _names(tmp_path / "b.zip") if n.startswith("revbook/data/")]


def test_results_archive_leaves_checkpoints_out_and_merges_back(results, tmp_path, capsys):
    out = tmp_path / "results-smoke.zip"
    assert main(["bundle", "--results", "smoke", "--results-dir", str(results), "--out", str(out)]) == 0
    assert "report --merge" in capsys.readouterr().out
    names = _names(out)
    assert "results/smoke/run1_baseline/summary.json" in names and "results/smoke/ARCHIVE.json" in names
    assert not [n for n in names if n.endswith("ckpt.pt")]
    assert results_folder.merge(out, tmp_path / "elsewhere") == [tmp_path / "elsewhere" / "smoke"]
    assert load_runs(tmp_path / "elsewhere", "smoke")["device"].tolist() == ["CPU (cpu), fp32 compute"]


def test_results_archive_leaves_large_files_out_and_says_so(results, tmp_path):
    (results / "smoke" / "trace.revtrace").write_bytes(b"\0" * 8192)
    out = results_folder.make_results_archive("smoke", results, tmp_path / "r.zip", max_file_mib=0.004)
    with zipfile.ZipFile(out) as zf:
        marker = json.loads(zf.read("results/smoke/ARCHIVE.json"))
        assert "results/smoke/trace.revtrace" not in zf.namelist()
    assert sorted(marker["left_out"]) == ["run1_baseline/ckpt.pt", "trace.revtrace"]
    assert marker["kind"] == results_folder.RESULTS_KIND and marker["runs"] == ["run1_baseline"]


def test_results_archive_of_a_missing_profile_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no results for profile"):
        results_folder.make_results_archive("t4", tmp_path)


def _site_dirs() -> list[str]:
    """This interpreter's site-packages (torch, pytest, setuptools live there)."""
    dirs = site.getsitepackages() + [site.getusersitepackages()]
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


@pytest.mark.slow
def test_unpacked_bundle_installs_and_runs_its_own_tests(tmp_path, data_dir):
    with zipfile.ZipFile(bundle.make_bundle("smoke", tmp_path / "b.zip", data_dir)) as zf:
        zf.extractall(tmp_path / "unpacked")
    code = tmp_path / "unpacked" / bundle.TOP
    env_dir = tmp_path / "venv"
    # a fresh venv; the packages of the running environment are made visible through a .pth file so that
    # nothing is downloaded (torch in particular), while `rev` itself must come from the unpacked bundle
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    own_site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip()
    Path(own_site, "zz_outer_env.pth").write_text("\n".join(_site_dirs()) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    pip = subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", str(code)],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert pip.returncode == 0, pip.stdout[-2000:] + pip.stderr[-2000:]
    where = subprocess.run([py, "-c", "import rev; print(rev.__file__)"], capture_output=True, text=True,
                           check=True, env=env, cwd=tmp_path).stdout.strip()
    assert Path(where).resolve() == (code / "rev" / "__init__.py").resolve()
    # third-party pytest plugins (nbval, ...) are not needed for these tests and take seconds to load
    tests = subprocess.run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_setup.py"],
                           capture_output=True, text=True, env={**env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
                           cwd=code, timeout=120)
    assert tests.returncode == 0, tests.stdout[-2000:] + tests.stderr[-2000:]
