"""``bench/acting_ab.py`` times two source trees against each other in alternating blocks."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_acting_ab", ROOT / "bench/acting_ab.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_a_tree_against_itself_gives_a_row_with_both_sides_and_their_ratio(tmp_path: Path) -> None:
    ab = _script()
    out = tmp_path / "ab.txt"
    assert (
        ab.main(
            [
                str(ROOT),
                str(ROOT),
                "--kinds",
                "act",
                "--blocks",
                "2",
                "--block",
                "2",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    rows = [line.split() for line in out.read_text().splitlines() if line.startswith("act ")]
    assert len(rows) == 1
    before, after, ratio = float(rows[0][1]), float(rows[0][3]), float(rows[0][5])
    assert before > 0 and after > 0
    assert ratio == pytest.approx(after / before, rel=2e-3)


def test_bad_trees_and_kinds_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ab = _script()
    with pytest.raises(SystemExit):
        ab.main([str(tmp_path), str(ROOT)])
    assert "not a txrl source tree" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ab.main([str(ROOT), str(ROOT), "--kinds", "walk"])
    assert "unknown kinds" in capsys.readouterr().err
