"""The agent recipe trains every learner through ``main(config)``; recipes define no networks
or losses."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from txrl.config import TrainConfig
from txrl.run.algorithms import algorithm_class

ROOT = Path(__file__).resolve().parents[1]
RECIPES = sorted(p.stem for p in (ROOT / "agents").glob("*.py") if p.stem != "__init__")


def tiny(algo: str = "ppo", **policy: object) -> TrainConfig:
    return TrainConfig.from_dict(
        {
            "algo": algo,
            "budget": 64,
            "env": {"id": "txrl/TMazePassive-v0", "kwargs": {"length": 2}, "n_envs": 2},
            "policy": {"d_model": 16, "n_layers": 1, **policy},
            algo: {"n_steps": 16, "batch_size": 32, "segment_length": 8, "n_epochs": 1},
            "eval": {"every": 0, "episodes": 2, "n_envs": 2},
            "checkpoint": {"every": 0},
            "runtime": {"progress_bar": False, "torch_threads": 1},
        }
    )


GTRXL = {"backbone": "gtrxl", "n_heads": 2, "memory_length": 4, "gate": "input"}


@pytest.mark.parametrize(
    ("algo", "policy", "policy_class"),
    [
        ("ppo", GTRXL, "MlpGTrXLPolicy"),
        ("ppo", {"backbone": "trxl_i", "n_heads": 2, "memory_length": 4}, "MlpTrXLIPolicy"),
        ("ppo", {"backbone": "gru"}, "MlpGruPolicy"),
        ("ppo", {"backbone": "shaw", "n_heads": 2, "memory_length": 4}, "MlpMemoryPolicy"),
        ("vmpo", GTRXL, "MlpGTrXLPolicy"),
    ],
)
def test_recipe_trains(tmp_path: Path, algo: str, policy: dict, policy_class: str) -> None:
    config = tiny(algo, **policy)
    main = importlib.import_module("txrl.agents.recipe").main
    result = main(config, tmp_path / "run")
    assert result.timesteps == 64 and result.checkpoint.exists()
    assert result.final_eval["episodes"] == 2 and result.final_eval["success_rate"] is not None
    model = algorithm_class(algo).load(result.checkpoint)
    assert type(model.policy).__name__ == policy_class
    assert model.policy.backbone_name == policy["backbone"]


@pytest.mark.parametrize("name", RECIPES)
def test_recipes_define_no_networks_or_losses(name: str) -> None:
    """Recipes wire parts of txrl together; anything reusable lives in txrl/."""
    tree = ast.parse((ROOT / "agents" / f"{name}.py").read_text())
    assert not [n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    functions = [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    assert "main" in functions and not [f for f in functions if "loss" in f]
    imported = {
        a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom)
        for a in n.names
    }
    assert "nn" not in imported and "torch" not in imported
