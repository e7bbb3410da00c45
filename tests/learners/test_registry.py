"""The learner registry: one record per learner, read by config, training, zoo and txrl, and
one table of them, :data:`txrl.learners.LEARNERS`, which is all a new learner adds to."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
import re
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

import txrl
import txrl.envs  # registers the txrl/... tasks
from tests._runs import TINY
from txrl import cli
from txrl.config import ConfigError, TrainConfig
from txrl.learners import (
    LEARNERS,
    MemoryLearnerSettings,
    get_learner,
    learner_names,
    learners,
    register_learner,
)
from txrl.learners.ppo import MemoryPPOSettings
from txrl.learners.vmpo.settings import VMPOLossSettings, loss_settings
from txrl.run.algorithms import ALGORITHMS, algorithm_class, settings_kwargs
from txrl.zoo import zoo_learners


def test_registry_lists_the_builtin_learners_in_order() -> None:
    assert learner_names() == ["ppo", "vmpo", "recurrent_ppo"]
    assert all(name == learner.name for name, learner in LEARNERS.items())
    # the run layer's table of algorithms is the registry's, each class in its learner's folder
    assert list(ALGORITHMS) == learner_names()
    for name, cls in ALGORITHMS.items():
        assert cls.__module__ == f"txrl.learners.{name}.algorithm"
        assert get_learner(name).algorithm() is cls
        assert algorithm_class(name) is cls
    # and each algorithm is an attribute of txrl by its name
    assert all(getattr(txrl, cls.__name__) is cls for cls in ALGORITHMS.values())
    assert set(zoo_learners()) == {"memory_ppo", "vmpo"}
    with pytest.raises(ValueError, match="unknown learner 'dqn'; valid: ppo, vmpo"):
        get_learner("dqn")


#: The keyword arguments of an algorithm's constructor that are no learner settings: the run
#: wires them from the rest of the config (``policy``, ``env``, ``seed``, ``runtime``) or
#: they are SB3's plumbing.
WIRING = {"policy", "env", "tensorboard_log", "policy_kwargs", "verbose", "seed", "device"}
WIRING |= {"_init_setup_model"}  # SB3's load builds an algorithm without setting it up


def _defaults(settings: type) -> dict[str, object]:
    return {f.name: getattr(settings(), f.name) for f in dataclasses.fields(settings)}


@pytest.mark.parametrize("name", ["ppo", "vmpo"])
def test_a_memory_learners_constructor_is_derived_from_its_settings(name: str) -> None:
    """Every field of the settings is a keyword argument of the constructor, with the
    field's default, and nothing else is (but the run's wiring)."""
    parameters = inspect.signature(algorithm_class(name)).parameters
    settings = {n: p.default for n, p in parameters.items() if n not in WIRING}
    assert settings == _defaults(get_learner(name).settings)
    assert set(parameters) - set(settings) == WIRING


def test_recurrent_ppos_settings_have_sb3_contribs_defaults() -> None:
    """RecurrentPPO's constructor is sb3-contrib's: its settings name some of its arguments,
    with the same defaults."""
    parameters = inspect.signature(algorithm_class("recurrent_ppo")).parameters
    defaults = _defaults(get_learner("recurrent_ppo").settings)
    assert {n: parameters[n].default for n in defaults} == defaults


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
    assert config.learner_settings == defaults
    assert TrainConfig.from_dict(config.to_dict()) == config


@dataclasses.dataclass(frozen=True)
class ScaledAdvantagePPOSettings(MemoryPPOSettings):
    advantage_scale: float = 2.0
    """A setting added to MemoryPPO's: the factor of the advantages in its loss."""


def test_adding_a_setting_is_its_field_and_its_use() -> None:
    """A setting added to the settings dataclass is a keyword argument of the constructor,
    with its default, and an attribute of the algorithm: its field and its use are all a
    new setting writes (here, in a subclass; in MemoryPPOSettings and MemoryPPO alike)."""
    memory_ppo = ALGORITHMS["ppo"]

    class ScaledAdvantagePPO(memory_ppo):  # type: ignore[valid-type, misc]  # a class the registry returns
        settings_class = ScaledAdvantagePPOSettings

        def _loss(self, batch, *args):  # the use
            scaled = batch._replace(advantages=self.advantage_scale * batch.advantages)
            return super()._loss(scaled, *args)

    parameter = inspect.signature(ScaledAdvantagePPO).parameters["advantage_scale"]
    assert parameter.default == 2.0 and parameter.kind is parameter.KEYWORD_ONLY
    env = "txrl/TMazePassive-v0"
    tiny = dict(n_steps=4, batch_size=4, segment_length=4, policy_kwargs=TINY_POLICY)
    assert ScaledAdvantagePPO("MlpGTrXLPolicy", env, **tiny).advantage_scale == 2.0
    model = ScaledAdvantagePPO("MlpGTrXLPolicy", env, advantage_scale=0.5, **tiny)
    assert model.advantage_scale == 0.5 and model.n_steps == 4
    model.learn(8)
    with pytest.raises(
        TypeError,
        match=r"MemoryPPO\(\) got unexpected keyword argument\(s\) 'n_step'; its settings \(MemoryPPOSettings\): .*n_steps",
    ):
        memory_ppo("MlpGTrXLPolicy", env, n_step=4)


TINY_POLICY = {"n_layers": 1, "d_model": 8, "n_heads": 2, "memory_length": 4}


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
    kwargs = settings_kwargs(config.learner_settings)
    assert kwargs["aux_loss_coef"] == {"span_l1": 0.001} and kwargs["target_kl"] == 0.02
    assert kwargs["clip_range_vf"] == 0.3 and kwargs["normalize_advantage"] is False
    assert set(kwargs) | WIRING == set(inspect.signature(algorithm_class("ppo")).parameters)


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


def test_the_loss_settings_are_the_learners_and_its_loss_reads_them() -> None:
    """V-MPO's loss settings are declared once, in VMPOLossSettings, which the learner's
    settings extend; the loss, the multipliers and PopArt read them (the paper's constants
    are class constants there); a model saved before they took this name still loads."""
    settings = get_learner("vmpo").settings()
    assert isinstance(settings, VMPOLossSettings)
    assert loss_settings(settings) == VMPOLossSettings()
    assert {"epsilon_eta", "init_alpha", "value_loss_coef", "popart"} <= {
        f.name for f in dataclasses.fields(VMPOLossSettings)
    }
    assert not {"learning_rate", "target_update_period", "multiplier_floor"} & {
        f.name for f in dataclasses.fields(VMPOLossSettings)
    }


def test_loss_settings_pickled_under_their_earlier_name_load() -> None:
    """Saved V-MPO models pickled their loss settings as ``VMPOConfig``, with the paper's
    constants among its attributes."""
    from txrl.learners.vmpo import settings as vmpo_settings

    old = VMPOLossSettings(epsilon_eta=0.05)
    object.__setattr__(old, "top_k_fraction", 0.5)  # an attribute of each instance then
    VMPOLossSettings.__qualname__ = "VMPOConfig"  # the name pickle writes
    try:
        pickled = pickle.dumps(old)
    finally:
        VMPOLossSettings.__qualname__ = "VMPOLossSettings"
    assert b"VMPOConfig" in pickled and b"VMPOLossSettings" not in pickled
    loaded = pickle.loads(pickled)
    assert type(loaded) is VMPOLossSettings is vmpo_settings.VMPOConfig
    assert loaded == old and loaded.top_k_fraction == 0.5


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
                assert not inherited, f"{cls.__name__} re-declares {inherited}"
    memory = {f.name for f in dataclasses.fields(MemoryLearnerSettings)}
    assert {"check_finite", "cuda_graph", "aux_loss_coef", "stats_window_size"} <= memory
    for name in ("ppo", "vmpo"):
        assert issubclass(get_learner(name).settings, MemoryLearnerSettings)


def test_learners_are_listed_once() -> None:
    assert len({learner.name for learner in learners()}) == len(learners())


def test_a_record_holds_a_function_that_imports_its_algorithm() -> None:
    ppo = get_learner("ppo")
    expected = r"algorithm must be a function that returns the algorithm class"
    for wrong in ("txrl.learners.ppo.algorithm:MemoryPPO", ALGORITHMS["ppo"]):
        with pytest.raises(TypeError, match=expected):
            dataclasses.replace(ppo, algorithm=wrong)


def test_a_function_that_returns_no_algorithm_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(txrl.learners, "LEARNERS", dict(LEARNERS))  # undone after the test
    register_learner(
        dataclasses.replace(get_learner("ppo"), name="lost", algorithm=lambda: MemoryPPOSettings)
    )
    message = "learner 'lost': its algorithm function returned <class 'txrl.learners.ppo.settings.MemoryPPOSettings'>, which is no Stable-Baselines3 algorithm class"
    with pytest.raises(ConfigError, match=re.escape(message)):
        algorithm_class("lost")
    with pytest.raises(ConfigError, match=re.escape(message)):
        ALGORITHMS["lost"]
    with pytest.raises(ValueError, match="a learner named 'ppo' is already registered"):
        register_learner(dataclasses.replace(get_learner("ppo"), zoo_name=None))


#: A learner from outside txrl, as a package: its settings and record, torch-free, and its
#: algorithm, here MemoryPPO with another default (two passes over each rollout).
NEW_LEARNER = {
    "__init__.py": """
        from two_epoch_ppo.settings import LEARNER, TwoEpochPPOSettings
    """,
    "settings.py": '''
        from dataclasses import dataclass

        from txrl.learners import Learner, memory_policy
        from txrl.learners.ppo import MemoryPPOSettings


        @dataclass(frozen=True)
        class TwoEpochPPOSettings(MemoryPPOSettings):
            n_epochs: int = 2
            """Passes over each rollout."""


        def two_epoch_ppo():
            from two_epoch_ppo.algorithm import TwoEpochPPO

            return TwoEpochPPO


        LEARNER = Learner(
            name="two_epoch_ppo",
            settings=TwoEpochPPOSettings,
            algorithm=two_epoch_ppo,
            policy=memory_policy,
        )
    ''',
    "algorithm.py": """
        from two_epoch_ppo.settings import TwoEpochPPOSettings
        from txrl import MemoryPPO


        class TwoEpochPPO(MemoryPPO):
            settings_class = TwoEpochPPOSettings
    """,
}


def test_a_new_learner_is_its_package_and_one_row_of_the_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adding a learner changes nothing of txrl but the registry's table: its package, one
    ``register_learner`` call, and ``txrl train`` trains it from a config's ``algo``."""
    package = tmp_path / "packages" / "two_epoch_ppo"
    package.mkdir(parents=True)
    for name, text in NEW_LEARNER.items():
        (package / name).write_text(textwrap.dedent(text).lstrip())
    monkeypatch.syspath_prepend(str(package.parent))
    for name in [m for m in sys.modules if m.split(".")[0] == "two_epoch_ppo"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(txrl.learners, "LEARNERS", dict(LEARNERS))  # undone after the test

    from two_epoch_ppo import LEARNER  # torch-free: the settings and the record

    register_learner(LEARNER)  # the one row

    settings = {k: v for k, v in TINY["ppo"].items() if k != "n_epochs"}
    data = {k: v for k, v in TINY.items() if k != "ppo"}
    data |= {"algo": "two_epoch_ppo", "two_epoch_ppo": settings, "budget": 64}
    config_file = tmp_path / "two_epoch.yaml"
    config_file.write_text(yaml.safe_dump(data))
    run_dir = tmp_path / "run"
    assert cli.main(["train", str(config_file), "--run-dir", str(run_dir)]) == 0

    algorithm = ALGORITHMS["two_epoch_ppo"]
    assert algorithm.__module__ == "two_epoch_ppo.algorithm" and algorithm is algorithm_class(
        "two_epoch_ppo"
    )
    model = algorithm.load(run_dir / "checkpoints" / "final.zip")
    assert type(model) is algorithm and model.n_epochs == 2  # the learner's own default
    assert model.num_timesteps == 64  # two rollouts of 16 steps x 2 envs
    recorded = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert recorded["algo"] == "two_epoch_ppo" and recorded["two_epoch_ppo"]["n_epochs"] == 2
