"""Set-up files stay in step with each other."""
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _name(req: str) -> str:
    return re.split(r"[<>=!~ \[]", req.strip(), maxsplit=1)[0].lower()


def _pyproject_requirements() -> dict[str, str]:
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(proj["dependencies"])
    for extra in proj["optional-dependencies"].values():
        reqs.extend(extra)
    return {_name(r): r for r in reqs}


def _environment_requirements() -> dict[str, str]:
    lines = (ROOT / "environment.yml").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "- pip:")
    reqs = [line.strip()[2:] for line in lines[start + 1:] if line.strip().startswith("- ")]
    return {_name(r): r for r in reqs if not r.startswith("-e")}


def test_environment_yml_lists_the_pyproject_dependencies():
    py, env = _pyproject_requirements(), _environment_requirements()
    assert set(py) == set(env), f"only in pyproject: {set(py) - set(env)}; only in environment.yml: {set(env) - set(py)}"
    for name, req in py.items():
        if name != "torch":  # environment.yml pins the tested CPU release; pyproject keeps a range
            assert env[name] == req, f"{name}: pyproject says {req!r}, environment.yml says {env[name]!r}"


def test_torch_range_admits_the_tested_release():
    req = _pyproject_requirements()["torch"]
    assert _environment_requirements()["torch"] == "torch==2.13.0"
    lower = re.search(r">=\s*([\d.]+)", req)
    assert lower and tuple(int(x) for x in lower.group(1).split(".")) <= (2, 13, 0)
    # and no older than the first release with the APIs rev uses (see the comment in pyproject.toml)
    assert tuple(int(x) for x in lower.group(1).split(".")) >= (2, 4), f"{req}: torch 2.4 is the oldest that works"
    upper = re.search(r"<\s*([\d.]+)", req)
    assert upper is None or tuple(int(x) for x in upper.group(1).split(".")) > (2, 13, 0)


def test_ci_runs_the_readme_test_command():
    readme, ci = (ROOT / "README.md").read_text(), (ROOT / ".ci" / "run").read_text()
    cmd = re.search(r"<!-- test-command -->\s*```bash\n(.+?)\n```", readme, re.S).group(1).strip()
    assert cmd in ci
