"""One way to report a user's mistake: a command raises (`UserError`, any ValueError or OSError, or `CommandFailed`)
and `rev.__main__.main` alone turns it into the one line `error: ...`. A command that converted its own errors
would be a second way, with its own wording and exit status, that this test finds."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "rev"


def system_exits(root: Path = PACKAGE) -> list[str]:
    """`raise SystemExit(...)` anywhere in the package but the command line's entry point."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "__main__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and node.exc is not None:
                call = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(call, ast.Name) and call.id == "SystemExit":
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return found


def test_only_the_command_line_turns_an_error_into_an_exit():
    assert system_exits() == [], "commands that exit on their own instead of raising a user error"


def test_the_search_finds_a_planted_exit(tmp_path):
    (tmp_path / "rev").mkdir()
    (tmp_path / "rev" / "a.py").write_text("def run_cli(args):\n    raise SystemExit(f'error: {args}')\n")
    (tmp_path / "rev" / "__main__.py").write_text("raise SystemExit('fine here')\n")
    assert system_exits(tmp_path / "rev") == ["rev/a.py:2"]


def test_a_run_that_diverged_ends_the_command_with_one_line(monkeypatch, capsys, tmp_path):
    """`TrainingDiverged` is work that could not be done (`CommandFailed`), not a bug: one line, exit status 2."""
    from rev.__main__ import cli
    from rev.training import loop

    def diverge(cfg):
        raise loop.TrainingDiverged("loss became nan at step 7: stopped; lower the learning rate")

    monkeypatch.setattr(loop, "train", diverge)
    assert cli(["train", "--profile", "smoke", "--out", str(tmp_path / "run"), "--no-progress"]) == 2
    assert capsys.readouterr().err.strip() == "error: loss became nan at step 7: stopped; lower the learning rate"
