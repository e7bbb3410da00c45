"""The ``txrl`` command line: train, eval, resume after ``kill -9``, and the rl-zoo3 entry point."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml
from stable_baselines3.common.vec_env import DummyVecEnv

import txrl.envs  # noqa: F401 - registers the tasks
from tests._runs import crash_after, tiny, train_tiny
from txrl import MemoryPPO, cli
from txrl.config import read_run_config
from txrl.run.checkpoint import latest_checkpoint, read_resume_state
from txrl.run.run_dir import Run
from txrl.run.run_files import (
    BEST_CHECKPOINT,
    CHECKPOINT_DIR,
    EVAL_LOG,
    FINAL_CHECKPOINT,
    RESUME_LOG,
    TB_DIR,
    read_eval_log,
)

ROOT = Path(__file__).resolve().parents[1]

# A run that takes seconds, evaluated three times and checkpointed every rollout.
TINY: dict[str, Any] = tiny(
    budget=384, eval={"every": 128, "episodes": 4, "n_envs": 2}, checkpoint={"every": 32, "keep": 2}
)


def write_config(path: Path, **changes: Any) -> Path:
    path.write_text(yaml.safe_dump({**TINY, **changes}))
    return path


def policy_params(checkpoint: Path) -> dict[str, torch.Tensor]:
    with zipfile.ZipFile(checkpoint) as archive:
        return torch.load(io.BytesIO(archive.read("policy.pth")))


def test_train_then_eval(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path / "tiny.yaml")
    run_dir = tmp_path / "run"
    assert cli.main(["train", str(config), "--run-dir", str(run_dir), "--set", "budget=128"]) == 0
    out = capsys.readouterr().out
    assert f"tensorboard --logdir {run_dir / TB_DIR}" in out
    assert "trained 128 steps" in out and "success rate" in out and "final checkpoint" in out

    assert read_run_config(run_dir).budget == 128  # the resolved config, overrides applied
    assert [
        e["timesteps"] for e in map(json.loads, (run_dir / EVAL_LOG).read_text().splitlines())
    ] == [0, 128]
    assert list((run_dir / TB_DIR).glob("events.out.tfevents.*"))
    final = run_dir / CHECKPOINT_DIR / FINAL_CHECKPOINT
    assert MemoryPPO.load(final).num_timesteps == 128  # SB3 opens txrl's checkpoints as they are
    assert len(list((run_dir / CHECKPOINT_DIR).glob("step_*.zip"))) == 2  # checkpoint.keep

    threads = torch.get_num_threads()
    torch.set_num_threads(threads + 1)
    try:  # evaluation runs on the threads the run trained on (runtime.torch_threads: 1)
        assert cli.main(["eval", str(run_dir), "--episodes", "6", "--json"]) == 0
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)
    summary = json.loads(capsys.readouterr().out)
    assert summary["checkpoint"] == str(final) and summary["timesteps"] == 128
    assert summary["judged"] == "final" and summary["episodes"] == 6
    # the judging seeds, env i of n_envs seeded seed + i, and greedy actions
    assert (summary["seed"], summary["n_envs"], summary["deterministic"]) == (2_000_000, 2, True)
    lo, hi = summary["success_ci95"]
    assert 0.0 <= lo <= summary["success_rate"] <= hi <= 1.0
    assert set(summary) >= {"mean_return", "return_ci95", "mean_length"}

    assert cli.main(["eval", str(final), "--seed", "7", "--stochastic"]) == 0
    out = capsys.readouterr().out
    assert f"{final} (final, step 128): sampled actions, eval env seeds 7-8" in out
    assert "95% CI" in out

    # The run exists: a second fresh training there is refused, a resume has nothing to do.
    assert cli.main(["train", str(config), "--run-dir", str(run_dir)]) == 1
    assert "already holds a run" in capsys.readouterr().err
    assert cli.main(["train", "--resume", str(run_dir)]) == 0
    assert "nothing to resume" in capsys.readouterr().out


@pytest.mark.slow  # trains twice, once with env worker processes
def test_subproc_envs_train_exactly_as_in_process_ones(tmp_path: Path) -> None:
    """``env.vec_env: subproc`` (SB3's SubprocVecEnv, one process per env) steps the same
    seeded envs as ``dummy``, so training ends at the same parameters."""
    finals = {}
    for vec_env in ("dummy", "subproc"):
        env = dict(TINY["env"], vec_env=vec_env)
        config = write_config(tmp_path / f"{vec_env}.yaml", env=env, budget=128)
        run_dir = tmp_path / vec_env
        assert cli.main(["train", str(config), "--run-dir", str(run_dir)]) == 0
        assert read_run_config(run_dir).env.vec_env == vec_env
        finals[vec_env] = policy_params(run_dir / CHECKPOINT_DIR / FINAL_CHECKPOINT)
    assert finals["dummy"].keys() == finals["subproc"].keys()
    for name, value in finals["dummy"].items():
        assert torch.equal(value, finals["subproc"][name]), name


@pytest.mark.slow  # env worker processes
def test_subproc_env_workers_outlive_a_ctrl_c(tmp_path: Path) -> None:
    """A terminal's Ctrl-C reaches the env workers too; they ignore it, so the training
    process can finish its rollout and checkpoint (SB3's workers would end on it)."""
    from stable_baselines3.common.vec_env import SubprocVecEnv

    from txrl.config import TrainConfig
    from txrl.run.envs import make_envs

    config = TrainConfig.from_dict(tiny(env=dict(TINY["env"], vec_env="subproc")))
    env = make_envs(config, 2, seed=0, subproc=True)
    assert isinstance(env, SubprocVecEnv)
    try:
        env.reset()
        for process in env.processes:
            os.kill(process.pid, signal.SIGINT)
        time.sleep(0.5)
        assert all(process.is_alive() for process in env.processes)
        env.step(np.zeros(2, dtype=np.int64))  # still answering
    finally:
        env.close()


@pytest.mark.slow  # a training process, killed and resumed
def test_kill_9_then_resume_continues_exactly(tmp_path: Path) -> None:
    """SIGKILL a training process after its first checkpoint; the resumed run must equal an
    uninterrupted one (same seed) step for step, down to the weights."""
    config = write_config(tmp_path / "tiny.yaml")
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, "-m", "txrl", "train", str(config), "--run-dir", str(killed)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    checkpoints = killed / CHECKPOINT_DIR
    deadline = time.monotonic() + 120
    while not list(checkpoints.glob("step_*.zip")):
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert time.monotonic() < deadline, "no checkpoint within 120 s"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (checkpoints / FINAL_CHECKPOINT).exists(), "the run finished before the kill"

    # What resume will restore: the memory stored in the last checkpoint, in place.
    probe = tmp_path / "probe"
    shutil.copytree(killed, probe)
    run = Run.open(read_run_config(probe), probe, resume=True)
    assert run.checkpoint is not None
    stored = read_resume_state(run.checkpoint)
    model = run.restore(MemoryPPO, run.envs())
    assert run.exact_envs
    assert model.num_timesteps == stored.num_timesteps > 0
    memory = model.get_memory()
    assert memory is not None and stored.memory is not None
    assert any(np.abs(a.astype(float)).sum() > 0 for a in stored.memory)  # a live memory, not empty
    for restored, saved in zip(memory, stored.memory, strict=True):
        np.testing.assert_array_equal(restored, saved)
    np.testing.assert_array_equal(model._last_obs, stored.last_obs)

    assert cli.main(["train", "--resume", str(killed)]) == 0
    resumes = [json.loads(line) for line in (killed / RESUME_LOG).read_text().splitlines()]
    assert resumes == [
        {"from": stored.num_timesteps, "envs": "exact", "checkpoint": run.checkpoint.name}
    ]
    final = latest_checkpoint(killed)
    assert final is not None and final.name == FINAL_CHECKPOINT
    assert MemoryPPO.load(final).num_timesteps == TINY["budget"]
    log = [json.loads(line) for line in (killed / EVAL_LOG).read_text().splitlines()]
    assert [e["timesteps"] for e in log] == [0, 128, 256, 384]  # each once, none lost or repeated
    # The run's clock goes on from the checkpoint's: it counts both sessions' training.
    assert stored.wall_time_s > 0
    after = [e["wall_time_s"] for e in log if e["timesteps"] > stored.num_timesteps]
    assert after and min(after) >= stored.wall_time_s
    assert [e["wall_time_s"] for e in log] == sorted(e["wall_time_s"] for e in log)
    assert len(list((killed / TB_DIR).glob("events.out.tfevents.*"))) == 2  # one tb dir, continued

    straight = tmp_path / "straight"
    assert cli.main(["train", str(config), "--run-dir", str(straight)]) == 0
    expected = policy_params(straight / CHECKPOINT_DIR / FINAL_CHECKPOINT)
    resumed = policy_params(final)
    for name, tensor in expected.items():
        torch.testing.assert_close(resumed[name], tensor, rtol=0, atol=0)


def first_best_step(run_dir: Path) -> int:
    """The step of the run's best evaluation (success rate; the earliest on a tie)."""
    log = read_eval_log(run_dir / EVAL_LOG)
    best = max(e["success_rate"] for e in log)
    return next(e["timesteps"] for e in log if e["success_rate"] == best)


def test_best_checkpoint_follows_the_eval_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Every periodic checkpoint kept, so the run can be cut back to its first one.
    config = write_config(tmp_path / "tiny.yaml", checkpoint={"every": 32, "keep": 0})
    run_dir = tmp_path / "run"
    assert cli.main(["train", str(config), "--run-dir", str(run_dir)]) == 0
    best = run_dir / CHECKPOINT_DIR / BEST_CHECKPOINT
    assert read_resume_state(best).num_timesteps == first_best_step(run_dir)
    capsys.readouterr()
    assert cli.main(["eval", str(run_dir), "--best", "--json", "--episodes", "2"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["checkpoint"] == str(best) and summary["judged"] == "best"
    assert summary["timesteps"] == first_best_step(run_dir)

    # Killed after its first checkpoint and resumed: the best.zip of an evaluation after the
    # checkpoint goes with that evaluation, and the resumed run saves the same one again.
    killed = tmp_path / "killed"
    shutil.copytree(run_dir, killed)
    crash_after(killed, 32)
    # Evaluating the unfinished run says which checkpoint it took and that the run is not done.
    capsys.readouterr()
    assert cli.main(["eval", str(killed), "--json", "--episodes", "2"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["timesteps"] == 32
    assert json.loads(captured.out)["judged"] == "periodic"
    assert "is not finished" in captured.err and "at step 32" in captured.err
    assert cli.main(["eval", str(run_dir), "--json", "--episodes", "2"]) == 0
    assert "is not finished" not in capsys.readouterr().err
    assert cli.main(["train", "--resume", str(killed)]) == 0
    resumed_best = killed / CHECKPOINT_DIR / BEST_CHECKPOINT
    assert read_resume_state(resumed_best).num_timesteps == first_best_step(run_dir)
    for name, tensor in policy_params(best).items():
        torch.testing.assert_close(policy_params(resumed_best)[name], tensor, rtol=0, atol=0)


def test_a_run_stops_once_its_evaluations_reach_eval_stop_at(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Every success rate is >= 0, so the evaluations at steps 0 and 128 end a run whose
    # budget is far away; one evaluation at the target is not enough with stop_after 2.
    stop = {**TINY["eval"], "stop_at": 0.0, "stop_after": 2}
    config = write_config(tmp_path / "tiny.yaml", budget=50_000, eval=stop)
    run_dir = tmp_path / "run"
    assert cli.main(["train", str(config), "--run-dir", str(run_dir)]) == 0
    assert "stopped early: 2 evaluations in a row at >= 0.0" in capsys.readouterr().out
    assert [e["timesteps"] for e in read_eval_log(run_dir / EVAL_LOG)] == [0, 128]
    final = read_resume_state(run_dir / CHECKPOINT_DIR / FINAL_CHECKPOINT)
    n_envs = read_run_config(run_dir).env.n_envs
    assert final.num_timesteps == 128 + n_envs  # the step on which learn() was told to stop
    # a target no evaluation reaches leaves the budget to decide
    never = write_config(tmp_path / "never.yaml", eval={**stop, "stop_at": 1.5})
    assert cli.main(["train", str(never), "--run-dir", str(tmp_path / "never")]) == 0
    log = read_eval_log(tmp_path / "never" / EVAL_LOG)
    assert log[-1]["timesteps"] == TINY["budget"]


def test_argument_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path / "tiny.yaml")
    for argv, message in [
        (["train"], "give a CONFIG.yaml to train, or --resume RUN_DIR"),
        (
            ["train", str(config), "--resume", str(tmp_path)],
            "--resume RUN_DIR continues a run with its own config",
        ),
        (["train", str(config), "--set", "budget"], "--set takes KEY=VALUE"),
    ]:
        with pytest.raises(SystemExit) as exit_info:
            cli.main(argv)
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err
    assert cli.main(["train", "--resume", str(tmp_path / "nowhere")]) == 1
    assert "is not a txrl run directory" in capsys.readouterr().err
    assert cli.main(["eval", str(tmp_path / "nowhere")]) == 1
    assert "neither a run directory nor a checkpoint" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["eval", str(tmp_path), "--episodes", "0"])
    assert "must be an integer >= 1" in capsys.readouterr().err


def test_demo_still_works(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo", "--steps", "8"]) == 0
    assert "max |step-by-step - whole sequence|" in capsys.readouterr().out


@pytest.mark.slow  # RL Zoo training in a subprocess
def test_rl_zoo_trains_memory_ppo(tmp_path: Path) -> None:
    args = "train --algo memory_ppo --env txrl/TMazePassive-v0 -n 64 --eval-freq -1"
    hyperparams = "--hyperparams n_envs:2 n_steps:16 batch_size:32 n_epochs:1"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "txrl.zoo",
            *args.split(),
            "-f",
            str(tmp_path),
            *hyperparams.split(),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (model,) = tmp_path.glob("memory_ppo/txrl-TMazePassive-v0_1/txrl-TMazePassive-v0.zip")
    assert MemoryPPO.load(model).num_timesteps == 64


def test_inspect_probe_writes_held_out_accuracy_per_layer_against_chance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests._runs import train_tiny

    run_dir = train_tiny(tmp_path)
    out = tmp_path / "probe"
    argv = ["inspect", str(run_dir), "--probe", "cue", "--episodes", "16", "--out", str(out)]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    for name in ("probe.csv", "probe.json", "probe.png"):
        assert (out / name).stat().st_size > 0 and name in printed
    report = json.loads((out / "probe.json").read_text())
    rows = (out / "probe.csv").read_text().splitlines()
    assert len(rows) > 1 and "chance" in rows[0]
    assert "layer0" in json.dumps(report)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["inspect", str(run_dir), "--probe", "nonsense", "--out", str(out)])
    assert exit_info.value.code == 2
    assert "unknown probe target 'nonsense'; valid: cue" in capsys.readouterr().err


def test_eval_judges_on_seeds_apart_from_the_training_evaluations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The episodes ``txrl eval`` plays by default are not those that chose the best
    checkpoint or stopped the run: every env seed of the judging evaluation differs from
    every env seed of the evaluations during training; the judgement records the seeds it
    used."""
    import txrl.run.envs as run_envs

    seeds: dict[str, set[int]] = {"train": set(), "judge": set()}
    phase = "train"
    make_envs = run_envs.make_envs
    reseed = DummyVecEnv.seed

    def recording_make_envs(config, n_envs, seed, **kwargs):  # type: ignore[no-untyped-def]
        seeds[phase].update(range(seed, seed + n_envs))
        return make_envs(config, n_envs, seed, **kwargs)

    def recording_seed(self, seed=None):  # type: ignore[no-untyped-def]
        if seed is not None:
            seeds[phase].update(range(seed, seed + self.num_envs))
        return reseed(self, seed)

    monkeypatch.setattr(run_envs, "make_envs", recording_make_envs)
    monkeypatch.setattr(DummyVecEnv, "seed", recording_seed)
    run_dir = train_tiny(tmp_path)
    phase = "judge"
    capsys.readouterr()
    assert cli.main(["eval", str(run_dir), "--episodes", "4", "--json"]) == 0
    assert seeds["judge"], "the judging evaluation made no envs"
    assert not seeds["judge"] & seeds["train"], sorted(seeds["judge"] & seeds["train"])
    summary = json.loads(capsys.readouterr().out)
    assert seeds["judge"] == set(range(summary["seed"], summary["seed"] + summary["n_envs"]))


def test_eval_env_kwargs_judge_on_another_setting_of_the_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``eval.env_kwargs`` replaces keys of ``env.kwargs`` for the periodic evaluations and
    ``txrl eval``: trained on a 3-cell corridor, judged on a 6-cell one."""
    eval_settings = {**TINY["eval"], "env_kwargs": {"length": 6}}
    run_dir = train_tiny(tmp_path, eval=eval_settings)
    logged = read_eval_log(run_dir / EVAL_LOG)
    assert logged and all(entry["mean_length"] >= 7 for entry in logged)  # 6 moves + the turn
    capsys.readouterr()
    assert cli.main(["eval", str(run_dir), "--episodes", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mean_length"] >= 7


def test_bad_eval_env_kwargs_are_refused_before_the_run_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path / "bad.yaml", eval={**TINY["eval"], "env_kwargs": {"length": 0}})
    with pytest.raises(SystemExit) as exited:
        cli.main(["train", str(config), "--run-dir", str(tmp_path / "run")])
    assert exited.value.code == 2
    assert "eval.env_kwargs" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_eval_set_judges_a_trained_agent_on_other_env_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``txrl eval --set eval.env_kwargs.KEY=VALUE`` plays the trained agent on another
    setting of its task (a 3-cell corridor's agent on 60 cells) and records what it changed;
    any key outside ``eval.*`` would judge another agent, and is refused."""
    run_dir = train_tiny(tmp_path)
    capsys.readouterr()
    assert cli.main(["eval", str(run_dir), "--episodes", "4", "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert "overrides" not in plain and plain["mean_length"] <= 8  # truncated at twice 3 + 1
    override = "eval.env_kwargs.length=60"
    assert cli.main(["eval", str(run_dir), "--episodes", "4", "--json", "--set", override]) == 0
    longer = json.loads(capsys.readouterr().out)
    assert longer["mean_length"] >= 61  # 60 moves + the turn
    assert longer["overrides"] == [override] and longer["env_kwargs"]["length"] == 60
    assert read_run_config(run_dir).eval.env_kwargs == {}  # the run's own config is untouched

    assert cli.main(["eval", str(run_dir), "--episodes", "2", "--set", override]) == 0
    out = capsys.readouterr().out
    assert "env kwargs: {" in out and "'length': 60" in out
    for bad, named in [
        ("policy.d_model=8", "cannot change policy.d_model; --set takes eval.* keys"),
        ("eval.nonsense=1", "unknown key eval.nonsense"),
    ]:
        with pytest.raises(SystemExit) as exited:
            cli.main(["eval", str(run_dir), "--set", bad])
        assert exited.value.code == 2
        assert named in capsys.readouterr().err
