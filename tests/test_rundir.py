"""The run directory (:mod:`txrl.run.run_dir`): the best checkpoint follows the evaluations,
TensorBoard steps stay single-valued across a resume, and the run's clock goes on from its
checkpoint's."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

import txrl.envs  # noqa: F401 - registers the tasks
from tests._runs import TINY, crash_after, tiny, train_tiny
from txrl import MemoryPPO, cli
from txrl.config import TrainConfig
from txrl.run.run_dir import Run
from txrl.run.run_files import BEST_CHECKPOINT, CHECKPOINT_DIR, EVAL_LOG, TB_DIR


def tiny_config(**changes: Any) -> TrainConfig:
    return TrainConfig.from_dict(tiny(**changes))


def test_best_checkpoint_scores_and_ties(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Run.open(tiny_config(), tmp_path / "run")
    model = MemoryPPO(
        "MlpGTrXLPolicy", "txrl/TMazePassive-v0", n_steps=16, batch_size=16, segment_length=8
    )
    best = run.run_dir / CHECKPOINT_DIR / BEST_CHECKPOINT
    assert run.update_best(model, {"success_rate": 0.25, "mean_return": -1.0})
    assert not run.update_best(model, {"success_rate": 0.25, "mean_return": 5.0})  # a tie
    assert run.update_best(model, {"success_rate": 0.5, "mean_return": -2.0})
    assert run.best_score == 0.5 and best.exists()
    # On resume from an earlier step, a best.zip saved after it goes, with its log entries.
    model.num_timesteps = 96
    assert run.update_best(model, {"success_rate": 0.75, "mean_return": 0.0})
    run.forget_best_after(96, [{"success_rate": 0.75, "mean_return": 0.0}])
    assert best.exists() and run.best_score == 0.75
    run.forget_best_after(64, [{"success_rate": 0.5, "mean_return": 0.0}])
    assert not best.exists() and run.best_score == 0.5
    run.forget_best_after(-1, [])
    assert run.best_score is None
    # Without a success rate, the mean return scores.
    plain = Run.open(tiny_config(), tmp_path / "plain")
    assert plain.update_best(model, {"success_rate": None, "mean_return": -3.0})
    assert plain.update_best(model, {"success_rate": None, "mean_return": 2.0})
    assert plain.best_score == 2.0
    # eval.save_best: false writes none, and `txrl eval --best` says why there is none.
    off = Run.open(tiny_config(eval={**TINY["eval"], "save_best": False}), tmp_path / "off")
    assert not off.update_best(model, {"success_rate": 1.0, "mean_return": 1.0})
    assert not (off.run_dir / CHECKPOINT_DIR).exists()
    assert cli.main(["eval", str(off.run_dir), "--best"]) == 1
    assert "has no checkpoints/best.zip" in capsys.readouterr().err


def creation_order(path: Path) -> tuple[int, int]:
    """Sort key of an event file ``events.out.tfevents.<seconds>.<host>.<pid>.<n>``: the
    second it was opened, then the writer's counter in its process. Plain name order puts
    ``...<pid>.10`` before ``...<pid>.9``, which two files opened in the same second by one
    process (this test's two sessions) can have, depending on what ran before them."""
    name = path.name
    return int(name.split(".")[3]), int(name.rsplit(".", 1)[1])


def test_event_files_are_read_in_creation_order() -> None:
    same_second = [Path(f"events.out.tfevents.1700000000.host.name.42.{n}") for n in (10, 9)]
    assert [p.name[-2:] for p in sorted(same_second, key=creation_order)] == [".9", "10"]


def scalar_steps(tb_dir: Path) -> dict[str, list[int]]:
    """Steps of every scalar tag, file by file in the order the files were written."""
    steps: dict[str, list[int]] = {}
    for path in sorted(tb_dir.glob("events.out.tfevents.*"), key=creation_order):
        for event in EventFileLoader(str(path)).Load():
            for value in event.summary.value:
                steps.setdefault(value.tag, []).append(event.step)
    return steps


def test_tensorboard_steps_are_single_valued_and_increasing_across_a_resume(
    tmp_path: Path,
) -> None:
    straight = train_tiny(tmp_path, "straight", budget=192)
    resumed = tmp_path / "resumed"
    shutil.copytree(straight, resumed)
    # As if killed at step 112: checkpoints up to 96, events up to 112 already written.
    crash_after(resumed, 96)
    assert cli.main(["train", "--resume", str(resumed)]) == 0

    for run_dir in (straight, resumed):
        steps = scalar_steps(run_dir / TB_DIR)
        assert {"train/loss", "eval/success_rate", "rollout/ep_rew_mean"} <= set(steps)
        for tag, values in steps.items():
            assert values == sorted(set(values)), (run_dir.name, tag, values)
    # The same points as the straight run, but for the learner values of the update just
    # before the checkpoint (logged at the next rollout's end, 128, by the killed session).
    straight_loss = scalar_steps(straight / TB_DIR)["train/loss"]
    assert scalar_steps(resumed / TB_DIR)["train/loss"] == [s for s in straight_loss if s != 128]
    assert scalar_steps(resumed / TB_DIR)["eval/success_rate"] == [0, 64, 128, 192]


def test_a_resumed_run_keeps_counting_wall_clock_from_an_older_checkpoint(tmp_path: Path) -> None:
    """A checkpoint written before checkpoints kept the run's clock: the resumed run's clock
    goes on from the last evaluation before it, so eval.jsonl's wall_time_s never goes back."""
    import pickle
    import zipfile

    from txrl.run.checkpoint import RESUME_MEMBER

    run_dir = train_tiny(tmp_path, budget=128)
    crash_after(run_dir, 64)
    path = run_dir / CHECKPOINT_DIR / "step_000000064.zip"
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    state = pickle.loads(members[RESUME_MEMBER])
    del state.__dict__["wall_time_s"]  # as an older txrl wrote it
    members[RESUME_MEMBER] = pickle.dumps(state)
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)

    # a clock far from this session's, to tell "went on from it" from "started again"
    log = [json.loads(line) for line in (run_dir / EVAL_LOG).read_text().splitlines()]
    log[1]["wall_time_s"] = 1000.0
    (run_dir / EVAL_LOG).write_text("".join(json.dumps(e) + "\n" for e in log))

    began = time.monotonic()
    assert cli.main(["train", "--resume", str(run_dir)]) == 0
    took = time.monotonic() - began
    log = [json.loads(line) for line in (run_dir / EVAL_LOG).read_text().splitlines()]
    assert [e["timesteps"] for e in log] == [0, 64, 128]
    assert 1000.0 <= log[-1]["wall_time_s"] <= 1000.0 + took


def test_resume_restarts_envs_pickled_by_an_older_version_of_their_class() -> None:
    """A checkpoint's envs are reused only where they hold what the env's code builds now;
    one pickled before its class gained an attribute (here the T-maze without ``min_length``,
    which its ``reset`` reads) is replaced by new envs instead of failing at an episode end."""
    import cloudpickle
    import numpy as np

    from txrl.run.checkpoint import ResumeState
    from txrl.run.envs import make_envs, restore_envs

    config = tiny_config()

    def state_of(strip: str | None) -> ResumeState:
        vec = make_envs(config, config.env.n_envs, config.seed)
        vec.reset()
        if strip is not None:
            for env in vec.envs:  # type: ignore[attr-defined]
                delattr(env.unwrapped, strip)
        envs = cloudpickle.dumps(vec.envs)  # type: ignore[attr-defined]
        vec.close()
        starts = np.zeros(config.env.n_envs, dtype=bool)
        return ResumeState(0, None, starts, None, {}, envs, None)

    restored, exact = restore_envs(config, state_of(None))
    assert exact
    restored.close()
    restored, exact = restore_envs(config, state_of("min_length"))
    assert not exact
    restored.reset()  # the new envs reset without the AttributeError the old ones raise
    restored.close()
