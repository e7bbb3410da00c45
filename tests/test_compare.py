"""``txrl compare``: grid planning, skipping finished runs, summaries and plots, both backends."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from txrl.compare import TRAIN_LOG, compare, execute_run, parse_only, plan, summarise
from txrl.config import CONFIG_FILE, ConfigError, load_compare_config
from txrl.run.run_files import (
    CHECKPOINT_DIR,
    EVAL_LOG,
    FINAL_CHECKPOINT,
    FINISHED_RECORD,
    RESUME_LOG,
)

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "configs" / "compare_tiny.yaml"
PNG_MAGIC = b"\x89PNG"


def fake_run(
    run_dir: Path, config: dict, curve: list[tuple[int, float]], *, finished: bool = True
) -> None:
    """A run directory as training leaves it, with a made-up eval log."""
    run_dir.mkdir(parents=True)
    (run_dir / CONFIG_FILE).write_text(yaml.safe_dump(config))
    lines = [
        json.dumps(
            {
                "timesteps": t,
                "success_rate": s,
                "mean_return": 2 * s,
                "episodes": 10,
                "wall_time_s": t / 8,
            }
        )
        for t, s in curve
    ]
    (run_dir / EVAL_LOG).write_text("\n".join(lines) + "\n")
    (run_dir / CHECKPOINT_DIR).mkdir()
    marker = FINAL_CHECKPOINT if finished else "step_000000064.zip"
    (run_dir / CHECKPOINT_DIR / marker).write_bytes(b"")


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_summaries_from_synthetic_logs(tmp_path: Path) -> None:
    config = load_compare_config(TINY, ["threshold=0.5"])
    specs = plan(config, tmp_path)
    assert [(s.variant, s.seed) for s in specs] == [
        ("gtrxl", 0),
        ("gtrxl", 1),
        ("lstm", 0),
        ("lstm", 1),
    ]
    assert all(s.config["runtime"]["torch_threads"] == 1 for s in specs)
    curves = {
        ("gtrxl", 0): [(0, 0.0), (64, 0.6), (128, 1.0)],
        ("gtrxl", 1): [(0, 0.0), (64, 0.2), (128, 0.8)],
        ("lstm", 0): [(0, 0.0), (64, 0.1), (128, 0.4)],
    }
    for spec in specs:
        curve = curves.get((spec.variant, spec.seed), [(0, 0.0), (64, 0.3)])
        fake_run(
            Path(spec.run_dir), spec.config, curve, finished=(spec.variant, spec.seed) in curves
        )
    summarise(config, specs, tmp_path)

    rows = {r["variant"]: r for r in read_csv(tmp_path / "results.csv")}
    assert float(rows["gtrxl"]["mean"]) == pytest.approx(0.9)
    assert float(rows["gtrxl"]["iqm"]) == pytest.approx(0.9)
    assert 0.8 <= float(rows["gtrxl"]["ci_low"]) <= float(rows["gtrxl"]["ci_high"]) <= 1.0
    assert float(rows["gtrxl"]["steps_to_threshold"]) == 96  # median of 64 and 128
    assert float(rows["gtrxl"]["seconds_to_threshold"]) == 12  # their clocks: 8 and 16 s
    assert (rows["lstm"]["finished"], rows["lstm"]["reached"]) == ("1", "0")
    assert float(rows["lstm"]["mean"]) == pytest.approx(0.4)  # the unfinished seed is left out

    runs = read_csv(tmp_path / "runs.csv")
    assert [r["status"] for r in runs] == ["finished", "finished", "finished", "partial"]
    table = (tmp_path / "results.md").read_text()
    assert (
        "| memory | seeds | mean | IQM | 95% CI | steps to 0.5 | time to 0.5 | mean return |"
        in table
    )
    assert "| --- | --- | --- | --- | --- | --- | --- | --- |" in table
    assert "| 96 (2/2) | 12 s | 1.800 |" in table
    assert "| gtrxl | 2 | 0.900 | 0.900 |" in table
    assert "| lstm | 1/2 | 0.400 |" in table
    # the unfinished run is left out of the scores but not out of the report
    unfinished = table.split("## Unfinished runs")[1]
    assert "| memory | seed | last evaluation at | success rate | best success rate |" in unfinished
    assert "| lstm | 1 | 64 of 128 | 0.300 | 0.300 | 8 s |" in unfinished
    assert "gtrxl" not in unfinished
    for png in ("curves.png", "final.png"):
        assert (tmp_path / png).read_bytes()[:4] == PNG_MAGIC


def test_score_mean_ranks_by_the_whole_learning_curve(tmp_path: Path) -> None:
    config = load_compare_config(TINY, ["score=mean"])
    specs = plan(config, tmp_path)
    # Both end at 1.0; gtrxl gets there sooner.
    curves = {"gtrxl": [(0, 0.0), (64, 1.0), (128, 1.0)], "lstm": [(0, 0.0), (64, 0.0), (128, 1.0)]}
    for spec in specs:
        fake_run(Path(spec.run_dir), spec.config, curves[spec.variant])
    summarise(config, specs, tmp_path)
    rows = {r["variant"]: r for r in read_csv(tmp_path / "results.csv")}
    assert float(rows["gtrxl"]["mean"]) == pytest.approx(2 / 3)
    assert float(rows["lstm"]["mean"]) == pytest.approx(1 / 3)
    assert read_csv(tmp_path / "runs.csv")[0]["mean_success_rate"] == str(2 / 3)
    table = (tmp_path / "results.md").read_text()
    assert table.startswith("# compare_tiny: mean success rate across seeds")
    assert "Mean = each run's mean over all its evaluations" in table
    with pytest.raises(ConfigError, match="score"):
        load_compare_config(TINY, ["score=auc"])


def test_finished_runs_are_skipped_and_changed_configs_refused(tmp_path: Path) -> None:
    config = load_compare_config(TINY)
    for spec in plan(config, tmp_path):
        fake_run(Path(spec.run_dir), spec.config, [(0, 0.0), (128, 1.0)])
    lines: list[str] = []
    _, outcomes = compare(config, tmp_path, echo=lines.append)
    assert outcomes == []  # nothing ran
    assert "4 finished (skipped), 0 to resume, 0 new" in lines[0]
    assert (tmp_path / "results.md").exists()

    changed = load_compare_config(TINY, ["base.ppo.gamma=0.9"])
    with pytest.raises(
        ConfigError, match=r"holds a run of a different config \(changed: ppo.gamma\)"
    ):
        compare(changed, tmp_path, echo=lines.append)


def test_runs_started_before_a_setting_existed_still_count(tmp_path: Path) -> None:
    """A run whose config.yaml predates a setting (here policy.training_precision, absent,
    so its default) is the same run, not a different config: a study survives an upgrade."""
    config = load_compare_config(TINY)
    for spec in plan(config, tmp_path):
        older = yaml.safe_load(yaml.safe_dump(spec.config))
        del older["policy"]["training_precision"]
        fake_run(Path(spec.run_dir), older, [(0, 0.0), (128, 1.0)])
    lines: list[str] = []
    _, outcomes = compare(config, tmp_path, echo=lines.append)
    assert outcomes == [] and "4 finished (skipped)" in lines[0]


def test_train_log_holds_the_runs_progress_and_errors(tmp_path: Path) -> None:
    """``train.log`` is where a compare run's output goes: its progress lines (the log is not
    a terminal) and, when it fails, the traceback."""
    import torch

    config = load_compare_config(TINY)
    spec = plan(config, tmp_path)[0]
    broken = plan(config, tmp_path / "broken")[0]
    broken.config["env"]["id"] = "txrl/NoSuchTask-v0"
    threads = torch.get_num_threads()
    try:  # execute_run sets this process's torch threads to 1, as in a pool worker
        assert execute_run(spec)["status"] == "finished"
        assert execute_run(broken)["status"] == "failed"
    finally:
        torch.set_num_threads(threads)
    log = (Path(spec.run_dir) / TRAIN_LOG).read_text()
    assert "step 0/128 (0%)" in log and "step 128/128 (100%)" in log
    assert "eval at 64:" in log  # the latest evaluation when training ended
    log = (Path(broken.run_dir) / TRAIN_LOG).read_text()
    assert "Traceback" in log and "NoSuchTask" in log


def test_runs_planned_without_progress_lines_are_the_same_runs(tmp_path: Path) -> None:
    """Run directories written before compare logged progress (``progress_bar: false``)
    differ only in what a run prints: still finished runs of the same study."""
    config = load_compare_config(TINY)
    for spec in plan(config, tmp_path):
        older = yaml.safe_load(yaml.safe_dump(spec.config))
        older["runtime"]["progress_bar"] = False
        fake_run(Path(spec.run_dir), older, [(0, 0.0), (128, 1.0)])
    lines: list[str] = []
    _, outcomes = compare(config, tmp_path, echo=lines.append)
    assert outcomes == [] and "4 finished (skipped)" in lines[0]


def _check_outputs(out: Path) -> None:
    rows = read_csv(out / "results.csv")
    assert [r["variant"] for r in rows] == ["gtrxl", "lstm"]
    assert all(r["finished"] == "2" for r in rows)
    assert all(0.0 <= float(r["mean"]) <= 1.0 for r in rows)
    assert "| gtrxl | 2 |" in (out / "results.md").read_text()
    for png in ("curves.png", "final.png"):
        assert (out / png).read_bytes()[:4] == PNG_MAGIC
    for run_dir in (out / "runs").glob("*/seed_*"):
        entries = [json.loads(line) for line in (run_dir / EVAL_LOG).read_text().splitlines()]
        assert [e["timesteps"] for e in entries] == [0, 64, 128]
        assert (run_dir / CHECKPOINT_DIR / FINAL_CHECKPOINT).exists()
        record = json.loads((run_dir / FINISHED_RECORD).read_text())
        assert record["timesteps"] == record["budget"] == 128
        assert record["stopped_at_target"] is False


@pytest.mark.slow  # trains the tiny grid twice, two worker processes
def test_local_backend_runs_the_tiny_grid_and_resumes_a_half_done_run(tmp_path: Path) -> None:
    config = load_compare_config(TINY)
    _, outcomes = compare(config, tmp_path, backend="local", workers=2, echo=lambda _: None)
    assert [o["status"] for o in outcomes] == ["finished"] * 4
    _check_outputs(tmp_path)

    # Interrupted after its first checkpoint: only that run runs again, from the checkpoint.
    half_done = tmp_path / "runs" / "lstm" / "seed_1"
    (half_done / CHECKPOINT_DIR / FINAL_CHECKPOINT).unlink()
    (half_done / FINISHED_RECORD).unlink()
    (half_done / CHECKPOINT_DIR / "step_000000128.zip").unlink(missing_ok=True)
    lines: list[str] = []
    _, outcomes = compare(config, tmp_path, workers=2, echo=lines.append)
    assert "3 finished (skipped), 1 to resume, 0 new" in lines[0]
    assert [o["run_dir"] for o in outcomes] == [str(half_done.resolve())]
    resumes = [json.loads(line) for line in (half_done / RESUME_LOG).read_text().splitlines()]
    assert [r["from"] for r in resumes] == [64]
    _check_outputs(tmp_path)

    # A record of the study without checkpoints or TensorBoard events (as results/ keeps
    # one) is still a finished study: the same tables come back from it, nothing reruns.
    record = tmp_path / "record"
    for run_dir in (tmp_path / "runs").glob("*/seed_*"):
        copy = record / run_dir.relative_to(tmp_path)
        copy.mkdir(parents=True)
        for name in (CONFIG_FILE, EVAL_LOG, FINISHED_RECORD):
            (copy / name).write_bytes((run_dir / name).read_bytes())
    assert {s.status() for s in plan(config, record)} == {"finished"}
    lines = []
    compare(config, record, aggregate_only=True, echo=lines.append)
    assert "4 finished (skipped), 0 to resume, 0 new" in lines[0]
    assert read_csv(record / "results.csv") == read_csv(tmp_path / "results.csv")


@pytest.mark.slow  # starts a Ray cluster and trains the tiny grid
def test_ray_backend_runs_the_tiny_grid(tmp_path: Path) -> None:
    import signal

    config = load_compare_config(TINY)
    ctrl_c = signal.getsignal(signal.SIGINT)
    _, outcomes = compare(config, tmp_path, backend="ray", workers=2, echo=lambda _: None)
    assert sorted(o["status"] for o in outcomes) == ["finished"] * 4
    assert signal.getsignal(signal.SIGINT) is ctrl_c  # Tune's own handler is not left behind
    _check_outputs(tmp_path)
    assert list((tmp_path / "ray").glob("grid-*"))  # Tune's own experiment state, beside ours


def test_unknown_backend(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="backend must be local or ray"):
        compare(load_compare_config(TINY), tmp_path, backend="slurm")


def test_interpolated_curves_cover_common_steps() -> None:
    from txrl.compare import RunRecord, RunSpec, VariantSummary
    from txrl.compare.plots import _mean_curve

    spec = RunSpec("v", (), 0, {}, "/nonexistent")
    records = [
        RunRecord(spec, True, [0, 100, 200], [0.0, 0.5, 1.0], 1.0, 1.0, 200),
        RunRecord(spec, True, [0, 50, 150], [0.0, 0.5, 1.0], 1.0, 1.0, 150),
    ]
    curve = _mean_curve(VariantSummary("v", (), records))
    assert curve is not None
    t, mean, lo, hi = curve
    assert list(t) == [0, 50, 100, 150]  # up to the shorter run's end
    assert np.allclose(mean, [0.0, 0.375, 0.625, 0.875])
    assert np.all(lo <= mean) and np.all(mean <= hi)


PARISOTTO = {"gru": 117.6, "output": 112.8, "highway": 90.9, "input": 51.2}


def _gate_grid(tmp_path: Path, axes: dict, **extra: object) -> Path:
    """A compare config over GTrXL gates on the tiny T-maze (nothing is trained)."""
    data = {
        "name": "gates",
        "base": {
            "algo": "ppo",
            "budget": 128,
            "env": {"id": "txrl/TMazePassive-v0", "kwargs": {"length": 3}, "n_envs": 2},
            "policy": {"backbone": "gtrxl", "d_model": 16, "n_layers": 1, "n_heads": 2},
            "ppo": {"n_steps": 16, "batch_size": 32, "segment_length": 8, "n_epochs": 1},
        },
        "axes": axes,
        "bootstrap_reps": 200,
        **extra,
    }
    path = tmp_path / "gates.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _gates(*names: str) -> dict:
    return {"memory": {name: {"policy.gate": name} for name in names}}


def test_ranking_against_a_reference(tmp_path: Path) -> None:
    reference = {"name": "Parisotto et al. 2019, Table 1", "scores": PARISOTTO}
    path = _gate_grid(
        tmp_path,
        _gates("gru", "output", "highway", "input", "sigtanh"),
        seeds=[0, 1, 2, 3],
        reference=reference,
    )
    config = load_compare_config(path)
    out = tmp_path / "out"
    specs = plan(config, out)
    finals = {
        "gru": [0.9, 1.0, 1.0, 1.0],  # IQM 1.0
        "output": [0.2, 0.3, 0.4, 0.85],  # IQM 0.35 (mean 0.4375)
        "highway": [0.5, 0.6, 0.7, 0.8],  # IQM 0.65
        "input": [0.0, 0.1, 0.1, 0.2],  # IQM 0.1
        "sigtanh": [0.8, 0.8, 0.8, 0.8],  # not in the reference
    }
    for spec in specs:
        fake_run(
            Path(spec.run_dir), spec.config, [(0, 0.0), (128, finals[spec.variant][spec.seed])]
        )
    summarise(config, specs, out)

    rows = {r["variant"]: r for r in read_csv(out / "results.csv")}
    assert float(rows["output"]["iqm"]) == pytest.approx(0.35)
    assert float(rows["output"]["mean"]) == pytest.approx(0.4375)
    # Reference gru > output > highway > input; ours gru > highway > output > input: of the
    # 6 pairs only (output, highway) is discordant, tau = (5 - 1) / 6.
    table = (out / "results.md").read_text()
    assert "## Ranking against Parisotto et al. 2019, Table 1" in table
    assert "| memory | reference | reference rank | IQM | 95% CI | our rank |" in table
    assert "| gru | 117.6 | 1 | 1.000 |" in table
    assert "| output | 112.8 | 2 | 0.350 |" in table and table.index("| output |") < table.index(
        "| highway | 90.9 | 3 | 0.650 |"
    )
    assert "| sigtanh | – | – | 0.800 |" in table
    assert "left out of tau (no reference score or no finished runs): sigtanh." in table
    assert "Kendall's tau (our IQM against the reference, 4 labels): 0.667, 95% CI [" in table
    # P(X > Y): gru beats output always; output's 0.85 beats all 4 runs of highway (4/16).
    assert "| gru | output | 1.000 |" in table
    assert "| output | highway | 0.250 |" in table
    assert "| highway | input | 1.000 |" in table
    assert (out / "ranking.png").read_bytes()[:4] == PNG_MAGIC


def test_reference_best_pairs_and_ranking_without_enough_labels_finished(tmp_path: Path) -> None:
    reference = {"scores": PARISOTTO, "pairs": "best"}
    path = _gate_grid(tmp_path, _gates(*PARISOTTO), seeds=[0, 1], reference=reference)
    config = load_compare_config(path)
    specs = plan(config, tmp_path / "out")
    for spec in specs:
        done = spec.variant in ("gru", "output")
        fake_run(Path(spec.run_dir), spec.config, [(0, 0.0), (128, 0.5)], finished=done)
    summarise(config, specs, tmp_path / "out")
    table = (tmp_path / "out" / "results.md").read_text()
    assert "## Ranking against the reference" in table
    assert "Kendall's tau: – (needs 3 labels" in table
    assert "| gru | output | 0.500 |" in table  # the best against the other finished one
    assert "left out of tau (no reference score or no finished runs): highway, input." in table


def test_panels_get_their_own_tables_and_an_aggregate_over_tasks(tmp_path: Path) -> None:
    tasks = {"a": {"env.kwargs": {"length": 3}}, "b": {"env.kwargs": {"length": 4}}}
    path = _gate_grid(
        tmp_path,
        {**_gates("gru", "output", "input"), "task": tasks},
        seeds=[0, 1],
        panels="task",
        metric="mean_return",
        reference={"scores": {k: PARISOTTO[k] for k in ("gru", "output", "input")}},
    )
    config = load_compare_config(path)
    out = tmp_path / "out"
    specs = plan(config, out)
    success = {  # fake_run logs mean_return = 2 * success
        ("gru", "a"): [1.0, 0.5],
        ("input", "a"): [0.0, 0.25],
        ("output", "a"): [0.5, 0.5],
        ("gru", "b"): [0.5, 0.5],
        ("input", "b"): [0.25, 0.0],
        ("output", "b"): [0.25, 0.25],
    }
    for spec in specs:
        labels = dict(spec.labels)
        s = success[(labels["memory"], labels["task"])][spec.seed]
        fake_run(Path(spec.run_dir), spec.config, [(0, 0.0), (128, s)])
    summarise(config, specs, out)

    table = (out / "results.md").read_text()
    for title in ("## task: a", "## task: b", "## All tasks", "### Ranking against"):
        assert title in table
    assert (
        "| memory | seeds | mean | IQM | 95% CI | steps to 0.9 | time to 0.9 | mean return |"
        in table
    )
    assert table.count("### Ranking against the reference") == 3  # each task, and all tasks
    # Min-max per task over all its runs: task a returns span [0, 2], task b [0, 1]. gru's
    # normalised scores are {1, 0.5} on a and {1, 1} on b: IQM of (0.5, 1, 1, 1) is 1;
    # input's (0, 0.25) and (0.5, 0): IQM of (0, 0, 0.25, 0.5) is 0.125; output's all 0.5.
    aggregate = {r["memory"]: r for r in read_csv(out / "aggregate.csv")}
    assert float(aggregate["gru"]["iqm"]) == pytest.approx(1.0)
    assert float(aggregate["input"]["iqm"]) == pytest.approx(0.125)
    assert float(aggregate["output"]["iqm"]) == pytest.approx(0.5)
    assert aggregate["gru"]["runs"] == "2" and aggregate["gru"]["panels"] == "2"
    assert "min-max normalised" in table
    assert table.count("Kendall's tau (our IQM against the reference, 3 labels): 1.000") == 3


def test_summaries_without_rliable_fall_back_and_say_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from txrl import stats

    monkeypatch.setattr(stats, "available", lambda: "txrl.stats needs rliable")
    path = _gate_grid(tmp_path, _gates(*PARISOTTO), seeds=[0, 1], reference={"scores": PARISOTTO})
    config = load_compare_config(path)
    specs = plan(config, tmp_path / "out")
    for spec in specs:
        fake_run(Path(spec.run_dir), spec.config, [(0, 0.0), (128, 0.1 * (spec.seed + 1))])
    lines: list[str] = []
    summarise(config, specs, tmp_path / "out", lines.append)
    assert "percentile bootstrap" in lines[0]
    table = (tmp_path / "out" / "results.md").read_text()
    assert "percentile bootstrap of the IQM (txrl.stats), because txrl.stats needs rliable" in table
    assert "| gru | 2 | 0.150 | 0.150 | [0.100, 0.200] |" in table
    assert (
        "Kendall's tau and the probabilities of improvement: –, txrl.stats needs rliable." in table
    )


@pytest.mark.slow  # trains one run of the grid
def test_only_runs_part_of_the_grid_and_summarises_all_of_it(tmp_path: Path) -> None:
    """``--only`` picks runs by axis label and seed; the rest of the grid is left alone, and
    the summary counts every finished run, whichever process ran it."""
    config = load_compare_config(TINY)
    gtrxl_runs = [s for s in plan(config, tmp_path) if s.variant == "gtrxl"]
    for spec in gtrxl_runs:  # the gtrxl half of the grid ran elsewhere
        fake_run(Path(spec.run_dir), spec.config, [(0, 0.0), (128, 1.0)])
    lines: list[str] = []
    _, outcomes = compare(
        config, tmp_path, workers=1, only=parse_only(["memory=lstm", "seed=1"]), echo=lines.append
    )
    lstm = tmp_path / "runs" / "lstm"
    assert [o["run_dir"] for o in outcomes] == [str((lstm / "seed_1").resolve())]
    assert not (lstm / "seed_0").exists()
    assert "--only: 1 of them selected, 1 to run" in lines[1]
    rows = {r["variant"]: r for r in read_csv(tmp_path / "results.csv")}
    assert rows["gtrxl"]["finished"] == "2" and rows["lstm"]["finished"] == "1"


@pytest.mark.slow  # trains one run of the grid, paused, then to its end
def test_until_pauses_the_runs_and_the_same_call_without_it_continues_them(
    tmp_path: Path,
) -> None:
    """``until`` pauses each run at a checkpoint (reported, listed among the unfinished,
    not a failure); the same compare without it continues them to their budget."""
    config = load_compare_config(TINY)
    one_run = parse_only(["memory=lstm", "seed=0"])
    lines: list[str] = []
    _, outcomes = compare(config, tmp_path, workers=1, only=one_run, until=40, echo=lines.append)
    run_dir = (tmp_path / "runs" / "lstm" / "seed_0").resolve()
    assert [o["status"] for o in outcomes] == ["paused"]
    assert f"[1/1] lstm seed 0: paused at step 64 (until 40) of 128; checkpoint {run_dir}" in (
        "\n".join(lines)
    )
    assert not (run_dir / FINISHED_RECORD).exists()
    assert "| lstm | 0 | 64 of 128 |" in (tmp_path / "results.md").read_text()

    lines.clear()
    _, outcomes = compare(config, tmp_path, workers=1, only=one_run, echo=lines.append)
    assert [o["status"] for o in outcomes] == ["finished"]
    assert "0 finished (skipped), 1 to resume" in lines[0]
    assert json.loads((run_dir / FINISHED_RECORD).read_text())["timesteps"] == 128


@pytest.mark.parametrize(
    ("only", "message"),
    [
        (["task=x"], r"no axis 'task'; axes: memory, seed"),
        (["memory=gru"], r"no label gru; valid: gtrxl, lstm"),
        (["seed=7"], r"no label 7; valid: 0, 1"),
        (["memory"], r"--only takes AXIS=LABEL"),
    ],
)
def test_only_names_what_is_valid(tmp_path: Path, only: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        compare(load_compare_config(TINY), tmp_path, only=parse_only(only), echo=lambda _: None)
    assert not (tmp_path / "runs").exists()  # nothing was started


def _endless_compare(tmp_path: Path, seeds: str = "0") -> tuple[Any, Callable[[], bool]]:
    """A ``txrl compare`` process training endless runs of ``seeds`` on one worker, returned
    once it trains seed 0 (its run's lock held), with a test of whether that lock is still
    held."""
    import fcntl
    import subprocess
    import sys
    import time

    from tests._runs import as_from_a_terminal
    from txrl.run.run_files import LOCK_FILE

    command = [sys.executable, "-m", "txrl", "compare", str(TINY), "--out", str(tmp_path)]
    one_run = ["--workers", "1", "--only", "memory=lstm", "--only", f"seed={seeds}"]
    endless = ["--set", "base.budget=100000000", "--set", "base.checkpoint.every=100000000"]
    parent = subprocess.Popen(
        [*command, *one_run, *endless],
        stdout=subprocess.PIPE,  # a few lines: what the compare reports
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_from_a_terminal,
    )
    run_dir = tmp_path / "runs" / "lstm" / "seed_0"

    def held() -> bool:
        with open(run_dir / LOCK_FILE, "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(handle, fcntl.LOCK_UN)
            return False

    deadline = time.monotonic() + 120
    try:
        while not ((run_dir / EVAL_LOG).exists() and held()):  # the worker is training
            assert parent.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
    except BaseException:
        parent.kill()
        parent.wait()
        raise
    return parent, held


def _released(held: Callable[[], bool]) -> None:
    import time

    deadline = time.monotonic() + 30
    while held():
        assert time.monotonic() < deadline, "the worker outlived its compare process"
        time.sleep(0.2)


@pytest.mark.slow  # a compare process and its training workers
def test_killed_compare_takes_its_workers_with_it(tmp_path: Path) -> None:
    """A compare process killed outright (SIGKILL, no chance to clean up) leaves no worker
    training on and holding its run, so the next compare can resume that run."""
    parent, held = _endless_compare(tmp_path)
    parent.kill()
    parent.wait()
    _released(held)


@pytest.mark.slow  # a compare process and its training workers
@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_interrupted_compare_stops_its_runs_at_a_checkpoint_instead_of_waiting(
    tmp_path: Path, signum: str
) -> None:
    """SIGINT (a terminal's Ctrl-C, a notebook's interrupt, ``kill -INT``) or SIGTERM
    (``kill``, a cluster scheduler) to the compare process while its run is far from done and
    has no checkpoint: the run ends after its rollout's update with a checkpoint there
    (nothing to redo on resume), the compare reports it and exits with status 130."""
    import signal
    import subprocess

    parent, held = _endless_compare(tmp_path)  # periodic checkpoints never come due
    parent.send_signal(getattr(signal, signum))
    try:
        out, err = parent.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        parent.kill()
        parent.wait()
        pytest.fail("the interrupted compare waited for its run to finish")
    assert parent.returncode == 130, err
    lines = err.strip().splitlines()
    assert lines[-1] == "txrl compare: interrupted"
    assert any(line.startswith("txrl compare: stopping: each running run ends") for line in lines)
    _released(held)
    checkpoints = list((tmp_path / "runs" / "lstm" / "seed_0" / "checkpoints").glob("step_*.zip"))
    assert len(checkpoints) == 1, err  # written at the stop
    step = int(checkpoints[0].stem.split("_")[1])
    assert f"[1/1] lstm seed 0: stopped: interrupted at step {step:,}; last checkpoint" in out


@pytest.mark.slow  # a compare process and its training worker
def test_a_stopped_compare_begins_no_run_its_worker_had_queued(tmp_path: Path) -> None:
    """A process pool hands its worker one run more than it runs; once the compare is
    stopped, that run is not begun (no run folder, no step-0 checkpoint to resume from)."""
    import signal

    parent, held = _endless_compare(tmp_path, seeds="0,1")
    parent.send_signal(signal.SIGTERM)
    out, err = parent.communicate(timeout=60)
    assert parent.returncode == 130, err
    _released(held)
    assert "[1/2] lstm seed 0: stopped: interrupted at step" in out
    assert "seed 1" not in out
    assert not (tmp_path / "runs" / "lstm" / "seed_1" / CONFIG_FILE).exists()


@pytest.mark.slow  # a compare process starting a local Ray and training on it
def test_interrupted_ray_compare_stops_its_run_at_a_checkpoint_and_begins_no_other(
    tmp_path: Path,
) -> None:
    """Ctrl-C to a Ray compare stops as the local backend's does, instead of Tune ending
    its trials where they are: the running run ends after its rollout's update with a
    checkpoint there, the run not begun is not begun, the compare reports the stopped one
    and exits with status 130."""
    import signal
    import subprocess
    import sys
    import time

    from tests._runs import as_from_a_terminal

    command = [sys.executable, "-m", "txrl", "compare", str(TINY), "--out", str(tmp_path)]
    two_runs = ["--backend", "ray", "--workers", "1", "--only", "memory=lstm"]  # seeds 0, 1
    endless = ["--set", "base.budget=100000000", "--set", "base.checkpoint.every=100000000"]
    parent = subprocess.Popen(
        [*command, *two_runs, *endless],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_from_a_terminal,
    )
    runs = tmp_path / "runs" / "lstm"
    deadline = time.monotonic() + 600  # a local Ray starts slowly on a loaded machine
    try:
        while not list(runs.glob(f"seed_*/{EVAL_LOG}")):  # a trial is training
            assert parent.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        parent.send_signal(signal.SIGINT)
        out, err = parent.communicate(timeout=120)
    except BaseException:
        parent.kill()
        parent.wait()
        raise
    assert parent.returncode == 130, err
    assert err.strip().splitlines()[-1] == "txrl compare: interrupted"
    assert "txrl compare: stopping: each running run ends" in err
    (trained,) = [p.parent for p in runs.glob(f"seed_*/{EVAL_LOG}")]
    checkpoints = list((trained / "checkpoints").glob("step_*.zip"))
    assert len(checkpoints) == 1, err  # written at the stop
    step = int(checkpoints[0].stem.split("_")[1])
    seed = trained.name.removeprefix("seed_")
    assert f"[1/2] lstm seed {seed}: stopped: interrupted at step {step:,}" in out
    other = runs / ("seed_1" if seed == "0" else "seed_0")
    assert not (other / CONFIG_FILE).exists()  # the run not begun was not begun
    assert "FAILED" not in out


def test_plots_share_one_matplotlib_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from txrl.compare.plots import DRAWS
    from txrl.plotting import figure_class, save_png

    fig = figure_class(DRAWS)(figsize=(2, 2))
    fig.subplots().plot([0, 1], [0, 1])
    save_png(fig, tmp_path / "a.png", dpi=50)
    assert (tmp_path / "a.png").read_bytes().startswith(PNG_MAGIC)
    assert [p.name for p in tmp_path.iterdir()] == ["a.png"]  # no temporary file left
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # as if not installed
    with pytest.raises(ImportError, match=r"txrl compare draws its plots with matplotlib: pip"):
        figure_class(DRAWS)


def test_runs_start_seed_by_seed_after_the_half_done_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A study cut short holds whole seeds: every variant's first seed starts before any
    variant's second, and a half-done run resumes before anything new starts."""
    import txrl.compare.pipeline as pipeline

    config = load_compare_config(TINY)  # memory: gtrxl, lstm; seeds 0, 1
    specs = {(s.variant, s.seed): s for s in plan(config, tmp_path)}
    half = specs["lstm", 1]
    fake_run(Path(half.run_dir), half.config, [(0, 0.0)], finished=False)
    started: list[tuple[str, int]] = []

    def record(todo: list[Any], workers: int, report: Any) -> list[dict[str, Any]]:
        started.extend((s.variant, s.seed) for s in todo)
        return []

    monkeypatch.setattr(pipeline, "run_local", record)
    compare(config, tmp_path, workers=1, echo=lambda _: None)
    assert started == [("lstm", 1), ("gtrxl", 0), ("lstm", 0), ("gtrxl", 1)]
    assert [(s.variant, s.seed) for s in plan(config, tmp_path)] == [
        ("gtrxl", 0), ("gtrxl", 1), ("lstm", 0), ("lstm", 1)
    ]  # fmt: skip
