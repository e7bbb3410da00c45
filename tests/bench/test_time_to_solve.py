"""The time-to-solve study runs end to end at a tiny budget (its figures come from the full run)."""

from __future__ import annotations

import json
import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "time_to_solve.py"

pytestmark = pytest.mark.slow  # each test trains txrl and RecurrentPPO end to end

TINY = ["--lengths", "2", "--seeds", "0", "--budget", "256", "--eval-every", "128"]


@pytest.fixture
def main() -> Callable[[list[str]], list[dict[str, Any]]]:
    return runpy.run_path(str(SCRIPT), run_name="bench_time_to_solve")["main"]


def test_tiny_study_reports_every_run(main: Callable, capsys: pytest.CaptureFixture[str]) -> None:
    results = main(TINY)
    assert [(r["learner"], r["budget"]) for r in results] == [("txrl", 256), ("RecurrentPPO", 768)]
    for run in results:
        assert run["seconds"] > 0
        assert run["solved_at"] is None or 0 < run["solved_at"] <= run["budget"]
        assert 0 < run["steps"] <= run["budget"] + 8 * 128
    assert "length 2: txrl" in capsys.readouterr().out


def test_recurrent_ppo_stops_at_its_time_cap(main: Callable) -> None:
    txrl, rppo = main([*TINY, "--time-factor", "0"])
    assert not txrl["stopped_by_time"]
    assert rppo["stopped_by_time"] and rppo["solved_at"] is None
    assert rppo["steps"] < rppo["budget"]


def test_out_file_keeps_finished_runs(main: Callable, tmp_path: Path) -> None:
    out = tmp_path / "tts.json"
    first = main([*TINY, "--out", str(out)])
    saved = json.loads(out.read_text())
    assert [r["learner"] for r in saved["runs"]] == ["txrl", "RecurrentPPO"]
    assert main([*TINY, "--out", str(out)]) == first  # read back, not trained again
    other = main([*TINY, "--budget", "128", "--out", str(out)])  # another setup trains anew
    assert [r["budget"] for r in other] == [128, 384]
    assert len(json.loads(out.read_text())["runs"]) == 4  # both setups stay in the file
    out.write_text("not json")
    with pytest.raises(SystemExit, match="not a results file"):
        main([*TINY, "--out", str(out)])
