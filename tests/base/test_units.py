"""One mebibyte: `rev.base.units.MIB`, defined once; a module that writes `2**20` out (or defines its own MIB) is a
second definition that a change of unit would miss."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "rev"
WRITTEN_OUT = re.compile(r"(?<![\w.])(2 ?\*\* ?(20|30)|1 << (20|30))(?!\d)|^\s*(MIB|GIB) ?=", re.M)


def written_out(root: Path = ROOT) -> list[str]:
    return [f"{p.relative_to(root.parent)}:{t.count(chr(10), 0, m.start()) + 1}"
            for p in sorted(root.rglob("*.py")) if p.name != "units.py"
            for t in [p.read_text()] for m in WRITTEN_OUT.finditer(t)]


def test_the_mebibyte_is_defined_once():
    assert written_out() == [], "sizes in bytes written out instead of rev.base.units.MIB / GIB"


def test_the_search_finds_a_planted_one(tmp_path):
    (tmp_path / "rev").mkdir()
    (tmp_path / "rev" / "a.py").write_text("x = 3\nprint(x / 2**20)\n")
    (tmp_path / "rev" / "b.py").write_text("MIB = 1024 * 1024\n")
    (tmp_path / "rev" / "c.py").write_text("y = 2**200\n")               # another number: not a unit
    assert written_out(tmp_path / "rev") == ["rev/a.py:2", "rev/b.py:1"]
