"""A training config small enough for the CLI tests (seconds per run), and helpers that
train it through ``txrl train`` and leave it as a killed run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from txrl import cli

#: A short passive T-maze and a one-layer GTrXL of width 16.
TINY: dict[str, Any] = {
    "name": "tiny",
    "budget": 128,
    "env": {"id": "txrl/TMazePassive-v0", "kwargs": {"length": 3}, "n_envs": 2},
    "policy": {"d_model": 16, "n_layers": 1, "n_heads": 2, "memory_length": 8},
    "ppo": {"n_steps": 16, "batch_size": 32, "segment_length": 8, "n_epochs": 1},
    "eval": {"every": 64, "episodes": 2, "n_envs": 2},
    "checkpoint": {"every": 32, "keep": 0},
    "runtime": {"progress_bar": False, "torch_threads": 1},
}


def tiny(**changes: Any) -> dict[str, Any]:
    """:data:`TINY` with whole top-level keys replaced."""
    return {**TINY, **changes}


def write_config(path: Path, **changes: Any) -> Path:
    """A config file of :data:`TINY` with whole top-level keys replaced."""
    path.write_text(yaml.safe_dump(tiny(**changes)))
    return path


def train_tiny(tmp_path: Path, name: str = "run", **changes: Any) -> Path:
    """Train :func:`write_config`'s run with ``txrl train`` in ``tmp_path / name``."""
    run_dir = tmp_path / name
    config = write_config(tmp_path / f"{name}.yaml", **changes)
    assert cli.main(["train", str(config), "--run-dir", str(run_dir)]) == 0
    return run_dir


def crash_after(run_dir: Path, step: int) -> None:
    """Leave ``run_dir`` as a run killed after its checkpoint at ``step``: no final
    checkpoint, no later periodic ones (its logs still run past ``step``)."""
    checkpoints = run_dir / "checkpoints"
    (checkpoints / "final.zip").unlink()
    (run_dir / "finished.json").unlink(missing_ok=True)
    for path in checkpoints.glob("step_*.zip"):
        if int(path.stem.split("_")[1]) > step:
            path.unlink()


def as_from_a_terminal() -> None:
    """``preexec_fn`` of a subprocess a test signals: SIGINT at its default. The test process
    may ignore or block SIGINT (a Ray Tune fit or a background job leaves that behind), and a
    child inherits both; a terminal's child has neither."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
