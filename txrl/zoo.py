"""rl-baselines3-zoo with txrl's learners and tasks: ``python -m txrl.zoo train|enjoy ...``.

rl-zoo3 fixes the choices of ``--algo`` from its ``ALGOS`` dict when its parser is built,
before ``--gym-packages`` imports anything, so a package cannot add an algorithm from the
command line. This entry point adds txrl's learners to ``ALGOS`` (each learner of
:mod:`txrl.learners` with a ``zoo_name``: ``memory_ppo``, ``vmpo``), imports :mod:`txrl.envs` (which registers the
``txrl/...`` ids) and hands over to rl-zoo3's own ``train`` or ``enjoy`` with the remaining
arguments::

    python -m txrl.zoo train --algo memory_ppo --env txrl/TMazePassive-v0 -n 20000 -f logs
    python -m txrl.zoo enjoy --algo memory_ppo --env txrl/TMazePassive-v0 -f logs --no-render

Without ``--conf-file``, ``train`` reads the hyperparameters from ``configs/zoo/<algo>.yml``
of the txrl source tree (rl-zoo3's own files know nothing of txrl). The txrl tasks have no
``render_mode="human"``: give ``enjoy`` ``--no-render``. rl-zoo3 is an optional extra.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from txrl.learners import Learner, learners

ZOO_CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "zoo"
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

    added = []
    for name, learner in zoo_learners().items():
        try:
            ALGOS[name] = learner.algorithm_class()
        except (AttributeError, ImportError):
            continue  # a learner this installation does not have
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


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in ("train", "enjoy"):
        print(USAGE, file=sys.stderr)
        return 2
    command, rest = args[0], args[1:]
    register()
    if command == "train" and not {"-conf", "--conf-file"} & {a.split("=")[0] for a in rest}:
        algo = _algo(rest)
        default = ZOO_CONFIGS / f"{algo}.yml"
        if algo in zoo_learners():
            if not default.exists():
                print(
                    f"txrl.zoo: no hyperparameters for {algo} at {default} (they ship with the "
                    "txrl source tree, not the wheel); pass --conf-file FILE.yml",
                    file=sys.stderr,
                )
                return 2
            rest += ["--conf-file", str(default)]
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
