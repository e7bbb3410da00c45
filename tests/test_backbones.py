"""The backbone registry (:mod:`txrl.backbones`): one declaration of each backbone's settings,
read without torch by the configs and with it by the policies; a backbone defined in this
module alone joins the registry, the configs, the policies and ``txrl compare``; and a new
family package joins them all through one row of the registry's table."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

import txrl.backbones
from txrl.backbones import (
    BackboneRecord,
    backbone_config_class,
    backbone_names,
    get_backbone,
    make_backbone,
    register_backbone,
    setting_names,
    shared_settings,
)
from txrl.config import PolicyConfig, TrainConfig, check_policy
from txrl.config.grid import CompareConfig
from txrl.errors import ConfigError
from txrl.run.preflight import resolve

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------- no torch


def test_parsing_every_shipped_config_imports_no_torch() -> None:
    """Every config of configs/ (not the rl-zoo3 hyperparameters) parses, and a compare
    config's every cell is checked, policy section included, without importing torch."""
    script = """
import sys
from pathlib import Path
import yaml
from txrl.config import load_compare_config, load_train_config
parsed = []
for path in sorted(Path("configs").glob("*.yaml")):
    data = yaml.safe_load(path.read_text())
    if "axes" in data or "seeds" in data:
        parsed.append((path.name, len(load_compare_config(path).variants())))
    else:
        parsed.append((path.name, load_train_config(path).policy.backbone))
loaded = sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))
assert not loaded, f"parsing imported {loaded[:5]}"
print(len(parsed))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    shipped = [p for p in (ROOT / "configs").glob("*.yaml")]
    assert int(done.stdout.split()[-1]) == len(shipped) > 10


# ---------------------------------------------------------------------------- one list


def test_policy_section_policy_keywords_and_records_agree() -> None:
    """The backbone settings the ``policy:`` section has as fields, those the memory policies
    take by name and those the records share are one list: a setting added in one place
    only fails here."""
    from txrl.sb3.policies import BACKBONE_KEYS, MemoryActorCriticPolicy

    shared = set(shared_settings())
    every_setting = {
        n for name in backbone_names() for n in setting_names(backbone_config_class(name))
    } - {"input_dim"}
    section_fields = {f.name for f in dataclasses.fields(PolicyConfig)}
    # the section's fields that name a backbone setting are exactly the shared ones
    assert section_fields & every_setting == shared
    assert set(PolicyConfig.BACKBONE_FIELDS) == shared
    assert set(BACKBONE_KEYS) == shared
    assert shared <= set(MemoryActorCriticPolicy.valid_kwargs())
    # and each record shares only settings it has
    for name in backbone_names():
        record = get_backbone(name)
        assert set(record.shared) <= set(setting_names(record.settings)), name


def test_each_family_holds_its_settings_and_its_model_in_one_package() -> None:
    """Every built-in record is a row of the registry's table, comes from its family's
    package (``txrl.backbones.<family>.BACKBONES``) and builds through that package's
    ``_model()``, the one function that imports its ``model`` module; the models build from
    the settings their family declares."""
    import importlib

    from txrl.backbones import BUILTIN_BACKBONES
    from txrl.backbones.rnn import model as rnn_model
    from txrl.backbones.trxl import model as trxl_model

    assert [r.name for r in BUILTIN_BACKBONES][:2] == ["gtrxl", "trxl_i"]  # the default first
    assert sorted(r.name for r in BUILTIN_BACKBONES) == backbone_names()
    for record in BUILTIN_BACKBONES:
        family = importlib.import_module(record.implementation.__module__)
        assert family.__name__.rsplit(".", 1)[0] == "txrl.backbones", record.name
        assert record.settings.__module__.startswith("txrl.backbones."), record.name
        assert record in family.BACKBONES
        # the record builds through its family's model module, which it imports
        assert callable(record.implementation) and callable(family._model), record.name
        assert family._model().__name__ == f"{family.__name__}.model", record.name
    assert trxl_model.GTrXLConfig is backbone_config_class("gtrxl")
    assert rnn_model.RNNConfig is backbone_config_class("lstm")


def test_a_record_builds_through_a_callable_not_a_name() -> None:
    with pytest.raises(TypeError, match=r"backbone 'named': its implementation must be a callable"):
        BackboneRecord("named", DecaySettings, "txrl.backbones.trxl.model:build_gtrxl")  # type: ignore[arg-type]  # the refused form


def test_a_record_sharing_a_setting_it_lacks_is_an_error() -> None:
    @dataclasses.dataclass(frozen=True)
    class Narrow:
        input_dim: int

    with pytest.raises(ValueError, match=r"shares d_model, which its settings Narrow lack"):
        BackboneRecord("narrow", Narrow, lambda settings: None, ("d_model",))


def test_unknown_backbone_and_setting_errors_name_the_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown backbone 'gtrx'; valid backbones: .*gtrxl"):
        make_backbone("gtrx", input_dim=3)
    with pytest.raises(ValueError, match=r"backbone 'lstm' has no setting 'gate'; valid settings"):
        make_backbone("lstm", input_dim=3, gate="gru")


# ---------------------------------------------------------------------------- a new backbone

NAME = "test_decay"


@dataclasses.dataclass(frozen=True)
class DecaySettings:
    """Settings of a minimal memory: an exponentially decaying trace of embedded inputs."""

    input_dim: int
    d_model: int = 8
    decay: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 <= self.decay < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {self.decay!r}")


class DecayState(NamedTuple):
    h: object  # (B, D)


def build_decay(settings: DecaySettings):  # -> Backbone
    """h_t = decay * h_{t-1} (zero at an episode start) + tanh(W x_t); output h_t."""
    import torch
    from torch import nn

    from txrl.nn import Backbone, BackboneOutput

    class DecayMemory(Backbone):
        def __init__(self) -> None:
            super().__init__()
            self.input_dim, self.output_dim = settings.input_dim, settings.d_model
            self.embed = nn.Linear(settings.input_dim, settings.d_model)

        def initial_state(self, batch_size, device=None) -> DecayState:
            return DecayState(
                torch.zeros(batch_size, self.output_dim, **self.state_placement(device))
            )

        def run(
            self, x, state, episode_starts, *, trace=False, stats=False, next_state=True
        ) -> BackboneOutput:
            self.check_inputs(x, state, episode_starts)
            h, outputs, before = state.h, [], []
            for t in range(x.shape[0]):
                before.append(h)
                keep = (~episode_starts[t]).to(x.dtype)[:, None]
                h = settings.decay * keep * h + torch.tanh(self.embed(x[t]))
                outputs.append(h)
            steps = DecayState(torch.stack(before).detach()) if trace else None
            after = DecayState(h.detach()) if next_state else None
            return BackboneOutput(torch.stack(outputs), after, steps, {}, {})

    return DecayMemory()


@pytest.fixture
def decay_backbone() -> Iterator[str]:
    """The backbone above, registered for one test (and taken out of the registry after)."""
    register_backbone(NAME, DecaySettings, build_decay)
    try:
        yield NAME
    finally:
        txrl.backbones._REGISTRY.pop(NAME)


def test_a_registered_backbone_builds_and_shares_its_common_settings(decay_backbone) -> None:
    import torch

    assert decay_backbone in backbone_names()
    assert get_backbone(decay_backbone).shared == ("d_model",)  # d_model: a policy field
    module = make_backbone(decay_backbone, input_dim=3, d_model=4, decay=0.25)
    x, starts = torch.ones(5, 2, 3), torch.zeros(5, 2, dtype=torch.bool)
    y, _ = module(x, module.initial_state(2), starts)
    assert y.shape == (5, 2, 4)
    with pytest.raises(
        ValueError, match=r"has no setting 'gate'; valid settings: input_dim, d_model, decay"
    ):
        make_backbone(decay_backbone, input_dim=3, gate="gru")
    with pytest.raises(ValueError, match="already registered"):
        register_backbone(decay_backbone, DecaySettings, build_decay)


def test_a_registered_backbone_joins_the_config(decay_backbone) -> None:
    config = TrainConfig.from_dict(
        {
            "policy": {"backbone": decay_backbone, "d_model": 4, "backbone_kwargs": {"decay": 0.3}},
            "env": {"id": "txrl/TMazePassive-v0", "kwargs": {"length": 3}, "n_envs": 2},
            "ppo": {"n_steps": 16, "batch_size": 32, "segment_length": 8},
        }
    )
    resolved = resolve(config)
    assert resolved.policy.backbone_settings() == {"d_model": 4, "decay": 0.3}
    # what it lacks is named with its settings, or dropped on request
    gated = dataclasses.replace(config.policy, gate="gru", n_heads=2)
    _, problems = check_policy(gated)
    assert problems == [
        f"policy.{key} does not apply to backbone {NAME!r}; its settings: d_model, decay"
        for key in ("gate", "n_heads")
    ]
    dropped, problems = check_policy(dataclasses.replace(gated, inapplicable="drop"))
    assert problems == [] and dropped.gate is None and dropped.n_heads is None
    bad = dataclasses.replace(
        config, policy=dataclasses.replace(config.policy, backbone_kwargs={"decay": 2.0})
    )
    with pytest.raises(ConfigError, match=r"decay must be in \[0, 1\), got 2.0"):
        resolve(bad)


def test_a_registered_backbone_trains_in_memory_ppo(decay_backbone, tmp_path: Path) -> None:
    from stable_baselines3.common.vec_env import DummyVecEnv

    from txrl import MemoryPPO
    from txrl.envs import make_env_fn

    env = DummyVecEnv([make_env_fn("txrl/TMazePassive-v0", length=3)] * 2)
    model = MemoryPPO(
        "MlpMemoryPolicy",
        env,
        policy_kwargs={"backbone": decay_backbone, "d_model": 8, "backbone_kwargs": {"decay": 0.4}},
        n_steps=32,
        batch_size=32,
        segment_length=8,
        n_epochs=1,
        seed=0,
    )
    before = [p.detach().clone() for p in model.policy.backbone.parameters()]
    model.learn(256)
    assert model.num_timesteps >= 256
    assert any(
        not (a == b.detach()).all()
        for a, b in zip(before, model.policy.backbone.parameters(), strict=True)
    )
    model.save(tmp_path / "decay.zip")
    loaded = MemoryPPO.load(tmp_path / "decay.zip")
    assert loaded.policy.backbone_name == decay_backbone
    assert loaded.policy.backbone_settings == {"d_model": 8, "decay": 0.4}


def test_a_registered_backbone_joins_a_compare_grid(decay_backbone, tmp_path: Path) -> None:
    from txrl.compare.plan import plan

    grid = CompareConfig(
        name="decay",
        base={
            "budget": 64,
            "env": {"id": "txrl/TMazePassive-v0", "kwargs": {"length": 3}, "n_envs": 2},
            "ppo": {"n_steps": 16, "batch_size": 32, "segment_length": 8},
        },
        seeds=(0, 1),
        axes={
            "memory": {
                "decay": {"policy.backbone": decay_backbone, "policy.d_model": 4},
                "lstm": {"policy.backbone": "lstm", "policy.d_model": 4},
            }
        },
    )
    specs = plan(grid, tmp_path)
    # each variant in the axis's order, each with both seeds
    assert [(s.variant, s.seed) for s in specs] == [
        (v, n) for v in ("decay", "lstm") for n in (0, 1)
    ]
    assert specs[0].config["policy"]["backbone"] == decay_backbone


def test_the_decorator_form_registers_a_factory() -> None:
    """``@register_backbone(name, settings)`` (as before the records) still registers."""
    import txrl

    name = "test_decay_decorated"
    try:
        decorated = txrl.register_backbone(name, DecaySettings)(build_decay)
        assert decorated is build_decay
        assert get_backbone(name).implementation is build_decay
        assert make_backbone(name, input_dim=2).output_dim == 8
    finally:
        txrl.backbones._REGISTRY.pop(name, None)


# ---------------------------------------------------------------------------- a new family

FAMILY_SETTINGS = '''"""A family outside txrl laid out as the built-in ones: settings and records."""

import dataclasses

from txrl.backbones.record import BackboneRecord


@dataclasses.dataclass(frozen=True)
class EchoSettings:
    input_dim: int
    d_model: int = 8
    n_layers: int = 1


def _model():
    from echo_family import model

    return model


BACKBONES = (
    BackboneRecord("test_echo", EchoSettings, lambda s: _model().build_echo(s), ("d_model",)),
)
'''

FAMILY_MODEL = '''"""Its torch model: txrl.nn's pre-LayerNorm block over a window of one step (each
step attends to itself only), behind the backbone protocol."""

from typing import NamedTuple

import torch
from torch import nn

from txrl.nn.blocks import PreNormBlock
from txrl.nn.protocol import Backbone, BackboneOutput


class EchoState(NamedTuple):
    steps: torch.Tensor  # (B,) steps of the current episode, the only thing it remembers


class Echo(Backbone):
    def __init__(self, settings) -> None:
        super().__init__()
        self.input_dim, self.output_dim = settings.input_dim, settings.d_model
        self.embed = nn.Linear(settings.input_dim, settings.d_model)
        blocks = [
            PreNormBlock(_Width(settings.d_model), nn.Linear(settings.d_model, settings.d_model))
            for _ in range(settings.n_layers)
        ]
        self.blocks = nn.ModuleList(blocks)

    def initial_state(self, batch_size, device=None) -> EchoState:
        placement = self.state_placement(device)
        return EchoState(torch.zeros(batch_size, device=placement["device"], dtype=torch.long))

    def run(self, x, state, episode_starts, *, trace=False, stats=False, next_state=True):
        self.check_inputs(x, state, episode_starts)
        h = self.embed(x)
        for block in self.blocks:
            h = block(h, block.attention(block.attention_input(h)))
        steps, before = state.steps, []
        for t in range(x.shape[0]):
            steps = torch.where(episode_starts[t], 0, steps)
            before.append(steps)
            steps = steps + 1
        step_trace = EchoState(torch.stack(before)) if trace else None
        return BackboneOutput(h, EchoState(steps) if next_state else None, step_trace, {}, {})


class _Width:
    def __init__(self, d_model: int) -> None:
        self.d_model, self.ff_width, self.dropout = d_model, 2 * d_model, 0.0


def build_echo(settings) -> Echo:
    return Echo(settings)
'''


@pytest.fixture
def echo_family(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A family package written to ``tmp_path`` (settings and records in ``__init__.py``, its
    torch model in ``model.py``) and ONE row added to the registry's table: what a built-in
    family is, and what adding one to txrl touches."""
    import importlib

    package = tmp_path / "echo_family"
    package.mkdir()
    (package / "__init__.py").write_text(FAMILY_SETTINGS)
    (package / "model.py").write_text(FAMILY_MODEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    family = importlib.import_module("echo_family")
    table = (*txrl.backbones.BUILTIN_BACKBONES, *family.BACKBONES)  # the new row
    monkeypatch.setattr(txrl.backbones, "_REGISTRY", txrl.backbones._table(table))
    yield "test_echo"
    for module in ("echo_family.model", "echo_family"):
        sys.modules.pop(module, None)


def test_a_new_family_package_joins_through_one_row_of_the_table(echo_family: str) -> None:
    import torch
    from stable_baselines3.common.vec_env import DummyVecEnv

    from txrl import MemoryPPO
    from txrl.envs import make_env_fn

    # the registry builds it, and only then imports its model
    assert "echo_family.model" not in sys.modules
    module = make_backbone(echo_family, input_dim=3, d_model=4)
    assert "echo_family.model" in sys.modules
    y, state = module(torch.ones(5, 2, 3), module.initial_state(2), torch.zeros(5, 2, dtype=bool))
    assert y.shape == (5, 2, 4) and state.steps.tolist() == [5, 5]
    # the config's policy section checks it by name
    config = TrainConfig.from_dict({"policy": {"backbone": echo_family, "d_model": 4}})
    policy, problems = check_policy(config.policy)
    assert problems == [] and policy.backbone_settings() == {"d_model": 4}
    _, problems = check_policy(dataclasses.replace(config.policy, n_heads=2))
    assert problems == [
        f"policy.n_heads does not apply to backbone {echo_family!r}; its settings: d_model, "
        "n_layers"
    ]
    # and a memory policy trains it
    env = DummyVecEnv([make_env_fn("txrl/TMazePassive-v0", length=5)] * 2)
    model = MemoryPPO(
        "MlpMemoryPolicy",
        env,
        policy_kwargs={"backbone": echo_family, "d_model": 8},
        n_steps=16,
        batch_size=32,
        segment_length=8,
        n_epochs=1,
        seed=0,
    )
    model.learn(64)
    assert model.num_timesteps >= 64
    assert type(model.policy.backbone).__module__ == "echo_family.model"
