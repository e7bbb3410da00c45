"""``results/stability/summarize.py`` on run directories made here: a run that learns, loses
it and learns again, and a run that learns and holds it, with the training diagnostics a
txrl run logs to TensorBoard."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from tests.test_results_scripts import load

#: (step, success rate): reaches 0.8 of its best (1.0) at step 200, falls to 0.3 at 400.
FALLS = [(0, 0.5), (100, 0.6), (200, 0.9), (300, 1.0), (400, 0.3), (500, 0.95)]
HOLDS = [(0, 0.5), (100, 0.7), (200, 0.9), (300, 0.85), (400, 0.95)]
LOGGED = (
    "train/entropy_loss",
    "train/approx_kl",
    "train/clip_fraction",
    "train/explained_variance",
    "train/grad_norm",
    "train/value_loss",
    "memory/layer0/attention_entropy",
    "memory/layer0/gate_attention",
    "train/learning_rate",  # logged, but no diagnostic of the study
)


def make_run(root: Path, name: str, evals: list[tuple[int, float]], *, finished: bool) -> Path:
    """A run directory as ``txrl train`` leaves it: config, eval log, TensorBoard scalars
    every 25 steps (each tag's value: its index * 1000 + the step) and, when finished, the
    finished record."""
    from torch.utils.tensorboard import SummaryWriter

    run = root / name
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump({"name": name, "budget": 500}))
    lines = [
        {"timesteps": t, "episodes": 20, "success_rate": s, "mean_return": s} for t, s in evals
    ]
    (run / "eval.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    if finished:
        (run / "finished.json").write_text(json.dumps({"timesteps": 500, "budget": 500}))
    writer = SummaryWriter(str(run / "tb"))
    for step in range(0, 501, 25):
        for i, tag in enumerate(LOGGED):
            writer.add_scalar(tag, i * 1000 + step, step)
    writer.close()
    return run


def test_drops_are_measured_from_the_best_before_them() -> None:
    summarize = load("stability/summarize.py")
    drop = summarize.largest_drop(FALLS)
    assert (drop.peak_step, drop.peak, drop.low_step, drop.low) == (300, 1.0, 400, 0.3)
    assert drop.size == pytest.approx(0.7)
    # still learning is no drop: every evaluation at or above the best before it
    assert summarize.largest_drop([(0, 0.1), (100, 0.5), (200, 0.9)]) is None
    # only the evaluations after ``start`` count; the best before them still does
    later = summarize.largest_drop([(0, 1.0), (100, 0.2), (200, 0.5), (300, 0.4)], start=2)
    assert (later.peak, later.low_step) == (1.0, 300)
    assert summarize.first_reaching(FALLS, 0.8) == 2
    assert summarize.nearest([(0, 1.0), (25, 2.0), (50, 3.0)], 37) == (25, 2.0)
    assert summarize.nearest([(0, 1.0), (25, 2.0), (50, 3.0)], 40) == (50, 3.0)
    assert summarize.nearest([(0, 1.0), (25, 2.0)], 900) == (25, 2.0)


def test_summary_table_csv_diagnostics_and_plots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summarize = load("stability/summarize.py")
    falls = make_run(tmp_path / "runs", "falls_seed1", FALLS, finished=True)
    holds = make_run(tmp_path / "runs", "holds_seed2", HOLDS[:-1], finished=False)
    out = tmp_path / "study"
    assert summarize.main([str(falls), str(holds), "--out", str(out)]) == 0
    assert "2 runs" in capsys.readouterr().out

    rows = {r["run"]: r for r in csv.DictReader((out / "summary.csv").open())}
    fell = rows["falls_seed1"]
    assert (fell["best"], fell["best_step"], fell["final"], fell["final_step"]) == (
        "1.000",
        "300",
        "0.950",
        "500",
    )
    assert (fell["reached_step"], fell["drop_after"], fell["drop_after_step"]) == (
        "200",
        "0.700",
        "400",
    )
    held = rows["holds_seed2"]
    assert held["drop_after"] == "0.050" and held["drop_after_step"] == "300"
    assert held["finished"] == "no (at 300)" and fell["finished"] == "yes"

    table = (out / "summary.md").read_text()
    assert "| falls_seed1 | 500 of 500 | 6 | 1.000 at 300 | 0.950 at 500 | 200 (≥ 0.800) |" in table
    assert "0.700 at 400 (1.000 at 300 -> 0.300)" in table
    assert "| holds_seed2 | 300 of 500, unfinished | 4 |" in table

    diagnostics = list(csv.DictReader((out / "diagnostics.csv").open()))
    tags = [r["tag"] for r in diagnostics if r["run"] == "falls_seed1"]
    assert tags == list(LOGGED[:-1])  # the study's diagnostics, memory tags by pattern
    entropy = next(r for r in diagnostics if r["tag"] == "memory/layer0/attention_entropy")
    # at the logged steps nearest the best (300) and the low (400): index 6 * 1000 + step
    assert (entropy["peak_step"], entropy["at_peak"]) == ("300", "6300")
    assert (entropy["low_step"], entropy["at_low"]) == ("400", "6400")

    for name in ("falls_seed1", "holds_seed2"):
        assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []  # no temp files


def test_a_run_scored_by_return_reaches_from_the_floor_of_its_range(tmp_path: Path) -> None:
    """POPGym's returns lie on [-1, 1]: 0.8 of the way from -1 to a best of 0.5 is 0.2."""
    summarize = load("stability/summarize.py")
    run = tmp_path / "popgym"
    run.mkdir()
    evals = [(0, -0.5), (100, 0.1), (200, 0.3), (300, 0.5), (400, -0.5)]
    (run / "eval.jsonl").write_text(
        "".join(
            json.dumps({"timesteps": t, "success_rate": None, "mean_return": r}) + "\n"
            for t, r in evals
        )
    )
    summary = summarize.summarize_run(run, return_floor=-1.0)
    assert summary.metric == "mean_return" and summary.level == pytest.approx(0.2)
    assert summary.reached_step == 200 and summary.drop_after.size == pytest.approx(1.0)
    assert summary.budget is None and not summary.finished


def test_runs_of_the_same_name_are_refused(tmp_path: Path) -> None:
    summarize = load("stability/summarize.py")
    first = make_run(tmp_path / "a", "seed_1", HOLDS, finished=True)
    second = make_run(tmp_path / "b", "seed_1", HOLDS, finished=True)
    with pytest.raises(SystemExit):
        summarize.main([str(first), str(second), "--out", str(tmp_path / "study")])


def test_a_kept_copy_summarises_as_the_run_did(tmp_path: Path) -> None:
    """``--keep`` copies what the study reads (no checkpoints, no TensorBoard events) and the
    copy, read again from its ``scalars.csv``, gives the same tables as the run itself."""
    summarize = load("stability/summarize.py")
    falls = make_run(tmp_path / "runs", "falls_seed1", FALLS, finished=True)
    (falls / "checkpoints").mkdir()
    (falls / "checkpoints" / "step_000000100.zip").write_bytes(b"not kept")
    direct, kept = tmp_path / "direct", tmp_path / "kept"
    assert summarize.main([str(falls), "--out", str(direct)]) == 0
    assert (
        summarize.main(
            [str(falls), "--out", str(tmp_path / "via"), "--keep", str(kept), "--every", "1"]
        )
        == 0
    )

    copy = kept / "falls_seed1"
    assert sorted(p.name for p in copy.iterdir()) == [
        "config.yaml",
        "eval.jsonl",
        "finished.json",
        "scalars.csv",
    ]
    assert summarize.main([str(copy), "--out", str(tmp_path / "again")]) == 0
    for name in ("summary.csv", "diagnostics.csv"):
        assert (tmp_path / "again" / name).read_text() == (direct / name).read_text()
    # thinned: every 4th point of each tag and the last one
    summarize.keep_run(falls, tmp_path / "thin" / "falls_seed1", every=4)
    rows = list(csv.DictReader((tmp_path / "thin" / "falls_seed1" / "scalars.csv").open()))
    steps = [int(r["step"]) for r in rows if r["tag"] == "train/grad_norm"]
    assert steps == [0, 100, 200, 300, 400, 500]


def test_phases_average_each_diagnostic_before_and_after_reaching(tmp_path: Path) -> None:
    summarize = load("stability/summarize.py")
    falls = make_run(tmp_path / "runs", "falls_seed1", FALLS, finished=True)
    assert summarize.main([str(falls), "--out", str(tmp_path / "study")]) == 0
    rows = {r["tag"]: r for r in csv.DictReader((tmp_path / "study" / "phases.csv").open())}
    grad = rows["train/grad_norm"]  # index 4: 4000 + step, logged every 25 steps
    assert grad["reached_step"] == "200"
    assert float(grad["mean_before"]) == pytest.approx(4000 + sum(range(0, 200, 25)) / 8)
    assert float(grad["mean_after"]) == pytest.approx(4000 + sum(range(200, 501, 25)) / 13)
