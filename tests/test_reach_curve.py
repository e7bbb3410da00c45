"""``results/reach/curve.py``: the reach curve's figures from span studies' run folders."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _curve():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("reach_curve", ROOT / "results/reach/curve.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def _run(
    folder: Path, span: int, memory: str, seed: int, budget: int, evals: list[tuple[int, float]]
) -> None:
    run_dir = folder / f"span_{span}" / "runs" / memory / f"seed_{seed}"
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(
        yaml.safe_dump({"budget": budget, "env": {"kwargs": {"length": span}}})
    )
    lines = [
        json.dumps({"timesteps": t, "success_rate": s, "wall_time_s": 60.0 * (i + 1)})
        for i, (t, s) in enumerate(evals)
    ]
    (run_dir / "eval.jsonl").write_text("\n".join(lines) + "\n")


def test_reach_curve_reads_each_run_and_writes_its_table_and_plot(tmp_path: Path) -> None:
    curve = _curve()
    studies = tmp_path / "reach"
    _run(studies, 100, "gtrxl", 0, 1000, [(0, 0.5), (400, 0.95), (600, 1.0)])
    _run(studies, 100, "lstm", 0, 1000, [(0, 0.5), (1000, 0.44)])
    _run(studies, 1000, "gtrxl", 0, 5000, [(0, 0.0), (2000, 0.53)])
    out = tmp_path / "out"
    assert curve.main([str(studies), "--out", str(out)]) == 0
    runs = {(r.span, r.memory): r for r in curve.read_runs(studies)}
    assert runs[(100, "gtrxl")].steps_to_threshold == 400
    assert runs[(100, "gtrxl")].finished and runs[(100, "lstm")].finished
    assert runs[(100, "lstm")].steps_to_threshold is None and runs[(100, "lstm")].best == 0.5
    assert not runs[(1000, "gtrxl")].finished
    table = (out / "reach.md").read_text()
    assert "| 100 | gtrxl | 0 | 1.00 | 1.00 | 400 |" in table
    assert "| 1000 | gtrxl | 0 | 0.53 (unfinished) |" in table
    assert "never" in table
    assert (out / "reach.png").stat().st_size > 0
    assert len((out / "reach.csv").read_text().splitlines()) == 4


def test_transfer_plays_a_checkpoint_at_other_spans(tmp_path: Path) -> None:
    """``results/reach/transfer.py`` plays the run's agent at each span asked for."""
    from tests._runs import train_tiny

    spec = importlib.util.spec_from_file_location(
        "reach_transfer", ROOT / "results/reach/transfer.py"
    )
    assert spec is not None and spec.loader is not None
    transfer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(transfer)
    run_dir = train_tiny(tmp_path)
    out = tmp_path / "transfer.json"
    checkpoint = run_dir / "checkpoints" / "final.zip"
    assert (
        transfer.main([str(checkpoint), "--spans", "3,5", "--episodes", "4", "--out", str(out)])
        == 0
    )
    rows = json.loads(out.read_text())["rows"]
    assert [r["span"] for r in rows] == [3, 5]
    assert all(r["episodes"] == 4 and 0.0 <= r["success_rate"] <= 1.0 for r in rows)
    assert rows[1]["mean_length"] >= 6  # a corridor of 5 cells takes at least 6 steps
