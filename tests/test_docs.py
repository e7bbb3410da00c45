"""The documentation site builds strictly, its generated references cover the code, and every
Python example of the docs and the README runs.

``mkdocs build --strict`` turns every warning into a failure: a link to a page or anchor that
does not exist, a file the nav leaves out, an API reference mkdocstrings cannot resolve, a
snippet whose file is gone. The examples run with Sybil, one document at a time in a shared
namespace (a page reads top to bottom), in a temporary working directory.
"""

from __future__ import annotations

import dataclasses
import html
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import typing
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: Markdown files whose Python examples run: every page and the README.
EXAMPLE_FILES = sorted([ROOT / "README.md", *DOCS.rglob("*.md")])
#: Code fences the pages may use; Python under any other name would escape the examples test.
FENCE_LANGUAGES = {"python", "bash", "yaml", "text"}


def _docs_module(name: str) -> ModuleType:
    """``docs/<name>.py``, one of the site's hooks, loaded as a module."""
    spec = importlib.util.spec_from_file_location(f"txrl_docs_{name}", DOCS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _hooks() -> ModuleType:
    """``docs/hooks.py``, the generators of the config and CLI references."""
    return _docs_module("hooks")


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of ``config`` into ``site``, from the repository root (where
    the snippets' paths start)."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    command = [
        sys.executable,
        "-m",
        "mkdocs",
        "build",
        "--strict",
        "-f",
        str(config),
        "-d",
        str(site),
    ]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_the_site_builds_strictly_with_the_generated_pages(tmp_path: Path) -> None:
    result = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stderr[-5000:]
    config_page = (tmp_path / "site" / "reference" / "config" / "index.html").read_text()
    assert "ppo.n_epochs" in config_page and "policy.backbone_kwargs.compile_step" in config_page
    cli_page = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert "--aggregate-only" in cli_page
    api_page = (tmp_path / "site" / "api" / "nn" / "index.html").read_text()
    assert 'id="txrl.nn.MemoryState"' in api_page
    # classes show their constructor's signature, with types and defaults
    top = _text(tmp_path / "site" / "api" / "txrl" / "index.html")
    assert "MemoryPPO(policy: str | type[MemoryActorCriticPolicy], env:" in top
    settings = _text(tmp_path / "site" / "api" / "backbone-settings" / "index.html")
    assert "GTrXLConfig(input_dim: int, d_model: int = 128," in settings
    # txrl.envs installs from envs/ and has its API page under its installed name
    envs = _text(tmp_path / "site" / "api" / "envs" / "index.html")
    assert "TMazeEnv(length: int = 10, active: bool = True," in envs
    tasks = _text(tmp_path / "site" / "reference" / "tasks" / "index.html")
    assert "txrl/popgym-RepeatFirstHard-v0" in tasks
    # a study's picture is served from results/, as the study drew it
    # docstrings are Markdown: no reST role is left as literal text, and their references link
    api_pages = sorted((tmp_path / "site" / "api").rglob("*.html"))
    roles = re.compile(r":(class|func|meth|mod|data|attr|exc|obj|param [A-Za-z_]+):")
    leaked = {str(p): roles.findall(_text(p)) for p in api_pages if roles.search(_text(p))}
    assert not leaked, leaked
    assert 'class="autorefs autorefs-internal"' in api_page
    served = tmp_path / "site" / "figures" / "results" / "reach" / "reach.png"
    assert served.read_bytes() == (ROOT / "results" / "reach" / "reach.png").read_bytes()
    # a study's record is included from results/, not copied into docs/
    assert (
        "held-out seeds 80-82"
        in (tmp_path / "site" / "results" / "tmaze" / "index.html").read_text()
    )


def _text(page: Path) -> str:
    """A built page's text, tags dropped and whitespace joined (a signature spans many
    elements)."""
    text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))
    return " ".join(text.replace("( ", "(").split()).replace("( ", "(")


@pytest.mark.slow  # a second build of the site
def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    (tmp_path / "results").symlink_to(ROOT / "results")  # the studies' pictures
    page = tmp_path / "docs" / "concepts.md"
    page.write_text(page.read_text() + "\nSee [the missing page](no-such-page.md).\n")
    result = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0
    assert "no-such-page.md" in result.stderr


def test_the_readme_holds_the_command_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci.startswith("pip install torch==")
    readme = (ROOT / "README.md").read_text()
    assert f"```bash\n{ci}\n```" in readme
    assert len(readme.splitlines()) <= 200


def _yaml_keys(cls: type, prefix: str = "") -> list[str]:
    """Dotted YAML keys of dataclass ``cls``, sections expanded."""
    hints = typing.get_type_hints(cls)
    keys = []
    for f in dataclasses.fields(cls):
        if not f.init or not f.metadata.get("yaml", True):
            continue
        if dataclasses.is_dataclass(hints[f.name]):
            keys += _yaml_keys(hints[f.name], f"{prefix}{f.name}.")
        else:
            keys.append(f"{prefix}{f.name}")
    return keys


def test_the_config_reference_has_every_key_with_its_docstring() -> None:
    from txrl.config.grid import CompareConfig
    from txrl.config.sections import EvalConfig, TrainConfig
    from txrl.learners import learners

    hooks = _hooks()
    page = hooks.config_reference()
    keys = _yaml_keys(TrainConfig) + _yaml_keys(CompareConfig)
    keys += [f"{learner.name}.{k}" for learner in learners() for k in _yaml_keys(learner.settings)]
    absent = [key for key in keys if f"| `{key}` |" not in page]
    assert absent == []
    # each key's row carries the first words of its field docstring
    assert hooks.field_docs(EvalConfig)["stop_at"].startswith("End the run early")
    row = next(line for line in page.splitlines() if line.startswith("| `eval.stop_at` |"))
    assert "End the run early" in row and "a number or null" in row and "`null`" in row


@dataclasses.dataclass
class _Base:
    rate: float = 0.1
    """The base's rate."""
    kept: int = 1
    """Inherited as it is."""


@dataclasses.dataclass
class _Sub(_Base):
    rate: float = 0.2
    """The subclass's rate, documented anew."""


def test_a_redeclared_field_keeps_the_subclass_docstring() -> None:
    hooks = _hooks()
    assert hooks.field_docs(_Base)["rate"] == "The base's rate."
    assert hooks.field_docs(_Sub)["rate"] == "The subclass's rate, documented anew."
    # inherited fields keep the base class's docstring
    assert hooks.field_docs(_Sub)["kept"] == "Inherited as it is."


def test_the_backbone_settings_say_where_each_goes() -> None:
    from txrl.backbones import backbone_names

    page = _hooks().config_reference()
    assert all(f"### `{name}`" in page for name in backbone_names())
    assert "| `policy.gate` |" in page and "| `policy.backbone_kwargs.d_ff` |" in page


def test_the_cli_reference_has_every_option_of_every_command() -> None:
    import argparse

    from txrl.cli import build_parser

    page = _hooks().cli_reference()
    (commands,) = (a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in commands.choices.items():
        assert f"## `txrl {name}`" in page
        for action in sub._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}`" in page, (name, option)
    assert "%%" not in page


def _fences(text: str) -> list[str]:
    """The language of each fenced code block of ``text``."""
    return re.findall(r"^ *```(\S*)", text, flags=re.MULTILINE)[::2]


def test_every_code_fence_names_a_known_language() -> None:
    for path in EXAMPLE_FILES:
        languages = set(_fences(path.read_text()))
        assert languages <= FENCE_LANGUAGES, (path, languages - FENCE_LANGUAGES)


def _python_examples(path: Path) -> list[Any]:
    """Sybil's examples of ``path``: its ``python`` code blocks, in order."""
    from sybil import Sybil
    from sybil.parsers.markdown import PythonCodeBlockParser

    return list(Sybil(parsers=[PythonCodeBlockParser()]).parse(path).examples())


def test_every_python_block_is_collected_as_an_example() -> None:
    for path in EXAMPLE_FILES:
        assert len(_python_examples(path)) == _fences(path.read_text()).count("python"), path
    with_examples = [p for p in EXAMPLE_FILES if _python_examples(p)]
    assert ROOT / "README.md" in with_examples and len(with_examples) >= 6


@pytest.mark.slow  # trains tiny models
@pytest.mark.parametrize(
    "path",
    [p for p in EXAMPLE_FILES if "```python" in p.read_text()],
    ids=lambda p: p.relative_to(ROOT).as_posix(),
)
def test_python_examples(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # examples may save models
    for example in _python_examples(path):
        example.evaluate()


def test_the_gate_table_gives_each_gate_its_declared_bias() -> None:
    from txrl.backbones.trxl import GATES

    page = (DOCS / "backbones.md").read_text()
    rows = {
        match.group(1): match.group(2).strip()
        for match in re.finditer(r"^\| `(\w+)` \| .* \|([^|]*)\|$", page, flags=re.MULTILINE)
        if match.group(1) in GATES
    }
    assert set(rows) == set(GATES)
    for name, gate in GATES.items():
        if gate.default_bias is None:
            assert rows[name] == "-" or rows[name].startswith("none"), (name, rows[name])
        else:
            assert rows[name] == f"{gate.default_bias:g}", (name, rows[name])


def test_the_task_reference_lists_every_registered_id_and_no_other() -> None:
    import gymnasium as gym

    import txrl.envs  # noqa: F401  # registers the ids

    page = _docs_module("task_reference").task_reference()
    registered = {env_id for env_id in gym.registry if env_id.startswith("txrl/")}
    named = set(re.findall(r"`(txrl/[\w-]+)`", page))
    assert named == registered
    assert len([i for i in registered if i.startswith("txrl/popgym-")]) == 56
    # each task's arguments with their defaults, read from its constructor
    row = next(line for line in page.splitlines() if line.startswith("| `wrong_turn_penalty` |"))
    assert "`0.0`" in row and "wrong arm" in row
    assert "| `min_decks` |" in page and "`RepeatPrevious(num_decks=1, k=4)`" in page
    # what each POPGym preset fixes, read from its constructor
    assert "| `txrl/popgym-RepeatFirstHard-v0` | `num_decks=16` |" in page


def test_the_docstring_args_parser_reads_each_entry_whole() -> None:
    parse = _docs_module("task_reference").docstring_args

    def factory(a: int = 1, **kwargs: int) -> None:
        """Make it.

        Args:
            a: the first line
                and its continuation.
            **kwargs: the rest.

        Returns:
            nothing.
        """

    assert parse(factory) == {"a": "the first line and its continuation.", "**kwargs": "the rest."}


def test_every_backbone_has_an_entry_on_the_settings_page() -> None:
    from txrl.backbones import backbone_names, get_backbone

    page = _hooks().backbone_settings_page()
    for name in backbone_names():
        settings = get_backbone(name).settings
        assert f"::: {settings.__module__}.{settings.__qualname__}" in page, name
        assert f"`{name}`" in page


def test_the_metric_glossary_explains_every_key_the_code_logs() -> None:
    import torch

    from txrl.backbones import backbone_names

    from .nn.conftest import SMALL, small_backbone

    page = (DOCS / "metrics.md").read_text()
    # the keys the learners and the run record by name
    source = "\n".join(p.read_text() for p in (ROOT / "txrl").rglob("*.py"))
    logged = set(re.findall(r"\"((?:train|eval|rollout|time)/[a-z_]+)\"", source))
    assert "train/grad_norm" in logged
    absent = sorted(key for key in logged if f"`{key}`" not in page)
    assert absent == [], absent
    # the backbones' diagnostics, logged as memory/<key>
    starts = torch.zeros(6, 2, dtype=torch.bool)
    starts[0] = True
    for name in backbone_names():
        backbone = small_backbone(name)
        x = torch.randn(6, 2, SMALL["input_dim"])
        stats = backbone.run(x, backbone.initial_state(2), starts, stats=True).stats
        for key in stats:
            shown = "memory/" + re.sub(r"layer\d+", "layer<n>", key)
            assert f"`{shown}`" in page, (name, shown)


def test_the_metric_glossary_says_what_each_gate_activation_means() -> None:
    from txrl.backbones.trxl import GATES

    page = (DOCS / "metrics.md").read_text()
    for name, gate in GATES.items():
        row = next(line for line in page.splitlines() if line.startswith(f"| `{name}` |"))
        assert f"| {gate.one_means} | {gate.zero_means} |" in row, name


def _spaces_table() -> dict[tuple[str, str], dict[str, bool]]:
    """Getting started's table of spaces: (action|observation, space) -> learner -> taken."""
    page = (DOCS / "getting-started.md").read_text()
    header, *rows = (
        line
        for line in page.split("### The spaces each learner takes")[1].splitlines()
        if line.startswith("| ") and not line.startswith("|---")
    )
    learners = [re.sub(r"`| \(.*\)", "", cell).strip() for cell in header.split("|")[2:-1]]
    table = {}
    for row in rows:
        first, *cells = (cell.strip() for cell in row.split("|")[1:-1])
        kind, space = re.match(r"(action|observation) `(\w+)`", first).groups()  # type: ignore[union-attr]
        table[(kind, space)] = {
            learner: cell.startswith("yes") for learner, cell in zip(learners, cells, strict=True)
        }
    return table


@pytest.mark.slow  # builds a model for every learner and space
def test_the_spaces_table_says_what_each_learner_accepts() -> None:
    import gymnasium as gym
    import numpy as np
    from gymnasium import spaces

    import txrl

    class Env(gym.Env):
        def __init__(self, observation_space: spaces.Space, action_space: spaces.Space):
            self.observation_space, self.action_space = observation_space, action_space

        def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
            super().reset(seed=seed)
            return self.observation_space.sample(), {}

        def step(self, action: Any) -> Any:
            return self.observation_space.sample(), 0.0, True, False, {}

    vector = spaces.Box(-1, 1, (3,), np.float32)
    examples = {
        "Discrete": spaces.Discrete(3),
        "Box": vector,
        "MultiDiscrete": spaces.MultiDiscrete([2, 3]),
        "MultiBinary": spaces.MultiBinary(2),
        "Dict": spaces.Dict({"a": vector, "b": spaces.Discrete(2)}),
        "Tuple": spaces.Tuple((vector, spaces.Discrete(2))),
    }
    small = dict(n_layers=1, d_model=8, n_heads=2, memory_length=4)

    def builds(learner: str, observation: spaces.Space, action: spaces.Space) -> bool:
        env = Env(observation, action)
        prefix = "MultiInput" if isinstance(observation, spaces.Dict) else "Mlp"
        try:
            if learner == "RecurrentPPO":
                txrl.RecurrentPPO(f"{prefix}LstmPolicy", env, n_steps=8, batch_size=8)
            else:
                getattr(txrl, learner)(
                    f"{prefix}GTrXLPolicy",
                    env,
                    n_steps=8,
                    batch_size=8,
                    segment_length=4,
                    policy_kwargs=small,
                )
        except (ValueError, TypeError, NotImplementedError, AssertionError):
            return False
        return True

    table = _spaces_table()
    assert len(table) == 10
    for (kind, space), said in table.items():
        for learner, accepted in said.items():
            if kind == "action":
                built = builds(learner, vector, examples[space])
            else:
                built = builds(learner, examples[space], spaces.Discrete(2))
            assert built == accepted, (learner, kind, space)


def test_the_backbone_table_names_every_backbone() -> None:
    from txrl.backbones import backbone_names

    section = (DOCS / "backbones.md").read_text().split("## Every backbone")[1].split("\n## ")[0]
    named = set(
        re.findall(
            r"`(\w+)`",
            "\n".join(row.split("|")[1] for row in section.splitlines() if row.startswith("| `")),
        )
    )
    assert named == set(backbone_names())
