"""``bench/bptt_cost.py`` measures every model at tiny lengths and reports every figure (its
figures come from the full run on the machine, never from a test)."""

from __future__ import annotations

import math
import runpy
from pathlib import Path
from typing import Any

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "bptt_cost.py"


@pytest.fixture
def script(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.syspath_prepend(str(SCRIPT.parent))  # its imports of the other bench scripts
    return runpy.run_path(str(SCRIPT), run_name="bench_bptt_cost")


def assert_row(row: dict[str, Any], columns: list[str], model: str, bptt: int) -> None:
    assert list(row) == columns
    assert (row["model"], row["bptt"]) == (model, bptt)
    for key in columns[2:]:
        assert isinstance(row[key], float) and math.isfinite(row[key]), (key, row)
        assert row[key] >= 0, (key, row)
    assert row["rollout_ms_per_step"] > 0 and row["update_ms_per_step"] > 0


@pytest.mark.parametrize(("model", "bptt"), [("gru", 8), ("ffm", 16), ("recurrent_ppo", 8)])
def test_a_row_is_measured_in_this_process(script: dict[str, Any], model: str, bptt: int) -> None:
    args = script["parse_args"](["--measure", f"{model}:{bptt}", "--n-steps", "16", "--quick"])
    threads = torch.get_num_threads()
    try:
        row = script["measure"](args)
    finally:
        torch.set_num_threads(threads)  # measure sets the bench's own
    assert_row(row, [key for key, _, _ in script["COLUMNS"]], model, bptt)
    # the peak per step is the peak over the rollout's env steps (4 envs x n_steps)
    steps = 4 * (bptt if model == "recurrent_ppo" else 16)
    assert row["peak_kib_per_step"] == pytest.approx(row["peak_mib"] * 1024 / steps)


@pytest.mark.slow  # a fresh process per row
def test_the_table_is_printed_and_written_with_its_header(
    script: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results" / "bptt.txt"
    argv = ["--models", "lstm", "--lengths", "8", "--n-steps", "8", "--quick"]
    rows = script["main"]([*argv, "--note", "a note on the machine", "--out", str(out)])
    assert_row(rows[0], [key for key, _, _ in script["COLUMNS"]], "lstm", 8)
    text = out.read_text()
    assert text == capsys.readouterr().out
    lines = text.splitlines()
    assert lines[-2].split()[:2] == ["model", "BPTT"] and lines[-1].split()[:2] == ["lstm", "8"]
    assert "a note on the machine" in lines and any(line.startswith("CPU ") for line in lines)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--models", "gru,rnn"], "takes models among gru, lstm, ffm, recurrent_ppo"),
        (["--lengths", "32,0"], "takes positive lengths"),
        (["--recurrent-ppo-lengths", "x"], "takes positive lengths"),
        (["--repeats", "0"], "--repeats must be a positive integer, got 0"),
    ],
)
def test_bad_arguments_are_named(
    script: dict[str, Any], argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        script["main"](argv)
    assert message in capsys.readouterr().err
