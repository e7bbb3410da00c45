"""rl-baselines3-zoo with txrl's learners and tasks: ``python -m txrl.zoo train|enjoy ...``.

rl-zoo3 fixes the choices of ``--algo`` from its ``ALGOS`` dict when its parser is built,
before ``--gym-packages`` imports anything, so a package cannot add an algorithm from the
command line. This entry point adds txrl's learners to ``ALGOS`` (each learner of
[`txrl.learners`][txrl.learners] with a ``zoo_name``: ``memory_ppo``, ``vmpo``, with its class from
[`txrl.run.algorithms.ALGORITHMS`][txrl.run.algorithms.ALGORITHMS]), imports [`txrl.envs`][txrl.envs] (which registers the
``txrl/...`` ids) and hands over to rl-zoo3's own ``train`` or ``enjoy`` with the remaining
arguments::

    python -m txrl.zoo train --algo memory_ppo --env txrl/TMazePassive-v0 -n 20000 -f logs
    python -m txrl.zoo enjoy --algo memory_ppo --env txrl/TMazePassive-v0 -f logs --no-render

Without ``--conf-file``, ``train`` reads the hyperparameters of txrl's learners from txrl's
own files (rl-zoo3's know nothing of txrl): ``configs/zoo/<algo>.yml`` of the repository,
installed as the package data ``txrl/zoo_configs/<algo>.yml`` (`hyperparameter_file`).
Most txrl tasks have no ``render_mode="human"``: give ``enjoy`` ``--no-render``. rl-zoo3 is
an optional extra, ``pip install 'txrl[zoo]'``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from txrl.learners import Learner, learners

#: ``configs/zoo`` of a source tree: where an editable install or a checkout finds the files,
#: since the package-dir mapping of pyproject.toml applies only to a built package.
SOURCE_ZOO_CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "zoo"
USAGE = "usage: python -m txrl.zoo {train,enjoy} --algo memory_ppo --env ENV_ID [rl-zoo3 options]"


def register() -> list[str]:
    """Add txrl's learners to rl-zoo3's ``ALGOS`` and register the txrl envs; returns the names."""
    try:
        from rl_zoo3.utils import ALGOS
    except ImportError as e:
        raise ImportError(
            "python -m txrl.zoo needs rl-baselines3-zoo: pip install 'txrl[zoo]'"
        ) from e
    import txrl.envs  # noqa: F401  # registers the txrl/... ids
    from txrl.run.algorithms import algorithm_class  # torch: only once rl-zoo3 runs

    added = []
    for name, learner in zoo_learners().items():
        ALGOS[name] = algorithm_class(learner.name)
        added.append(name)
    return added


def zoo_learners() -> dict[str, Learner]:
    """rl-zoo3 ``--algo`` name -> txrl learner, for the learners that join rl-zoo3."""
    return {learner.zoo_name: learner for learner in learners() if learner.zoo_name}


def _algo(argv: Sequence[str]) -> str | None:
    for i, arg in enumerate(argv):
        if arg == "--algo" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--algo="):
            return arg.split("=", 1)[1]
    return None


@contextmanager
def hyperparameter_file(algo: str) -> Iterator[Path | None]:
    """The path of txrl's rl-zoo3 hyperparameters of ``algo`` while the context is open, or
    ``None`` if txrl ships none.

    An installed txrl has them as package data (``txrl/zoo_configs/<algo>.yml``, a real file
    for as long as the context is open even when txrl is imported from a zip); a source tree
    has them in ``configs/zoo/``.
    """
    name = f"{algo}.yml"
    packaged = resources.files("txrl") / "zoo_configs" / name
    if packaged.is_file():
        with resources.as_file(packaged) as path:
            yield path
        return
    source = SOURCE_ZOO_CONFIGS / name
    yield source if source.is_file() else None


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args in (["-h"], ["--help"]):
        print(f"{USAGE}\n\n{__doc__}")
        return 0
    if not args or args[0] not in ("train", "enjoy"):
        print(USAGE, file=sys.stderr)
        return 2
    command, rest = args[0], args[1:]
    register()
    algo = _algo(rest)
    given = {"-conf", "--conf-file"} & {a.split("=")[0] for a in rest}
    with hyperparameter_file(str(algo)) as conf_file:
        if command == "train" and not given and algo in zoo_learners():
            if conf_file is None:
                print(
                    f"txrl.zoo: this installation has no hyperparameters for {algo} "
                    f"(txrl/zoo_configs/{algo}.yml); pass --conf-file FILE.yml",
                    file=sys.stderr,
                )
                return 2
            rest += ["--conf-file", str(conf_file)]
        sys.argv = [f"txrl.zoo {command}", *rest]
        if command == "train":
            from rl_zoo3.train import train

            train()
        else:
            from rl_zoo3.enjoy import enjoy

            enjoy()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
