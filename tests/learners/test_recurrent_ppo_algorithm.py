"""``algo: recurrent_ppo``: sb3-contrib's RecurrentPPO trained, resumed and compared like any
txrl learner, from the config alone."""

from __future__ import annotations

import io
import json
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
import torch
import yaml
from sb3_contrib import RecurrentPPO as ContribRecurrentPPO

from tests._runs import crash_after, tiny
from txrl import RecurrentPPO, cli
from txrl.compare import compare
from txrl.config import load_compare_config
from txrl.run.run_files import CHECKPOINT_DIR, EVAL_LOG, FINAL_CHECKPOINT, RESUME_LOG

LSTM_RUN = tiny(
    algo="recurrent_ppo",
    budget=192,
    policy={"backbone": "lstm", "hidden_size": 16},
    recurrent_ppo={"n_steps": 16, "batch_size": 32, "n_epochs": 2},
)
del LSTM_RUN["ppo"]


def weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    with zipfile.ZipFile(checkpoint) as archive:
        return torch.load(io.BytesIO(archive.read("policy.pth")))


def test_trains_from_a_config_and_resumes_exactly(tmp_path: Path) -> None:
    (tmp_path / "lstm.yaml").write_text(yaml.safe_dump(LSTM_RUN))
    straight = tmp_path / "straight"
    assert cli.main(["train", str(tmp_path / "lstm.yaml"), "--run-dir", str(straight)]) == 0
    final = straight / CHECKPOINT_DIR / FINAL_CHECKPOINT
    model = RecurrentPPO.load(final)
    assert isinstance(model, ContribRecurrentPPO) and model.num_timesteps == 192
    assert type(model.policy).__name__ == "RecurrentActorCriticPolicy"
    assert model.policy.lstm_actor.hidden_size == 16  # policy.hidden_size reached the LSTM
    assert (model.n_steps, model.batch_size, model.n_epochs) == (16, 32, 2)
    assert model.ent_coef == 0.0  # sb3-contrib's own default, the config left it unset
    steps = [
        json.loads(line)["timesteps"] for line in (straight / EVAL_LOG).read_text().splitlines()
    ]
    assert steps == [0, 64, 128, 192]

    # As if killed after the checkpoint at step 96: resume, and get the same weights.
    resumed = tmp_path / "resumed"
    shutil.copytree(straight, resumed)
    crash_after(resumed, 96)
    assert cli.main(["train", "--resume", str(resumed)]) == 0
    note = json.loads((resumed / RESUME_LOG).read_text())
    assert note["from"] == 96 and note["envs"] == "exact"
    expected, got = weights(final), weights(resumed / CHECKPOINT_DIR / FINAL_CHECKPOINT)
    for name, tensor in expected.items():
        torch.testing.assert_close(got[name], tensor, rtol=0, atol=0)


def test_memory_round_trips() -> None:
    model = RecurrentPPO("MlpLstmPolicy", "CartPole-v1", n_steps=8, batch_size=8, seed=0)
    memory = model.get_memory()
    assert memory is not None and len(memory) == 4
    changed = tuple(a + 1.0 for a in memory)
    model.set_memory(changed)
    for a, b in zip(model.get_memory(), changed, strict=True):
        assert (a == b).all()


def test_set_memory_of_a_model_not_set_up_and_forgetting_it() -> None:
    """get_memory is None before setup; set_memory(None) leaves the zero states of a fresh
    model, from which it learns on."""
    bare = RecurrentPPO("MlpLstmPolicy", "CartPole-v1", n_steps=8, batch_size=8,
                        _init_setup_model=False)  # fmt: skip
    assert bare.get_memory() is None
    bare.set_memory(bare.get_memory())
    assert bare.get_memory() is None
    model = RecurrentPPO("MlpLstmPolicy", "CartPole-v1", n_steps=8, batch_size=8, seed=0)
    model.learn(8)
    assert any(a.any() for a in model.get_memory())
    model.set_memory(None)
    memory = model.get_memory()
    assert len(memory) == 4 and not any(a.any() for a in memory)
    assert memory[0].shape == (1, 1, model.policy.lstm_actor.hidden_size)
    model.learn(8, reset_num_timesteps=False)


def test_learn_leaves_no_folder_in_the_temp_dir(tmp_path: Path, monkeypatch) -> None:
    """Without tensorboard_log, SB3's logger would create an empty SB3-<date> folder in the
    temp dir on every learn; this learner, as txrl's own, creates none."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv("SB3_LOGDIR", raising=False)
    model = RecurrentPPO("MlpLstmPolicy", "CartPole-v1", n_steps=8, batch_size=8, seed=0)
    model.learn(8)
    model.learn(8)
    assert list(tmp_path.iterdir()) == []
    assert "train/n_updates" in model.logger.name_to_value  # it logged, in memory


@pytest.mark.slow  # trains a compare grid of RecurrentPPO and MemoryPPO
def test_compare_runs_it_beside_memory_ppo(tmp_path: Path) -> None:
    base = {k: v for k, v in LSTM_RUN.items() if k not in ("algo", "recurrent_ppo", "name")}
    grid = {
        "name": "learners",
        "base": {**base, "budget": 64, "policy": {"backbone": "lstm"}},
        "seeds": [0],
        "axes": {
            "learner": {
                "memory_ppo": {"algo": "ppo", "ppo": tiny()["ppo"]},
                "recurrent_ppo": {
                    "algo": "recurrent_ppo",
                    "recurrent_ppo": LSTM_RUN["recurrent_ppo"],
                },
            }
        },
        "workers": 2,
    }
    (tmp_path / "grid.yaml").write_text(yaml.safe_dump(grid))
    config = load_compare_config(tmp_path / "grid.yaml")
    variants, outcomes = compare(config, tmp_path / "out", echo=lambda _: None)
    assert [o["status"] for o in outcomes] == ["finished", "finished"]
    assert {v.variant for v in variants} == {"memory_ppo", "recurrent_ppo"}
    assert all(v.row()["finished"] == 1 for v in variants)


class _CountingEnv(gym.Env):
    """Observes a few counters as MultiDiscrete (alone or in a Dict); ends after 6 steps."""

    action_space = gym.spaces.Discrete(2)

    def __init__(self, dict_observation: bool) -> None:
        counters = gym.spaces.MultiDiscrete([3, 4])
        self.observation_space = (
            gym.spaces.Dict({"counters": counters, "flag": gym.spaces.Discrete(2)})
            if dict_observation
            else counters
        )
        self.t = 0

    def _observe(self) -> Any:
        return self.observation_space.sample()

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.observation_space.seed(seed)
        self.t = 0
        return self._observe(), {}

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict]:
        self.t += 1
        return self._observe(), float(action), self.t >= 6, False, {}


@pytest.mark.parametrize("dict_observation", [False, True])
def test_multidiscrete_observations_train_save_and_load(
    dict_observation: bool, tmp_path: Path
) -> None:
    """sb3-contrib's LSTM policy fails on a MultiDiscrete observation (the flattened width
    is a NumPy integer); txrl's RecurrentPPO trains on it, alone or in a Dict, and a saved
    model loads and predicts the same."""
    policy = "MultiInputLstmPolicy" if dict_observation else "MlpLstmPolicy"
    model = RecurrentPPO(policy, _CountingEnv(dict_observation), n_steps=16, batch_size=16,
                         policy_kwargs={"lstm_hidden_size": 8}, seed=0)  # fmt: skip
    assert model.policy.lstm_actor.input_size == 3 + 4 + (2 if dict_observation else 0)
    model.learn(32)
    model.save(tmp_path / "model.zip")
    loaded = RecurrentPPO.load(tmp_path / "model.zip")
    observation, _ = _CountingEnv(dict_observation).reset(seed=1)
    assert (
        model.predict(observation, deterministic=True)[0]
        == loaded.predict(observation, deterministic=True)[0]
    )
