"""The learner registry: one declaration per learner, read by config, training, zoo and txrl."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

import txrl
from txrl.config import ConfigError, TrainConfig
from txrl.learners import (
    WIRING_ARGUMENTS,
    MemoryLearnerSettings,
    get_learner,
    learner_names,
    learners,
    settings_disagreements,
)
from txrl.rl.vmpo_loss import VMPOConfig
from txrl.rl.vmpo_settings import VMPOLossSettings
from txrl.run.algorithms import ALGORITHMS, algorithm_class
from txrl.zoo import zoo_learners


def test_registry_lists_the_builtin_learners_in_order() -> None:
    assert learner_names()[:2] == ["ppo", "vmpo"]
    assert "recurrent_ppo" in learner_names()
    # every learner has its algorithm, and each algorithm is an attribute of txrl by its name
    assert list(ALGORITHMS) == learner_names()
    assert all(getattr(txrl, cls.__name__) is cls for cls in ALGORITHMS.values())
    assert set(zoo_learners()) == {"memory_ppo", "vmpo"}
    with pytest.raises(ValueError, match="unknown learner 'dqn'; valid: ppo, vmpo"):
        get_learner("dqn")


@pytest.mark.parametrize("name", learner_names())
def test_constructor_and_settings_agree(name: str) -> None:
    """Every constructor argument a user may set is a settings field with the same default."""
    assert settings_disagreements(get_learner(name).settings, algorithm_class(name)) == []


@pytest.mark.parametrize("name", learner_names())
def test_every_setting_is_documented_and_reachable_from_yaml(name: str) -> None:
    learner = get_learner(name)
    source = "".join(
        inspect.getsource(cls) for cls in learner.settings.__mro__ if dataclasses.is_dataclass(cls)
    )
    for field in dataclasses.fields(learner.settings):
        assert f"{field.name}: " in source and '"""' in source.split(f"{field.name}: ", 1)[1][:400]
    defaults = learner.settings()
    config = TrainConfig.from_dict({"algo": name, name: dataclasses.asdict(defaults)})
    assert config.learner == defaults
    assert TrainConfig.from_dict(config.to_dict()) == config


def test_a_disagreement_is_found() -> None:
    """The check fails when a constructor and its settings drift apart."""

    @dataclasses.dataclass(frozen=True)
    class Drifted:
        learning_rate: float = 1.0  # the constructor says 3e-4
        n_steps: int = 128
        extra: int = 0  # no such argument

    problems = settings_disagreements(Drifted, ALGORITHMS["ppo"])
    assert "learning_rate: constructor default 0.0003 != settings default 1.0" in problems
    assert "settings field extra is no constructor argument" in problems
    assert "constructor argument segment_length has no settings field" in problems


def test_new_settings_reach_the_learner_from_yaml() -> None:
    config = TrainConfig.from_dict(
        {
            "ppo": {
                "aux_loss_coef": {"span_l1": 0.001},
                "target_kl": 0.02,
                "clip_range_vf": 0.3,
                "normalize_advantage": False,
            }
        }
    )
    kwargs = get_learner("ppo").settings_kwargs(config.learner)
    assert kwargs["aux_loss_coef"] == {"span_l1": 0.001} and kwargs["target_kl"] == 0.02
    assert kwargs["clip_range_vf"] == 0.3 and kwargs["normalize_advantage"] is False
    assert set(kwargs) | WIRING_ARGUMENTS >= set(
        inspect.signature(algorithm_class("ppo").__init__).parameters
    ) - {"self"}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"algo": "vmpo", "vmpo": {"learning_rate": float("inf")}}, "vmpo.learning_rate must be"),
        (
            {"algo": "vmpo", "vmpo": {"target_update_period": 0}},
            "vmpo.target_update_period must be",
        ),
        ({"algo": "vmpo", "vmpo": {"popart": "yes"}}, "vmpo.popart must be true or false"),
        (
            {"ppo": {"aux_loss_coef": {"span_l1": -1}}},
            "ppo.aux_loss_coef must be a mapping of names to numbers >= 0",
        ),
        ({"algo": "recurrent_ppo", "recurrent_ppo": {"batch_size": 1}}, "batch_size must be"),
    ],
)
def test_bad_learner_settings_name_the_key(data: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        TrainConfig.from_dict(data)


def test_the_loss_config_takes_the_learner_defaults() -> None:
    """V-MPO's loss hyperparameters are declared once, in the loss's settings, which the
    learner's settings inherit and the loss's config extends."""
    assert issubclass(get_learner("vmpo").settings, VMPOLossSettings)
    assert issubclass(VMPOConfig, VMPOLossSettings)
    settings = get_learner("vmpo").settings()
    loss = VMPOConfig()
    shared = {f.name for f in dataclasses.fields(VMPOConfig)} & {
        f.name for f in dataclasses.fields(settings)
    }
    assert shared >= {"epsilon_eta", "init_alpha", "value_loss_coef", "popart"}
    assert {n: getattr(loss, n) for n in shared} == {n: getattr(settings, n) for n in shared}
    assert not {"learning_rate", "target_update_period"} & {
        f.name for f in dataclasses.fields(VMPOConfig)
    }


def test_each_setting_is_declared_once() -> None:
    """A field shared by several learners lives in one base dataclass: no settings class
    re-declares a field one of its bases has (each field has one docstring)."""
    classes = {
        cls
        for learner in learners()
        for cls in learner.settings.__mro__
        if dataclasses.is_dataclass(cls)
    }
    for cls in classes:
        own = set(inspect.get_annotations(cls))
        for base in cls.__mro__[1:]:
            if dataclasses.is_dataclass(base):
                inherited = own & set(inspect.get_annotations(base))
                # MemoryPPO widens ent_coef to take a lin_<x> schedule (its own docstring)
                assert inherited <= {"ent_coef"}, f"{cls.__name__} re-declares {inherited}"
    memory = {f.name for f in dataclasses.fields(MemoryLearnerSettings)}
    assert {"check_finite", "cuda_graph", "aux_loss_coef", "stats_window_size"} <= memory
    for name in ("ppo", "vmpo"):
        assert issubclass(get_learner(name).settings, MemoryLearnerSettings)


def test_the_loss_modules_do_not_import_the_learners() -> None:
    """txrl.rl sits below txrl.learners: the learners' settings read the losses', not back."""
    import ast
    from pathlib import Path

    import txrl.rl

    for path in Path(txrl.rl.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom | ast.Import):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                names += [alias.name for alias in node.names]
                assert not any(n.startswith("txrl.learners") for n in names), path.name


def test_learners_are_listed_once() -> None:
    assert len({learner.name for learner in learners()}) == len(learners())


def test_lin_rates_decay_linearly_to_zero_over_the_budget() -> None:
    """rl-baselines3-zoo's ``lin_<x>``: x at the start, 0 at the end of the budget."""
    import gymnasium as gym
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.utils import LinearSchedule
    from stable_baselines3.common.vec_env import DummyVecEnv

    import txrl.envs  # registers the tasks
    from tests._runs import TINY

    ppo = dict(TINY["ppo"], learning_rate="lin_1e-3", clip_range="lin_0.2")
    config = TrainConfig.from_dict(dict(TINY, ppo=ppo))
    kwargs = get_learner("ppo").settings_kwargs(config.learner)
    assert isinstance(kwargs["learning_rate"], LinearSchedule)
    assert kwargs["learning_rate"](0.25) == pytest.approx(2.5e-4)
    assert kwargs["clip_range"](0.5) == pytest.approx(0.1)

    rates: list[float] = []

    class Rates(BaseCallback):
        def _on_rollout_start(self) -> None:
            rates.append(self.model.policy.optimizer.param_groups[0]["lr"])

        def _on_step(self) -> bool:
            return True

    env = DummyVecEnv([lambda: gym.make("txrl/TMazePassive-v0", length=3)] * 2)
    model = txrl.MemoryPPO(
        "MlpGTrXLPolicy", env, policy_kwargs=config.policy.policy_kwargs(), **kwargs
    )
    model.learn(8 * 32, callback=Rates())  # 8 rollouts of 16 steps x 2 envs
    # before rollout k the previous update ran at progress 1 - k/8: 1e-3 * (1 - k/8)
    assert rates == pytest.approx([1e-3 * (1 - k / 8) for k in range(8)])


def test_a_lin_entropy_bonus_decays_in_memory_ppos_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ppo.ent_coef: lin_<x>``: the loss of each update gets x times the progress remaining."""
    import gymnasium as gym
    from stable_baselines3.common.vec_env import DummyVecEnv

    import txrl.envs  # registers the tasks
    import txrl.sb3.ppo as ppo_module
    from tests._runs import TINY

    config = TrainConfig.from_dict(dict(TINY, ppo=dict(TINY["ppo"], ent_coef="lin_0.1")))
    kwargs = get_learner("ppo").settings_kwargs(config.learner)
    coefficients: list[float] = []
    loss = ppo_module.ppo_loss

    def recording(**kw: object) -> object:
        coefficients.append(kw["ent_coef"])  # type: ignore[arg-type]
        return loss(**kw)  # type: ignore[arg-type]

    monkeypatch.setattr(ppo_module, "ppo_loss", recording)
    env = DummyVecEnv([lambda: gym.make("txrl/TMazePassive-v0", length=3)] * 2)
    model = txrl.MemoryPPO(
        "MlpGTrXLPolicy", env, policy_kwargs=config.policy.policy_kwargs(), **kwargs
    )
    model.learn(4 * 32)  # 4 rollouts of 16 steps x 2 envs
    per_update = sorted(set(coefficients), reverse=True)
    assert per_update == pytest.approx([0.1 * (1 - k / 4) for k in range(1, 5)])


def test_memory_ppos_update_settings_read_each_schedule_at_the_progress() -> None:
    """One typed, immutable PPOUpdate per ``train()``: clip ranges and the entropy bonus
    read from their schedules at the progress remaining, None for an unset value clip."""
    import gymnasium as gym
    from stable_baselines3.common.logger import Logger

    import txrl.envs  # registers the tasks
    from tests._runs import TINY
    from txrl.learners import schedule
    from txrl.sb3.ppo import PPOUpdate

    config = TrainConfig.from_dict(TINY)
    env = gym.make("txrl/TMazePassive-v0", length=3)

    def update(**kwargs: object) -> PPOUpdate:
        model = txrl.MemoryPPO(
            "MlpGTrXLPolicy", env, policy_kwargs=config.policy.policy_kwargs(), **kwargs
        )
        model.set_logger(Logger(folder=None, output_formats=[]))
        model._current_progress_remaining = 0.25
        return model._update_settings()

    scheduled = update(
        clip_range=schedule("lin_0.4"),
        clip_range_vf=schedule("lin_2"),
        ent_coef=schedule("lin_0.1"),
    )
    assert scheduled == pytest.approx(PPOUpdate(clip_range=0.1, clip_range_vf=0.5, ent_coef=0.025))
    assert isinstance(scheduled, PPOUpdate)
    assert update(clip_range=0.3, ent_coef=0.01) == PPOUpdate(0.3, None, 0.01)
    with pytest.raises(AttributeError):
        scheduled.ent_coef = 1.0  # type: ignore[misc]


def test_recurrent_ppo_takes_no_entropy_schedule() -> None:
    """sb3-contrib's RecurrentPPO wants a float: ``lin_`` is MemoryPPO's alone, and refused."""
    with pytest.raises(ConfigError, match=r"recurrent_ppo\.ent_coef must be a number >= 0, got"):
        TrainConfig.from_dict({"algo": "recurrent_ppo", "recurrent_ppo": {"ent_coef": "lin_0.1"}})


@pytest.mark.parametrize("bad", ["cos_1e-3", "lin_", "lin_0", "lin_-1e-3", "linear"])
def test_a_rate_that_is_neither_a_number_nor_lin_is_refused(bad: str) -> None:
    with pytest.raises(
        ConfigError,
        match=rf"ppo.learning_rate must be a number > 0 or a string lin_<number>, got '{bad}'",
    ):
        TrainConfig.from_dict({"ppo": {"learning_rate": bad}})
