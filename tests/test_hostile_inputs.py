"""Hostile inputs: each bad input gets an error that names what is wrong and what is valid,
and nothing already written is damaged.

Every case runs next to a finished run (a copy of one made once per module) and the files it
was given; the test compares every file's bytes before and after.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
import yaml
from stable_baselines3.common.env_util import make_vec_env

import txrl.envs  # noqa: F401  # registers the txrl ids
from tests._runs import tiny
from txrl import MemoryPPO, cli
from txrl.config import CONFIG_FILE
from txrl.run.run_files import CHECKPOINT_DIR, FINAL_CHECKPOINT, FINISHED_RECORD

TINY = tiny(budget=64, eval={"every": 0, "episodes": 2, "n_envs": 2})


class SpacesEnv(gym.Env[Any, Any]):
    """A one-step env of any observation and action space (the spaces a learner may not take)."""

    def __init__(self, observation_space: gym.Space[Any], action_space: gym.Space[Any]) -> None:
        self.observation_space, self.action_space = observation_space, action_space

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action: Any) -> Any:
        return self.observation_space.sample(), 0.0, True, False, {}


BOX = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
SPACE_ENVS = {
    "txrl_test/GraphObs-v0": (gym.spaces.Graph(BOX, None), gym.spaces.Discrete(2)),
    "txrl_test/TextObs-v0": (gym.spaces.Text(8), gym.spaces.Discrete(2)),
    "txrl_test/MultiBinaryActions-v0": (BOX, gym.spaces.MultiBinary(3)),
}
for _id, (_obs, _act) in SPACE_ENVS.items():
    if _id not in gym.registry:
        gym.register(_id, SpacesEnv, kwargs={"observation_space": _obs, "action_space": _act})

#: A V-MPO config as small as TINY's PPO one.
TINY_VMPO = {
    **{k: v for k, v in TINY.items() if k != "ppo"},
    "algo": "vmpo",
    "vmpo": {"n_steps": 16, "batch_size": 32, "segment_length": 8},
}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("finished")
    (root / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    assert cli.main(["train", str(root / "tiny.yaml"), "--run-dir", str(root / "run")]) == 0
    return root / "run"


class Ctx:
    """Where a case runs: ``run`` (a finished run) and ``tmp`` (room for its input files)."""

    def __init__(self, tmp: Path, run: Path) -> None:
        self.tmp, self.run = tmp, run

    def config(self, text: str | dict[str, Any], name: str = "bad.yaml") -> str:
        path = self.tmp / name
        path.write_text(text if isinstance(text, str) else yaml.safe_dump(text))
        return str(path)

    def tiny(self, **changes: Any) -> str:
        return self.config({**TINY, **changes})

    def binary(self) -> str:
        path = self.tmp / "binary.yaml"
        path.write_bytes(bytes(range(256)))
        return str(path)

    def plain_model(self) -> str:
        """A model saved with SB3's ``model.save()``, not a txrl checkpoint."""
        path = self.tmp / "plain.zip"
        self.model().save(path)
        return str(path)

    def model(self) -> MemoryPPO:
        return MemoryPPO.load(self.run / CHECKPOINT_DIR / FINAL_CHECKPOINT)

    def truncated_checkpoint(self) -> str:
        data = (self.run / CHECKPOINT_DIR / FINAL_CHECKPOINT).read_bytes()
        path = self.tmp / "truncated.zip"
        path.write_bytes(data[: len(data) // 2])
        return str(path)


def resume(run: Path, *extra: str) -> Callable[[], Any]:
    return lambda: cli.main(["train", "--resume", str(run), *extra])


def without_checkpoints(ctx: Ctx, *, finished: bool = True) -> Path:
    """The finished run as a record copied without its checkpoints (and, unless
    ``finished``, without its finished.json: a run whose checkpoints were lost)."""
    shutil.rmtree(ctx.run / CHECKPOINT_DIR)
    if not finished:
        (ctx.run / FINISHED_RECORD).unlink()
    return ctx.run


def edited_config(ctx: Ctx, section: str, key: str, value: Any) -> Path:
    """The finished run with one key of its config.yaml edited by hand."""
    path = ctx.run / CONFIG_FILE
    data = yaml.safe_load(path.read_text())
    data[section][key] = value
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return ctx.run


def train(ctx: Ctx, path: str, *extra: str) -> Callable[[], Any]:
    return lambda: cli.main(["train", path, "--run-dir", str(ctx.tmp / "new_run"), *extra])


def tmaze_env() -> Any:
    return make_vec_env("txrl/TMazePassive-v0", n_envs=2, env_kwargs={"length": 3})


def predict_with(ctx: Ctx, change: Callable[[tuple[np.ndarray, ...]], Any]) -> Callable[[], Any]:
    model = ctx.model()
    obs = tmaze_env().reset()
    _, state = model.predict(obs, episode_start=np.ones(2, dtype=bool))
    return lambda: model.predict(obs, state=change(state), episode_start=np.zeros(2, dtype=bool))


def policy_kwargs(**kwargs: Any) -> Callable[[], Any]:
    return lambda: MemoryPPO("MlpMemoryPolicy", tmaze_env(), policy_kwargs=kwargs)


# (id, what the case does given a Ctx, fragments its error must contain)
CASES: list[tuple[str, Callable[[Ctx], Callable[[], Any]], list[str]]] = [
    # ---- config files
    ("empty yaml", lambda c: train(c, c.config("")), ["holds no settings", "quickstart.yaml"]),
    ("yaml list", lambda c: train(c, c.config("- 1\n")), ["must hold a mapping of settings"]),
    ("broken yaml", lambda c: train(c, c.config("budget: [1,\n")), ["is not valid YAML"]),
    ("missing file", lambda c: train(c, str(c.tmp / "nope.yaml")), ["cannot read config"]),
    (
        "binary config file",
        lambda c: train(c, c.binary()),
        ["binary.yaml is not a text file", "not UTF-8", "a config is a YAML text file"],
    ),
    (
        "a key given twice",
        lambda c: train(c, c.config(yaml.safe_dump(TINY) + "seed: 3\nbudget: 32\n")),
        ["key 'budget' appears twice in one mapping (line 1 and line ", "keep one of them"],
    ),
    (
        "a nested key given twice",
        lambda c: train(c, c.config("budget: 64\nppo:\n  gamma: 0.9\n  gamma: 0.8\n")),
        ["key 'gamma' appears twice in one mapping (line 3 and line 4)"],
    ),
    (
        "a key given twice in --set",
        lambda c: train(c, c.tiny(), "--set", "env.kwargs={length: 3, length: 4}"),
        ["--set env.kwargs: key 'length' appears twice"],
    ),
    (
        "memory_length 0 on a transformer",
        lambda c: train(c, c.tiny(policy={**TINY["policy"], "memory_length": 0})),
        ["policy.memory_length must be >= 1 for backbone 'gtrxl'", "got 0"],
    ),
    (
        "misspelt key",
        lambda c: train(c, c.tiny(ppo={"gama": 0.9})),
        ["unknown key ppo.gama", "did you mean 'gamma'", "valid keys of ppo"],
    ),
    (
        "gamma out of range",
        lambda c: train(c, c.tiny(ppo={"gamma": 1.5})),
        ["ppo.gamma must be a number in [0, 1]", "1.5"],
    ),
    (
        "unknown env",
        lambda c: train(c, c.tiny(env={"id": "txrl/TMaz-v0"})),
        ["env.id 'txrl/TMaz-v0' is not a registered", "txrl/TMaze-v0"],
    ),
    (
        "settings of another backbone",
        lambda c: train(c, c.tiny(policy={"backbone": "gru", "n_heads": 2})),
        ["policy.n_heads does not apply to backbone 'gru'", "its settings:", "inapplicable=drop"],
    ),
    (
        "batch larger than rollout",
        lambda c: train(c, c.tiny(ppo={"n_steps": 16, "batch_size": 64, "segment_length": 8})),
        ["ppo.batch_size (64) must be <= the rollout size", "= 32"],
    ),
    (
        "unknown device",
        lambda c: train(c, c.tiny(runtime={"device": "gpu"})),
        ["runtime.device must be cpu, auto, cuda, cuda:N or mps", "'gpu'"],
    ),
    # ---- command-line flags
    ("--set without =", lambda c: train(c, c.tiny(), "--set", "budget"), ["--set takes KEY=VALUE"]),
    (
        "--set into a value",
        lambda c: train(c, c.tiny(), "--set", "budget.x=1"),
        ["cannot set budget.x: budget is 64, not a section"],
    ),
    (
        "demo --steps 0",
        lambda c: lambda: cli.main(["demo", "--steps", "0"]),
        ["must be an integer >= 1"],
    ),
    (
        "demo --memory-length 0",
        lambda c: lambda: cli.main(["demo", "--memory-length", "0"]),
        ["--memory-length: must be an integer >= 1", "'0'"],
    ),
    (
        "demo unknown backbone",
        lambda c: lambda: cli.main(["demo", "--backbone", "nope"]),
        ["--backbone must be one of", "gtrxl"],
    ),
    (
        "eval --episodes -3",
        lambda c: lambda: cli.main(["eval", str(c.run), "--episodes", "-3"]),
        ["must be an integer >= 1", "'-3'"],
    ),
    (
        "eval --seed -1",
        lambda c: lambda: cli.main(["eval", str(c.run), "--seed", "-1"]),
        ["--seed: must be an integer >= 0, got '-1'"],
    ),
    (
        "inspect --seed -1",
        lambda c: lambda: cli.main(["inspect", str(c.run), "--seed", "-1"]),
        ["--seed: must be an integer >= 0, got '-1'"],
    ),
    (
        "resume nowhere",
        lambda c: lambda: cli.main(["train", "--resume", str(c.tmp / "nowhere")]),
        ["is not a txrl run directory (no config.yaml)"],
    ),
    (
        "resume changing the model",
        lambda c: lambda: cli.main(["train", "--resume", str(c.run), "--set", "policy.d_model=8"]),
        ["cannot change policy.d_model", "--resume takes --set for budget, eval.*"],
    ),
    (
        "resume a finished run with a smaller budget",
        lambda c: lambda: cli.main(["train", "--resume", str(c.run), "--set", "budget=32"]),
        ["already finished at step 64", "--set budget=N with N > 64"],
    ),
    (
        "resume a finished record copied without its checkpoints",
        lambda c: resume(without_checkpoints(c), "--set", "budget=2048"),
        [
            "has no checkpoint to resume from",
            "finished.json (step 64)",
            "nothing was changed",
            "--run-dir NEW_RUN_DIR",
        ],
    ),
    (
        "resume a finished record without checkpoints and without --set",
        lambda c: resume(without_checkpoints(c)),
        ["has no checkpoint to resume from", "config.yaml --run-dir NEW_RUN_DIR"],
    ),
    (
        "resume a run whose checkpoints were lost",
        lambda c: resume(without_checkpoints(c, finished=False)),
        ["has no checkpoint to resume from", "eval.jsonl (up to step 64)"],
    ),
    (
        "resume after config.yaml was edited (the model)",
        lambda c: resume(edited_config(c, "policy", "n_layers", 3), "--set", "budget=128"),
        [
            "config.yaml differs from its checkpoint final.zip in policy.n_layers",
            "(checkpoint: 1, config.yaml: 3)",
            "--resume may change only budget, eval.*",
        ],
    ),
    (
        "resume after config.yaml was edited (the env)",
        lambda c: resume(edited_config(c, "env", "kwargs", {"length": 20}), "--set", "budget=128"),
        ["in env.kwargs.length (checkpoint: 3, config.yaml: 20)"],
    ),
    # ---- policy_kwargs
    (
        "misspelt policy kwarg",
        lambda c: policy_kwargs(dmodel=16),
        ["unknown policy_kwargs 'dmodel'", "valid keys:", "d_model"],
    ),
    (
        "unknown backbone kwarg",
        lambda c: policy_kwargs(backbone="nope"),
        ["unknown backbone 'nope'", "valid backbones:", "gtrxl"],
    ),
    (
        "unknown gate",
        lambda c: policy_kwargs(gate="sigmoid"),
        ["unknown gate 'sigmoid'", "valid gates: input, output"],
    ),
    # ---- spaces
    (
        "tuple observation space",
        lambda c: lambda: MemoryPPO("MlpGTrXLPolicy", gym.make("Blackjack-v1")),
        ["unsupported observation space Tuple", "valid: Box", "FlattenObservation"],
    ),
    (
        "train on tuple observations",
        lambda c: train(c, c.tiny(env={"id": "Blackjack-v1", "n_envs": 2})),
        ["env Blackjack-v1 has observation space Tuple(", "supported: Box, Discrete", "Flatten"],
    ),
    (
        "train on graph observations",
        lambda c: train(c, c.tiny(env={"id": "txrl_test/GraphObs-v0", "n_envs": 2})),
        ["has observation space Graph(", "supported: Box, Discrete, MultiDiscrete, MultiBinary"],
    ),
    (
        "train on text observations",
        lambda c: train(c, c.tiny(env={"id": "txrl_test/TextObs-v0", "n_envs": 2})),
        ["has observation space Text(", "or a flat Dict of those"],
    ),
    (
        "vmpo on MultiBinary actions",
        lambda c: train(
            c, c.config({**TINY_VMPO, "env": {"id": "txrl_test/MultiBinaryActions-v0"}})
        ),
        ["action space MultiBinary(3), which algo vmpo does not train", "supported: Discrete, Box"],
    ),
    (
        "eval envs in another action space than training's",
        lambda c: train(
            c,
            c.tiny(
                env={"id": "txrl/popgym-CountRecall-v0", "kwargs": {"num_decks": 1}, "n_envs": 2},
                eval={**TINY["eval"], "env_kwargs": {"num_decks": 2}},
            ),
        ),
        [
            "eval.env_kwargs {'num_decks': 2} give the eval envs action space Discrete(53)",
            "training's is Discrete(27)",
        ],
    ),
    (
        "min_decks on Concentration",
        lambda c: train(
            c,
            c.tiny(
                env={
                    "id": "txrl/popgym-Concentration-v0",
                    "kwargs": {"num_decks": 2, "min_decks": 1},
                    "n_envs": 2,
                }
            ),
        ),
        ["min_decks cannot vary Concentration's decks", "families that take it: Autoencode"],
    ),
    (
        "a vector policy on Dict observations",
        lambda c: (
            lambda: MemoryPPO(
                "MlpGTrXLPolicy",
                make_vec_env(
                    lambda: SpacesEnv(gym.spaces.Dict({"x": BOX}), gym.spaces.Discrete(2))
                ),
            )
        ),
        [
            "policy MlpGTrXLPolicy encodes one observation array",
            "observation space is Dict(",
            "use MultiInputGTrXLPolicy",
        ],
    ),
    # ---- predict states
    (
        "predict on a NaN observation",
        lambda c: (
            lambda model: (
                lambda: model.predict(
                    np.full((2, 3), np.nan, dtype=np.float32), episode_start=np.ones(2, dtype=bool)
                )
            )
        )(c.model()),
        ["predict got a non-finite observation (NaN or inf) for env 0, 1", "check the env"],
    ),
    (
        "state of the wrong length",
        lambda c: predict_with(c, lambda s: s[:1]),
        ["state must be the tuple of", "returned by predict()", "length 1"],
    ),
    (
        "state for other envs",
        lambda c: predict_with(c, lambda s: tuple(a[:1] for a in s)),
        ["holds 1 envs but the observation batch has 2"],
    ),
    (
        "episode_start of the wrong length",
        lambda c: (
            lambda model, obs: lambda: model.predict(obs, episode_start=np.zeros(3, dtype=bool))
        )(c.model(), tmaze_env().reset()),
        ["episode_start has 3 entries", "observation batch has 2", "one flag per observation"],
    ),
    # ---- a model and an env that do not fit
    (
        "load into a mismatched env",
        lambda c: (
            lambda: MemoryPPO.load(
                c.run / CHECKPOINT_DIR / FINAL_CHECKPOINT, env=make_vec_env("CartPole-v1", n_envs=2)
            )
        ),
        ["Observation spaces do not match", "Box([-1. -1.  0.]"],
    ),
    # ---- truncated checkpoints
    (
        "eval a truncated checkpoint",
        lambda c: (lambda path: lambda: cli.main(["eval", path]))(c.truncated_checkpoint()),
        ["truncated.zip is not a readable txrl checkpoint", "need a checkpoint written by txrl"],
    ),
    (
        "eval a plain model.save() zip",
        lambda c: (lambda path: lambda: cli.main(["eval", path]))(c.plain_model()),
        ["plain.zip is a Stable-Baselines3 model saved with model.save()", "MemoryPPO.load"],
    ),
]


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize(("make", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_input_is_named_and_harmless(
    make: Callable[[Ctx], Callable[[], Any]],
    expected: list[str],
    finished_run: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    torch.manual_seed(0)
    ctx = Ctx(tmp_path, tmp_path / "run")
    shutil.copytree(finished_run, ctx.run)
    action = make(ctx)
    before = digest(tmp_path)
    capsys.readouterr()
    try:
        status = action()
    except SystemExit as e:
        assert e.code == 2
        message = capsys.readouterr().err
    except (ValueError, RuntimeError) as e:
        message = str(e)
    else:
        assert isinstance(status, int) and status != 0, "no error for a bad input"
        message = capsys.readouterr().err
    for fragment in expected:
        assert fragment in message, message
    assert digest(tmp_path) == before  # nothing written before was changed, nothing new


def test_loading_a_missing_file_names_it(tmp_path: Path) -> None:
    """SB3 names ``missing.zip.zip`` (the path with .zip added, tried second); the error
    names the path given and what a model file is."""
    missing = tmp_path / "missing.zip"
    with pytest.raises(FileNotFoundError) as error:
        MemoryPPO.load(missing)
    message = str(error.value)
    assert f"no model file {missing}" in message and "missing.zip.zip" not in message
    assert "model.save()" in message and "checkpoints/final.zip" in message
    with pytest.raises(FileNotFoundError, match=f"no model file {tmp_path / 'model'} "):
        MemoryPPO.load(str(tmp_path / "model"))
