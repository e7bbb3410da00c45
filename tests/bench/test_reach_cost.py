"""``bench/reach_cost.py`` runs end to end at tiny memory lengths and reports every figure (its
figures come from the full run on the machine, never from a test)."""

from __future__ import annotations

import math
import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "reach_cost.py"
#: M = 8 and 16, each its own reference, few repeats
TINY = ["--quick", "--memory", "16,8", "--act-reference", "8", "--train-reference", "16"]
#: the long T-maze recipe's GTrXL: 1 layer of width 32; what the state and the trace hold
LAYERS, WIDTH = 1, 32


@pytest.fixture
def script(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.syspath_prepend(str(SCRIPT.parent))  # its imports of the other bench scripts
    return runpy.run_path(str(SCRIPT), run_name="bench_reach_cost")


def assert_positive_and_finite(row: dict[str, Any], keys: list[str]) -> None:
    for key in keys:
        assert isinstance(row[key], int | float) and math.isfinite(row[key]), (key, row)
        assert row[key] > 0, (key, row)


def test_tiny_table_has_a_row_per_memory_length_and_every_column(
    script: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results" / "reach.txt"
    rows = script["main"]([*TINY, "--no-rss", "--out", str(out)])
    columns = [key for key, _, _ in script["COLUMNS"]]
    assert [row["memory_length"] for row in rows] == [8, 16]
    timed = [c for c in columns if c.endswith(("_median", "_min", "_ratio", "transition"))]
    for row in rows:
        assert set(row) == set(columns)
        assert_positive_and_finite(row, [*timed, "state_bytes_per_env"])
        assert row["rss_growth_mib"] is None  # --no-rss
    eight, sixteen = rows
    assert eight["act_ratio"] == 1.0 and eight["act_target"] == "ref"
    assert sixteen["train_ratio"] == 1.0 and sixteen["train_target"] == "ref"
    assert sixteen["act_target"] in ("met", "not met")
    assert eight["train_target"] in ("met", "not met")
    # a slot holds a layer input, its key and its value (D floats each) and a valid flag
    per_slot = 3 * LAYERS * WIDTH * 4 + 1
    assert sixteen["state_bytes_per_env"] - eight["state_bytes_per_env"] == 8 * per_slot
    # the trace's L * D floats per step, plus the carried-in memory's share (128 steps)
    for row in rows:
        carried_in = row["state_bytes_per_env"] / 128
        assert row["buffer_bytes_per_transition"] == pytest.approx(LAYERS * WIDTH * 4 + carried_in)
    # the file is what was printed: the header, the targets, the columns, a line per M
    text = out.read_text()
    assert text == capsys.readouterr().out
    lines = text.splitlines()
    table = next(i for i, line in enumerate(lines) if line.split()[:3] == ["M", "act", "ms"])
    assert [line.split()[0] for line in lines[table + 1 :]] == ["8", "16"]
    assert "acting step at M = 1000 within 2x of M = 8" in text
    assert "training per env step at M = 1000 within 3x of M = 16" in text


@pytest.mark.slow  # a fresh process per M
def test_peak_rss_growth_is_measured_in_a_process_per_memory_length(
    script: dict[str, Any],
) -> None:
    rows = script["main"]([*TINY, "--act-repeats", "2"])
    for row in rows:
        assert math.isfinite(row["rss_growth_mib"]) and row["rss_growth_mib"] >= 0


@pytest.mark.parametrize("bad", ["0,128", "128,x", ""])
def test_a_bad_memory_list_is_named(
    script: dict[str, Any], bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    main: Callable[[list[str]], Any] = script["main"]
    with pytest.raises(SystemExit):
        main(["--memory", bad])
    error = capsys.readouterr().err
    assert f"got {bad!r}" in error and "positive memory lengths" in error


def test_the_floor_counts_products_and_bytes_as_its_docstrings_say(script: dict[str, Any]) -> None:
    shape = script["Shape"](layers=1, width=4, memory=10, segment=2, envs=3, batch=4, epochs=2,
                            weights=5, itemsize=4)  # fmt: skip
    counting_flops = script["Machine"](flops=1.0, bytes_per_s=math.inf)
    counting_bytes = script["Machine"](flops=math.inf, bytes_per_s=1.0)
    act_floor, train_floor = script["act_floor"], script["train_floor"]
    # acting: 2 B (L 3 (M + 1) D + P) FLOPs; L (2 B M D + (M + 1) D) floats
    assert act_floor(shape, counting_flops) == 2 * 3 * (3 * 11 * 4 + 5)
    assert act_floor(shape, counting_bytes) == 4 * (2 * 3 * 10 * 4 + 11 * 4)
    # a minibatch of G = 2 segments: projection and its gradient 2 G M D 2D, attention
    # 3 x 3 G T K D, the network 3 G T P multiply-adds; 2 x 3 G L M D floats; 2 epochs of a
    # 4-transition batch per transition
    macs = 2 * 2 * 10 * 4 * 2 * 4 + 9 * 2 * 2 * 12 * 4 + 3 * 2 * 2 * 5
    assert train_floor(shape, counting_flops) == 2 * macs * 2 / 4
    assert train_floor(shape, counting_bytes) == 4 * 2 * 3 * 2 * 10 * 4 * 2 / 4


#: a tiny grid of two backbones as the reach study's are written: a window memory and one
#: without, on short corridors, with a short rollout
TINY_STUDY = """
name: tiny_reach_backbones
base:
  algo: ppo
  env: {id: txrl/TMazePassive-v0, kwargs: {length: 6, min_length: 3}, n_envs: 2}
  policy: {d_model: 8, n_layers: 1, n_heads: 2}
  ppo: {n_steps: 16, batch_size: 16, segment_length: 8, n_epochs: 1}
seeds: [0]
axes:
  backbone:
    gtrxl: {policy.backbone: gtrxl, policy.gate: gru, policy.memory_length: 8}
    linear: {policy.backbone: linear}
"""


def test_across_backbones_has_a_row_per_backbone_and_span(
    script: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study = tmp_path / "compare.yaml"
    study.write_text(TINY_STUDY)
    out = tmp_path / "cost.txt"
    rows = script["main"](["--across-backbones", "--quick", "--study", str(study),
                           "--out", str(out)])  # fmt: skip
    assert [(row["backbone"], row["span"]) for row in rows] == [("gtrxl", 6), ("linear", 6)]
    columns = [key for key, _, _ in script["BACKBONE_COLUMNS"]]
    for row in rows:
        assert set(row) == set(columns)
        assert_positive_and_finite(row, columns[2:])
        assert row["train_s_per_100k"] >= max(row["rollout_s_per_100k"], row["update_s_per_100k"])
        ram = (row["state_bytes_per_env"] + row["buffer_bytes_per_env"]) / 2**20
        assert row["ram_mib_per_env"] == pytest.approx(ram)
    # the window's state grows with its memory; the linear state is its sums alone
    assert rows[0]["state_bytes_per_env"] > rows[1]["state_bytes_per_env"]
    text = out.read_text()
    assert text == capsys.readouterr().out
    lines = text.splitlines()
    table = next(i for i, line in enumerate(lines) if line.split()[:2] == ["backbone", "span"])
    assert [line.split()[:2] for line in lines[table + 1 :]] == [["gtrxl", "6"], ["linear", "6"]]
    assert (
        "  gtrxl at 6: gtrxl, gate gru, n_layers 1, d_model 8, n_heads 2, memory_length 8" in lines
    )
    # --only-backbones and --spans pick points
    picked = script["main"](["--across-backbones", "--quick", "--study", f"{study}:linear"])
    assert [row["backbone"] for row in picked] == ["linear"]
    with pytest.raises(SystemExit):
        script["main"](["--across-backbones", "--quick", "--study", str(study), "--spans", "7"])


def test_rollout_bytes_count_every_array_of_the_buffer(
    script: dict[str, Any], tmp_path: Path
) -> None:
    """``rollout_nbytes``: SB3's arrays of the rollout, the memory streams (the trace and the
    carried-in memory, as the learner logs them per transition) and the kept segment states."""
    study = tmp_path / "compare.yaml"
    study.write_text(TINY_STUDY)
    point = script["study_points"]([(study, ("gtrxl",))])[0]
    from scaling import one_rollout

    from txrl.agents.recipe import make_learner
    from txrl.run.envs import make_train_env

    model = make_learner(point.config, make_train_env(point.config))
    one_rollout(model)
    model.train()
    buffer = model.rollout_buffer
    sb3 = ("observations", "actions", "rewards", "returns", "episode_starts", "values",
           "log_probs", "advantages")  # fmt: skip
    transitions = buffer.buffer_size * buffer.n_envs
    streams = buffer.trace_nbytes_per_transition() * transitions
    _, segments = script["buffer_bytes"](model)
    assert segments is not None  # tiny: the segment states are kept
    expected = sum(getattr(buffer, name).nbytes for name in sb3) + streams + segments * transitions
    assert script["rollout_nbytes"](buffer) == pytest.approx(expected)
    model.env.close()
