"""The GPU scaling bench runs end to end on a CPU (its dry run), so the script a GPU session
gets one short try at is known to work before it runs there."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_gpu_scaling_dry_run_writes_a_row_per_setting(tmp_path) -> None:
    out = tmp_path / "scaling"
    command = [sys.executable, str(ROOT / "bench" / "gpu_scaling.py"), "--device", "cpu",
               "--n-envs", "2", "--models", "1x8", "--n-steps", "4", "--min-rollouts", "1",
               "--min-seconds", "0", "--variants", "graph", "bf16", "--no-profile",
               "--out", str(out)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.with_suffix(".json").read_text())
    assert [row["learner"] for row in rows] == [
        "txrl GTrXL 1x8 graph",
        "txrl GTrXL 1x8 bf16",
        "RecurrentPPO LSTM-8",
    ]
    for row in rows:
        assert "error" not in row, row
        assert row["steps_per_s"] > 0 and row["collect_s"] > 0 and row["train_s"] > 0
    assert "RecurrentPPO LSTM-8" in out.with_suffix(".txt").read_text()


def test_gpu_scaling_default_models_are_parsed() -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import gpu_scaling
    finally:
        sys.path.remove(str(ROOT / "bench"))
    assert gpu_scaling.parse_args(["--device", "cpu"]).models == [(2, 128), (3, 256)]
    assert gpu_scaling.parse_args(["--device", "cpu", "--models", "1x8"]).models == [(1, 8)]


def test_gpu_scaling_names_a_malformed_model() -> None:
    command = [sys.executable, str(ROOT / "bench" / "gpu_scaling.py"), "--device", "cpu",
               "--models", "2by128"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2
    assert "LAYERSxWIDTH" in done.stderr and "2by128" in done.stderr
