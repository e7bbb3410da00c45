"""The action spaces a run accepts are the ones it trains end to end: MultiBinary actions
(which SB3's PPO supports) train with ``algo: ppo`` through ``txrl train``."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.test_hostile_inputs import SPACE_ENVS, TINY
from txrl import cli
from txrl.run.run_files import CHECKPOINT_DIR, FINAL_CHECKPOINT

ENV_ID = "txrl_test/MultiBinaryActions-v0"
assert ENV_ID in SPACE_ENVS  # registered by the hostile-input cases


def test_multibinary_actions_train_and_evaluate(tmp_path: Path) -> None:
    config = tmp_path / "multibinary.yaml"
    config.write_text(yaml.safe_dump({**TINY, "env": {"id": ENV_ID, "n_envs": 2}}))
    run_dir = tmp_path / "run"
    assert cli.main(["train", str(config), "--run-dir", str(run_dir)]) == 0
    assert (run_dir / CHECKPOINT_DIR / FINAL_CHECKPOINT).exists()
    assert cli.main(["eval", str(run_dir), "--episodes", "2"]) == 0
