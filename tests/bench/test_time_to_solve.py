"""The time-to-solve study runs end to end at a tiny budget (its figures come from the full run)."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "time_to_solve.py"


def test_tiny_study_reports_every_run(capsys: pytest.CaptureFixture[str]) -> None:
    main = runpy.run_path(str(SCRIPT), run_name="bench_time_to_solve")["main"]
    results = main(["--lengths", "2", "--seeds", "0", "--budget", "256", "--eval-every", "128"])
    assert [(r["learner"], r["budget"]) for r in results] == [("txrl", 256), ("RecurrentPPO", 768)]
    for run in results:
        assert run["seconds"] > 0
        assert run["solved_at"] is None or 0 < run["solved_at"] <= run["budget"]
    assert "length 2: txrl" in capsys.readouterr().out
