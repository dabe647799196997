"""Count the lines of English a Python package writes: string literals of four words or more, docstrings excluded.

    python tools/prose_lines.py rev/chapters          # total, then the heaviest modules
    python tools/prose_lines.py rev/chapters --list   # every counted line

A line counts once however many literals it holds; an f-string's words are counted with its holes removed.
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")


def _docstring_nodes(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                ids.add(id(body[0].value))
    return ids


def _text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return " ".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return None


def prose_lines(path: Path) -> set[int]:
    """Line numbers of `path` that hold a non-docstring string literal of four words or more."""
    tree = ast.parse(path.read_text(), filename=str(path))
    docs = _docstring_nodes(tree)
    lines: set[int] = set()
    for node in ast.walk(tree):
        if id(node) in docs:
            continue
        if isinstance(node, ast.Constant) and isinstance(getattr(node, "parent_fstring", None), ast.JoinedStr):
            continue
        text = _text(node)
        if text is None or len(WORD.findall(text)) < 4:
            continue
        lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--list", action="store_true", help="print every counted line")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)
    per_file = {}
    for path in sorted(args.root.rglob("*.py")):
        lines = prose_lines(path)
        per_file[path] = lines
        if args.list:
            source = path.read_text().splitlines()
            for n in sorted(lines):
                print(f"{path}:{n}: {source[n - 1].strip()}")
    total = sum(len(v) for v in per_file.values())
    modules = sum(1 for v in per_file.values() if v)
    print(f"{total} lines of English string literals in {modules} modules under {args.root}")
    for path, lines in sorted(per_file.items(), key=lambda kv: -len(kv[1]))[: args.top]:
        if lines:
            print(f"  {len(lines):5d}  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
