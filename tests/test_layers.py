"""The layers of txrl (pyproject.toml's import contracts): no module imports from a layer above
its own or in a loop, imports inside functions included, and a config is read without torch."""

from __future__ import annotations

import ast
import copy
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import grimp
import pytest
from importlinter import api
from importlinter.contracts.acyclic_siblings import AcyclicSiblingsContract
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.contracts.layers import LayersContract

ROOT = Path(__file__).resolve().parents[1]
CONTRACT_TYPES = {
    "layers": LayersContract,
    "forbidden": ForbiddenContract,
    "acyclic_siblings": AcyclicSiblingsContract,
}


def _contracts() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    configuration = api.read_configuration(str(ROOT / "pyproject.toml"))
    return configuration["session_options"], configuration["contracts_options"]


def _kept(graph: grimp.ImportGraph) -> dict[str, bool]:
    """Contract id -> whether ``graph`` keeps it."""
    session, contracts = _contracts()
    kept = {}
    for options in contracts:
        contract = CONTRACT_TYPES[options["type"]](
            name=options["name"], session_options=session, contract_options=options
        )
        kept[options["id"]] = contract.check(copy.deepcopy(graph), verbose=False).kept
    return kept


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    # agents/ and envs/ as the checkout's top-level packages, as lint-imports reads them
    sys.path.insert(0, str(ROOT))
    try:
        return grimp.build_graph(
            *_contracts()[0]["root_packages"], include_external_packages=True, cache_dir=None
        )
    finally:
        sys.path.remove(str(ROOT))


def test_lint_imports_keeps_every_contract() -> None:
    """What CI runs: ``lint-imports`` with the contracts of pyproject.toml."""
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert command is not None, "lint-imports is not installed: pip install -e '.[test]'"
    done = subprocess.run(
        [command, "--no-cache", "--no-logo"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert f"Contracts: {len(_contracts()[1])} kept, 0 broken." in done.stdout


@pytest.mark.parametrize(
    ("importer", "imported", "broken"),
    [
        # an upward import across the layers of txrl: the config reaching the run layer
        ("txrl.config.sections", "txrl.run.train", "layers"),
        # the SB3 adapter reaching the learners whose algorithms subclass it
        ("txrl.sb3.algorithm", "txrl.learners", "layers"),
        ("txrl.sb3.policies", "txrl.learners.ppo.algorithm", "layers"),
        # an upward import inside the run layer: the checkpoint format reaching the callbacks
        ("txrl.run.checkpoint", "txrl.run.callbacks", "run-layers"),
        # a loop inside one package, which no layer order of txrl can see
        ("txrl.config.files", "txrl.config.grid", "no-loops"),
        # torch in the config, directly or through a module of the torch layers
        ("txrl.config.sections", "torch", "torch-free-config"),
        # a learner's settings, or the registry, reaching its torch modules
        ("txrl.learners.vmpo.settings", "txrl.learners.vmpo.loss", "torch-free-config"),
        ("txrl.learners", "txrl.learners.ppo.algorithm", "torch-free-config"),
        ("txrl.learners.recurrent_ppo", "sb3_contrib", "torch-free-config"),
        ("txrl.learners.record", "txrl.sb3.schedule", "torch-free-config"),
        ("txrl.policy_names", "torch", "torch-free-config"),
        # the papers' computation reaching the backbone families above it
        ("txrl.nn.blocks", "txrl.backbones.transformer_settings", "layers"),
        # a family's settings importing the papers' computation, or torch itself (a model
        # module is imported only inside a family's _model(): the contracts ignore that
        # import, and test_every_backbones_settings_are_built_without_torch runs them)
        ("txrl.backbones.shaw", "txrl.nn.attention", "torch-free-backbone-settings"),
        ("txrl.backbones.transformer_settings", "torch", "torch-free-backbone-settings"),
        # torch in the files a finished run is read from
        ("txrl.run.run_files", "torch", "torch-free-run-files"),
        # the tasks reaching txrl or torch
        ("envs.tmaze", "txrl.errors", "tasks-stand-alone"),
        ("envs.registration", "torch", "tasks-stand-alone"),
        # the recipe reaching the entry point that calls it, or defining a network
        ("agents.recipe", "txrl.run.train", "recipes-between-train-and-the-run-layer"),
        ("agents.recipe", "torch", "recipes-between-train-and-the-run-layer"),
    ],
)
def test_each_contract_breaks_on_what_it_forbids(
    graph: grimp.ImportGraph, importer: str, imported: str, broken: str
) -> None:
    assert all(_kept(graph).values())
    changed = copy.deepcopy(graph)
    changed.add_import(importer=importer, imported=imported)
    assert not _kept(changed)[broken]


def test_an_import_inside_a_function_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loops the contracts forbid include those that an import inside a function hides."""
    package = tmp_path / "looped"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("def up():\n    from looped import high\n\n    return high\n")
    (package / "high.py").write_text("from looped import low\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    looped = grimp.build_graph("looped", cache_dir=None)
    contract = AcyclicSiblingsContract(
        name="no loops", session_options={}, contract_options={"ancestors": ["looped"]}
    )
    assert not contract.check(looped, verbose=False).kept


def test_a_config_is_read_and_checked_without_torch() -> None:
    """Parsing every learner's config, checking its policy against the registries and
    planning a compare grid load neither torch nor Stable-Baselines3 nor txrl's torch layers
    (in a fresh interpreter, so that nothing imported by another test counts)."""
    script = """
import sys
from txrl.config import TrainConfig, check_learner, check_policy, load_compare_config
from txrl.learners import learner_names

for algo in learner_names():
    backbone = "lstm" if algo == "recurrent_ppo" else "gtrxl"
    config = TrainConfig.from_dict({"algo": algo, "policy": {"backbone": backbone}})
    policy, problems = check_policy(config.policy)
    assert not problems + check_learner(config, policy), problems
assert load_compare_config("configs/compare_tiny.yaml").variants()
heavy = ("torch", "stable_baselines3", "sb3_contrib", "txrl.nn", "txrl.sb3", "txrl.run")
learner_torch = ("algorithm", "loss", "multipliers", "popart")  # a learner's torch modules
print(sorted(
    m for m in sys.modules
    if any(m == h or m.startswith(h + ".") for h in heavy)
    or (m.startswith("txrl.learners.") and m.rsplit(".", 1)[1] in learner_torch)
))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]"


def test_every_backbones_settings_are_built_without_torch() -> None:
    """The registry, every family's settings and records, and a config's policy section
    checked against each backbone load no torch (in a fresh interpreter): only building a
    backbone imports its family's torch model."""
    script = """
import dataclasses, sys
import txrl.config
from txrl.backbones import backbone_config_class, backbone_names, get_backbone
from txrl.config import TrainConfig, check_policy

for name in backbone_names():
    settings = backbone_config_class(name)(input_dim=3)
    assert dataclasses.is_dataclass(settings), name
    get_backbone(name).implementation  # named, not imported
    policy, problems = check_policy(TrainConfig.from_dict({"policy": {"backbone": name}}).policy)
    assert not problems, (name, problems)
heavy = ("torch", "stable_baselines3", "sb3_contrib", "txrl.nn", "txrl.sb3")
loaded = [m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in heavy)]
print(sorted(loaded + [m for m in sys.modules if m.endswith(".model") and "txrl" in m]))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]"


def _imports_of(path: Path) -> set[str]:
    """The modules ``path`` imports by name (inside functions too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_only_the_entry_points_give_the_recipe_to_train() -> None:
    """The imports of ``txrl.agents`` and ``txrl.envs`` from txrl/, which the contracts cannot
    see (they resolve to ``txrl``): the recipe wires the run layer, so only the entry points
    above it import it (and hand it to ``txrl.run.train.train``); the tasks, which import
    nothing of txrl, are read by the run layer and above."""
    importers: dict[str, set[str]] = {"txrl.agents": set(), "txrl.envs": set()}
    for path in (ROOT / "txrl").rglob("*.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for name in _imports_of(path):
            for package, found in importers.items():
                if name == package or name.startswith(f"{package}."):
                    found.add(module)
    assert importers["txrl.agents"] == {"txrl.cli", "txrl.compare.backends"}
    layers = ("txrl.cli", "txrl.zoo", "txrl.compare", "txrl.inspect", "txrl.run")
    assert importers["txrl.envs"] and all(m.startswith(layers) for m in importers["txrl.envs"])
