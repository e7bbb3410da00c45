"""The installed package: agents/ and envs/ only under the txrl namespace, and a checkout that
works after a regular (non-editable) ``pip install .`` as well as after an editable one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
#: What ``pip install .`` reads: the packages, the data mapped into them, the metadata.
SOURCE_DIRS = ("txrl", "envs", "agents", "configs")
SOURCE_FILES = ("pyproject.toml", "README.md")
#: Top-level directory -> the package it installs as (package-dir of pyproject.toml).
INSTALLED_AS = {"txrl": "txrl", "agents": "txrl/agents", "envs": "txrl/envs"}

pytestmark = pytest.mark.slow  # builds a wheel and installs it; runs Python in subprocesses


def _pip(*args: str, cwd: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", *args, "--no-deps", "--no-build-isolation", "-q"],
        check=True,
        cwd=cwd,
        capture_output=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A copy of the source tree, its wheel, and a regular (non-editable) install of that
    wheel: (checkout, wheel, site). Built in the copy, so nothing is written to the repository."""
    base = tmp_path_factory.mktemp("install")
    checkout, site = base / "checkout", base / "site"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for name in SOURCE_DIRS:
        shutil.copytree(ROOT / name, checkout / name, ignore=ignore)
    for name in SOURCE_FILES:
        shutil.copy2(ROOT / name, checkout / name)
    _pip("wheel", "-w", str(base), ".", cwd=checkout)
    (wheel,) = base.glob("txrl-*.whl")
    _pip("install", "--target", str(site), str(wheel), cwd=base)
    return checkout, wheel, site


def test_wheel_has_no_top_level_agents_or_envs(installed: tuple[Path, Path, Path]) -> None:
    checkout, wheel, _ = installed
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names}
    assert top_level <= {"txrl", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}
    assert "txrl/envs/__init__.py" in names
    assert "txrl/agents/__init__.py" in names
    assert "txrl/backbones/trxl/model.py" in names
    # pyproject.toml lists the packages by hand: each package of the source tree must ship.
    for top, package in INSTALLED_AS.items():
        for init in (checkout / top).rglob("__init__.py"):
            if "__pycache__" not in init.parts:
                name = f"{package}/{init.relative_to(checkout / top).as_posix()}"
                assert name in names, f"{name} is not in the wheel: add its package to pyproject"
    zoo_configs = sorted(p.name for p in (checkout / "configs" / "zoo").glob("*.yml"))
    assert zoo_configs and all(f"txrl/zoo_configs/{n}" in names for n in zoo_configs)


def _python(
    *args: str, cwd: Path, pythonpath: list[Path | str], isolated: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run ``python [-S] args`` in ``cwd`` with ``PYTHONPATH=pythonpath``; it must succeed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, pythonpath))}
    command = [sys.executable, *(["-S"] if isolated else []), *args]
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


#: Where txrl.envs and txrl.agents come from, and that nothing else of the tree joins txrl.
WHERE = """
import importlib.util, txrl, txrl.envs, txrl.agents
print(txrl.envs.__file__, txrl.agents.__file__)
print(*(importlib.util.find_spec(f"txrl.{name}") for name in ("tests", "configs")))
"""


def _where(out: subprocess.CompletedProcess[str]) -> list[str]:
    lines = out.stdout.splitlines()
    assert lines[-1] == "None None", "only envs and agents may join txrl"
    return lines[-2].split()


def test_checkout_root_works_after_a_regular_install(installed: tuple[Path, Path, Path]) -> None:
    checkout, _, site = installed
    tree = [str(checkout / "envs" / "__init__.py"), str(checkout / "agents" / "__init__.py")]
    # -S: no .pth files, so the editable install of this repository (a finder that a .pth
    # adds) is not there to help; the dependencies come from the interpreter's own
    # site-packages on PYTHONPATH. The checkout root is first on sys.path, as for any
    # command started there, so `txrl` is the checkout's txrl/, without envs/ or agents/.
    pythonpath: list[Path | str] = [site, sysconfig.get_paths()["purelib"]]
    run = {"cwd": checkout, "pythonpath": pythonpath, "isolated": True}
    assert _where(_python("-c", WHERE, **run)) == tree  # type: ignore[arg-type]
    assert "usage: txrl" in _python("-m", "txrl", "--help", **run).stdout  # type: ignore[arg-type]
    zoo_usage = _python("-m", "txrl.zoo", "--help", **run).stdout  # type: ignore[arg-type]
    assert "usage: python -m txrl.zoo" in zoo_usage

    # With the .pth files: the editable install's finder maps txrl.envs to this repository,
    # yet a command in another checkout gets that checkout's tasks.
    assert _where(_python("-c", WHERE, cwd=checkout, pythonpath=[])) == tree
    # Outside a checkout, the installed package.
    outside = _where(_python("-c", WHERE, cwd=site.parent, pythonpath=[site]))
    assert outside == [str(site / "txrl" / "envs" / "__init__.py"),
                       str(site / "txrl" / "agents" / "__init__.py")]  # fmt: skip


ZOO = """
import runpy, sys
task = ["--algo", "memory_ppo", "--env", "txrl/TMazePassive-v0", "-f", "logs"]
small = ["--hyperparams", "n_envs:2", "n_steps:16", "batch_size:32", "n_epochs:1"]
# python -m txrl.zoo train ...; python -m txrl.zoo enjoy ... (one interpreter: torch loads once)
for argv in (["train", *task, "-n", "64", "--eval-freq", "-1", *small],
             ["enjoy", *task, "--no-render", "-n", "30"]):
    sys.argv = ["txrl.zoo", *argv]
    try:
        runpy.run_module("txrl.zoo", run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        assert stop.code == 0, (argv[0], stop.code)
"""


def test_installed_zoo_trains_and_enjoys_with_its_packaged_hyperparameters(
    installed: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    _, _, site = installed
    out = _python("-c", ZOO, cwd=tmp_path, pythonpath=[site])  # outside a checkout
    (args_file,) = tmp_path.glob("logs/memory_ppo/txrl-TMazePassive-v0_1/*/args.yml")
    args = dict(yaml.unsafe_load(args_file.read_text()))
    assert Path(args["conf_file"]) == site / "txrl" / "zoo_configs" / "memory_ppo.yml"
    assert args["n_timesteps"] == 64
    assert "Loading logs/memory_ppo/txrl-TMazePassive-v0_1/txrl-TMazePassive-v0.zip" in out.stdout
    assert "Mean episode length" in out.stdout
