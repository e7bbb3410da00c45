"""Configs: strict checking with errors that name the key, overrides, files, compare grids."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from txrl import cli
from txrl.config import (
    CONFIG_FILE,
    CompareConfig,
    ConfigError,
    TrainConfig,
    apply_overrides,
    from_mapping,
    load_compare_config,
    load_train_config,
    parse_override,
    read_yaml,
)

ROOT = Path(__file__).resolve().parents[1]

# Each bad config, and what its error must say: the dotted key and the valid form.
BAD_CONFIGS: list[tuple[dict[str, Any], list[str]]] = [
    ({"ppo": {"gama": 0.9}}, ["unknown key ppo.gama", "did you mean 'gamma'", "valid keys of ppo"]),
    ({"polcy": {}}, ["unknown key polcy", "did you mean 'policy'"]),
    ({"ppo": {"gamma": 1.5}}, ["ppo.gamma must be a number in [0, 1]", "1.5"]),
    ({"ppo": {"learning_rate": 0}}, ["ppo.learning_rate must be a number > 0"]),
    ({"budget": "lots"}, ["budget must be an integer >= 1", "'lots'"]),
    ({"budget": True}, ["budget must be an integer >= 1"]),
    ({"seed": 1.5}, ["seed must be an integer >= 0"]),
    ({"env": {"n_envs": 0}}, ["env.n_envs must be an integer >= 1"]),
    ({"algo": "dqn"}, ["algo must be one of 'ppo', 'vmpo'", "'dqn'"]),
    ({"eval": 5}, ["eval must be a mapping with keys every, episodes"]),
    ({"eval": {"deterministic": "yes please"}}, ["eval.deterministic must be true or false"]),
    ({"policy": {"backbone": "gtrx"}}, ["policy.backbone must be one of", "gtrxl", "'gtrx'"]),
    (
        {"policy": {"backbone": "lstm", "gate": "gru"}},
        ["policy.gate does not apply to backbone 'lstm'"],
    ),
    ({"policy": {"gate": "sigmoid"}}, ["unknown gate 'sigmoid'", "valid gates: input, output"]),
    ({"policy": {"d_model": 30, "n_heads": 4}}, ["d_model (30) must be divisible by n_heads (4)"]),
    ({"policy": {"net_arch": "big"}}, ["policy.net_arch must be a list of integers >= 0"]),
    (
        {"env": {"id": "txrl/TMaz-v0"}},
        ["env.id 'txrl/TMaz-v0' is not a registered", "txrl/TMaze-v0"],
    ),
    ({"env": {"kwargs": {"length": 0}}}, ["env.kwargs", "length must be an integer >= 1"]),
    ({"vmpo": {"n_steps": 8}}, ["section vmpo: is for algo 'vmpo' but algo is 'ppo'"]),
    (
        {"env": {"n_envs": 1}, "ppo": {"n_steps": 8, "batch_size": 16}},
        ["ppo.batch_size (16) must be <="],
    ),
    ({"runtime": {"device": "gpu"}}, ["runtime.device must be cpu, auto, cuda"]),
    ({"ppo": {"n_steps": 48}}, ["ppo.n_steps (48) must be a multiple of ppo.segment_length (32)"]),
    (
        {"env": {"id": "txrl/MiniGrid-MemoryS7-v0"}, "policy": {"encoder_kwargs": {"poold": 1}}},
        ["policy.encoder_kwargs {'poold': 1} rejected by SymbolicGridExtractor", "pooled"],
    ),
    (
        {"eval": {"every": 0, "stop_at": 0.9}},
        ["eval.stop_at needs periodic evaluations", "eval.every is 0"],
    ),
    (
        {"policy": {"encoder_kwargs": {"features_dim": 8}}},
        ["rejected by FlattenExtractor", "its arguments: none"],
    ),
    (
        {"name": "../../escape_test"},
        ["name must be 1 to 200 bytes with no /, \\ or control characters", "'../../escape_test'"],
    ),
    ({"name": "x" * 300}, ["name must be 1 to 200 bytes", "'xxxxxxxx", "(300 bytes)"]),
    (  # sb3-contrib's RecurrentPPO would train without ever applying the loss
        {"algo": "recurrent_ppo", "policy": {"backbone": "lstm", "reconstruct_observation": True}},
        [
            "policy.reconstruct_observation applies to txrl's memory learners (ppo, vmpo",
            "algo recurrent_ppo has no such loss",
        ],
    ),
]


@pytest.mark.parametrize(("data", "expected"), BAD_CONFIGS, ids=[str(d) for d, _ in BAD_CONFIGS])
def test_bad_config_is_a_clear_error_and_starts_no_training(
    data: dict[str, Any], expected: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    run_dir = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", str(path), "--run-dir", str(run_dir)])
    assert exit_info.value.code == 2
    message = capsys.readouterr().err
    for fragment in expected:
        assert fragment in message
    assert not run_dir.exists()


def test_defaults_are_valid_and_round_trip() -> None:
    config = TrainConfig.from_dict({})
    assert config.algo == "ppo" and config.policy.backbone == "gtrxl"
    data = config.to_dict()
    assert "vmpo" not in data  # only the chosen learner's section
    assert TrainConfig.from_dict(yaml.safe_load(yaml.safe_dump(data))) == config


def test_yaml_number_quirks_are_accepted() -> None:
    # PyYAML reads 3e-4 (no dot) as a string and 1.0e5 as a float.
    config = TrainConfig.from_dict({"ppo": {"learning_rate": "3e-4"}, "budget": 1.0e5})
    assert config.learner_settings.learning_rate == pytest.approx(3e-4)
    assert config.budget == 100_000 and isinstance(config.budget, int)


def test_config_is_frozen() -> None:
    config = TrainConfig.from_dict({})
    with pytest.raises(AttributeError):
        config.budget = 5  # type: ignore[misc]


def test_policy_kwargs_pass_only_given_settings() -> None:
    config = TrainConfig.from_dict(
        {"policy": {"gate": "input", "d_model": 32, "n_heads": 2, "backbone_kwargs": {"d_ff": 64}}}
    )
    assert config.policy.policy_kwargs() == {
        "backbone": "gtrxl",
        "gate": "input",
        "d_model": 32,
        "n_heads": 2,
        "backbone_kwargs": {"d_ff": 64},
    }


def test_reconstruct_observation_reaches_the_policy_only_when_on() -> None:
    on = TrainConfig.from_dict({"policy": {"reconstruct_observation": True}})
    assert on.policy.policy_kwargs()["reconstruct_observation"] is True
    assert "reconstruct_observation" not in TrainConfig.from_dict({}).policy.policy_kwargs()
    with pytest.raises(ConfigError, match=r"policy\.reconstruct_observation must be true or false"):
        TrainConfig.from_dict({"policy": {"reconstruct_observation": "yes please"}})


def test_overrides() -> None:
    assert parse_override("ppo.learning_rate=1e-4") == ("ppo.learning_rate", "1e-4")
    assert parse_override("env.kwargs={length: 20}") == ("env.kwargs", {"length": 20})
    data = apply_overrides({"ppo": {"gamma": 0.9}}, ["ppo.gamma=0.95", "env.kwargs.length=7"])
    assert data == {"ppo": {"gamma": 0.95}, "env": {"kwargs": {"length": 7}}}
    for bad in ("ppo.gamma", "=3", "a..b=1"):
        with pytest.raises(ConfigError, match="KEY=VALUE"):
            parse_override(bad)
    with pytest.raises(ConfigError, match="budget is 5, not a section"):
        apply_overrides({"budget": 5}, ["budget.x=1"])


def test_load_train_config_applies_overrides_and_names_the_run(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text("budget: 1000\nenv: {kwargs: {length: 4}}\n")
    config = load_train_config(path, ["env.kwargs.length=6", "ppo.gamma=0.9"])
    assert (config.name, config.budget, config.env.kwargs, config.learner_settings.gamma) == (
        "exp",
        1000,
        {"length": 6},
        0.9,
    )
    with pytest.raises(ConfigError, match=r"ppo\.gamma must be"):
        load_train_config(path, ["ppo.gamma=2"])
    (tmp_path / "broken.yaml").write_text("budget: [1,\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_train_config(tmp_path / "broken.yaml")
    with pytest.raises(ConfigError, match="cannot read config"):
        load_train_config(tmp_path / "missing.yaml")


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "configs").glob("*.yaml")))
def test_shipped_configs_are_valid(name: str) -> None:
    path = ROOT / "configs" / name
    if "axes" in yaml.safe_load(path.read_text()):  # a grid for txrl compare
        assert load_compare_config(path).variants()
    else:
        load_train_config(path)


def test_configs_holds_what_a_user_runs_and_no_study() -> None:
    """configs/ holds the task recipes and example grids; a study's grid is kept once, beside
    its results, as ``results/<study>/compare.yaml``."""
    shipped = sorted(p.name for p in (ROOT / "configs").glob("*.y*ml"))
    assert "quickstart.yaml" in shipped
    assert [name for name in shipped if name.startswith("study_")] == []


def test_every_path_the_shipped_configs_name_exists() -> None:
    """A recipe's header names the results file its figure comes from; every path that the
    comments of configs/ name is in the repository."""
    pattern = re.compile(r"(?:configs|results)/[\w./-]*[\w/]")
    named = {m for p in (ROOT / "configs").rglob("*.y*ml") for m in pattern.findall(p.read_text())}
    assert "results/tmaze_long/heldout/README.md" in named
    assert sorted(name for name in named if not (ROOT / name).exists()) == []


def _study(folder: Path) -> Any:
    """``folder`` as a test parameter; Memory Gym's studies need memory-gym installed."""
    needs_memory_gym = "txrl/memorygym-" in (folder / "compare.yaml").read_text()
    missing = needs_memory_gym and importlib.util.find_spec("memory_gym") is None
    reason = "memory-gym is not installed (its study's envs cannot be built)"
    return pytest.param(
        folder.relative_to(ROOT).as_posix(), marks=pytest.mark.skipif(missing, reason=reason)
    )


@pytest.mark.parametrize(
    "study", [_study(p.parent) for p in sorted((ROOT / "results").rglob("compare.yaml"))]
)
def test_each_study_config_is_the_grid_of_its_committed_runs(study: str) -> None:
    """Planned into its own folder, ``results/<study>/compare.yaml`` finds every run committed
    there under the settings it was trained with (:func:`txrl.compare.plan` refuses a run
    directory that holds another config), so ``txrl compare results/<study>/compare.yaml``
    reruns or redraws that study."""
    from txrl.compare import plan

    folder = ROOT / study
    specs = plan(load_compare_config(folder / "compare.yaml"), folder)
    committed = {p.resolve() for p in folder.glob("runs/*/seed_*") if (p / CONFIG_FILE).exists()}
    assert committed <= {Path(spec.run_dir) for spec in specs}


def test_grid_expansion() -> None:
    config = from_mapping(
        CompareConfig,
        {
            "name": "grid",
            "base": {"budget": 64, "policy": {"d_model": 16, "n_heads": 2}},
            "seeds": [0, 1],
            "axes": {
                "memory": {
                    "gtrxl": {"policy.backbone": "gtrxl"},
                    "lstm": {"policy.backbone": "lstm", "policy.n_heads": None},
                },
                "env.kwargs.length": [3, 5],
            },
        },
    )
    variants = config.variants()
    assert [v.name for v in variants] == ["gtrxl__3", "gtrxl__5", "lstm__3", "lstm__5"]
    assert variants[3].labels == (("memory", "lstm"), ("env.kwargs.length", "5"))
    assert variants[3].config.policy.backbone == "lstm"
    assert variants[3].config.env.kwargs == {"length": 5}
    assert variants[0].config.budget == 64


def test_a_grid_variant_drops_the_base_learner_section_with_null() -> None:
    config = from_mapping(
        CompareConfig,
        {
            "name": "grid",
            "base": {"budget": 64, "ppo": {"n_steps": 64, "ent_coef": 0.001}},
            "seeds": [0],
            "axes": {
                "model": {
                    "gtrxl": {"policy.backbone": "gtrxl"},
                    "rppo": {
                        "algo": "recurrent_ppo",
                        "ppo": None,
                        "policy.backbone": "lstm",
                        "recurrent_ppo": {"n_steps": 64, "ent_coef": 0.001},
                    },
                }
            },
        },
    )
    gtrxl, rppo = config.variants()
    assert gtrxl.config.algo == "ppo" and gtrxl.config.learner_settings.ent_coef == 0.001
    assert rppo.config.algo == "recurrent_ppo" and rppo.config.learner_settings.n_steps == 64
    # null is absence only for another learner's section: a section given stays an error
    with pytest.raises(ConfigError, match="section ppo: is for algo 'ppo'"):
        TrainConfig.from_dict({"algo": "recurrent_ppo", "ppo": {"n_steps": 64}})
    assert TrainConfig.from_dict({"algo": "recurrent_ppo", "ppo": None}).algo == "recurrent_ppo"


def test_a_grid_variant_given_a_whole_section_updates_the_base_section() -> None:
    base = {"budget": 64, "env": {"id": "txrl/TMaze-v0", "n_envs": 4, "kwargs": {"length": 5}}}
    config = from_mapping(
        CompareConfig,
        {
            "name": "grid",
            "base": base,
            "seeds": [0],
            "axes": {
                "inputs": {
                    "pa": {"env": {"previous_action_reward": True}},
                    "plain": {"env": {"kwargs": {}}},
                }
            },
        },
    )
    pa, plain = (v.config.env for v in config.variants())
    # the base's id, n_envs and kwargs stay; only the key the variant names changes
    assert (pa.id, pa.n_envs, pa.kwargs, pa.previous_action_reward) == (
        "txrl/TMaze-v0",
        4,
        {"length": 5},
        True,
    )
    # a key inside the section is set as given: an empty kwargs mapping clears them
    assert (plain.id, plain.n_envs, plain.kwargs) == ("txrl/TMaze-v0", 4, {})


GATES = {"memory": {g: {"policy.gate": g} for g in ("gru", "output", "input")}}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"axes": {"policy.gate": []}}, "axes.policy.gate is an empty list"),
        ({"axes": {"policy.gate": "gru"}}, "must be a non-empty list of values"),
        ({"axes": {"s": {"a": {"seed": 3}}}}, "an axis cannot set seed"),
        (
            {"axes": {"m": {"x": {"policy.backbone": "lstm"}}}, "panels": "task"},
            "panels must name an axis",
        ),
        (
            {"axes": {"m": {"lstm": {"policy.backbone": "lstm", "policy.gate": "gru"}}}},
            "variant m=lstm: policy.gate",
        ),
        (
            {"axes": {"task": {"a": {"env": None}}}},
            "variant task=a: env: null resets the whole section env to the library's defaults",
        ),
        (
            {"axes": {"m": {"a": {"ppo": None}}}},
            "variant m=a: ppo: null resets the whole section ppo, the section of its algo ppo,",
        ),
        (
            {"axes": {"m": {"a": {"algo": "vmpo", "vmpo": None}}}},
            "variant m=a: vmpo: null resets the whole section vmpo",
        ),
        ({"seeds": [1, 1]}, "seeds must not repeat"),
        ({"seeds": []}, "seeds must be a non-empty list"),
        ({"metric": "reward"}, "metric must be one of 'success_rate', 'mean_return'"),
        (
            {"axes": GATES, "reference": {"scroes": {"gru": 1.0}}},
            "unknown key reference.scroes (did you mean 'scores'?); "
            "valid keys of reference: name, scores, axis, pairs",
        ),
        (
            {"axes": GATES, "reference": {"scores": {"gru": 3, "output": 2, "GRU": 1}}},
            "reference.scores names 'GRU', not labels of axis memory; valid: gru, output, input",
        ),
        (
            {"axes": GATES, "reference": {"scores": {"gru": 3, "output": 2}}},
            "reference.scores must score at least 3 labels of axis memory",
        ),
        (
            {"axes": GATES, "reference": {"scores": {"gru": "high"}}},
            "reference.scores.gru must be a number, got 'high'",
        ),
        (
            {"axes": GATES, "reference": {"scores": {"gru": 1}, "pairs": "all"}},
            "reference.pairs must be one of 'adjacent', 'best'",
        ),
        (
            {"axes": GATES, "reference": {"axis": "task", "scores": {"gru": 1}}},
            "reference.axis must name an axis other than panels (memory), got 'task'",
        ),
        (
            {"axes": {**GATES, "ppo.gamma": [0.9, 0.99]}, "reference": {"scores": {"gru": 1}}},
            "reference.axis must name the axis whose labels reference.scores names "
            "(axes besides panels: memory, ppo.gamma)",
        ),
        (
            {
                "axes": {**GATES, "ppo.gamma": [0.9, 0.99]},
                "reference": {"axis": "memory", "scores": {"gru": 1}},
            },
            "reference: the grid also varies ppo.gamma",
        ),
    ],
)
def test_bad_compare_configs(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=_escape(message)):
        from_mapping(CompareConfig, data).variants()


def test_reference_block_names_labels_of_one_axis() -> None:
    config = from_mapping(
        CompareConfig,
        {
            "axes": {**GATES, "task": {"a": {"env.kwargs": {"length": 3}}}},
            "panels": "task",
            "reference": {
                "name": "Table 1",
                "scores": {"gru": 117.6, "output": "112.8", "input": 51},
            },
        },
    )
    assert len(config.variants()) == 3
    assert config.reference.scores == {"gru": 117.6, "output": 112.8, "input": 51.0}
    assert config.reference.resolved_axis(list(config.axes), config.panels) == "memory"
    assert from_mapping(CompareConfig, {"reference": None}).reference.scores == {}


def test_compare_base_may_be_a_path(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text("budget: 77\n")
    (tmp_path / "grid.yaml").write_text(
        "base: base.yaml\nseeds: [0]\naxes: {ppo.gamma: [0.9, 0.99]}\n"
    )
    config = load_compare_config(tmp_path / "grid.yaml", ["base.budget=88"])
    assert config.name == "grid"
    assert [v.config.budget for v in config.variants()] == [88, 88]
    assert [v.name for v in config.variants()] == ["0.9", "0.99"]


def _escape(text: str) -> str:
    import re

    return re.escape(text)


def test_previous_action_reward_wraps_the_envs() -> None:
    from txrl.config import load_train_config
    from txrl.run.envs import make_train_env

    config = load_train_config(
        ROOT / "configs" / "quickstart.yaml",
        overrides=["env.previous_action_reward=true"],
    )
    env = make_train_env(config)
    assert env.observation_space.shape == (3 + 4 + 1,)


def test_a_long_name_is_refused_in_one_short_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 1 MB name is refused before anything is written, and the error quotes only its
    start: the message stays one short line."""
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump({"budget": 64}))
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", str(path), "--set", "name=" + "x" * 1_000_000])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "name must be 1 to 200 bytes" in err and "(1000000 bytes)" in err
    assert len(err) < 1000


#: 324 bytes: nine levels of nine aliases each, 9**9 (387 million) values once expanded.
ALIAS_BOMB = "a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n" + "".join(
    f"{b}: &{b} [{','.join(['*' + a] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi", strict=True)
)


def test_yaml_aliases_that_expand_past_a_limit_are_refused_at_once(tmp_path: Path) -> None:
    """An alias bomb (the 324-byte file of nine levels) would take the machine's memory once
    the config is copied; it is refused before, with the limit and how to write it instead."""
    assert len(ALIAS_BOMB.encode()) == 324
    path = tmp_path / "bomb.yaml"
    path.write_text(ALIAS_BOMB)
    with pytest.raises(ConfigError, match=r"aliases expand to more than 100,000 values"):
        load_train_config(path)
    # aliases of a sensible size stay valid
    path.write_text("defaults: &d {length: 5}\nenv: {kwargs: *d}\nbudget: 64\n")
    with pytest.raises(ConfigError, match="unknown key defaults"):
        load_train_config(path)
    assert read_yaml(path)["env"]["kwargs"] == {"length": 5}
    path.write_text("a: &a [*a]\n")
    with pytest.raises(ConfigError, match=r"refers to itself \(the anchor on line 1\)"):
        read_yaml(path)


@pytest.mark.parametrize("algo", ["ppo", "vmpo"])
@pytest.mark.parametrize(
    "section", [{"n_steps": 48}, {"batch_size": 80}, {"n_steps": 40, "batch_size": 60}]
)
def test_segment_checks_are_the_learners_own(algo: str, section: dict) -> None:
    """The config's whole-segment problems are the learner settings' own, named by section
    (the learner's constructor raises the same lines unprefixed: tests/sb3/test_common.py)."""
    from txrl.learners import get_learner

    data: dict[str, Any] = {"algo": algo, algo: section}
    if algo != "ppo":
        data["ppo"] = None
    with pytest.raises(ConfigError) as raised:
        TrainConfig.from_dict(data)
    settings = get_learner(algo).settings(**section)
    assert raised.value.problems == settings.problems(f"{algo}.")
    unprefixed = settings.problems()
    assert len(unprefixed) == len(section)
    assert [line.replace(f"{algo}.", "") for line in raised.value.problems] == unprefixed
