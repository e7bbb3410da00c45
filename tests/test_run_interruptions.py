"""What ends or bends a run from outside: Ctrl-C, a full disk or a read-only directory, a
larger budget on resume, a learner switched on the command line, a budget below one rollout,
and the temp directory a run must leave as it found it."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from stable_baselines3.common.base_class import BaseAlgorithm

import txrl.files
from tests._runs import as_from_a_terminal, tiny
from tests.test_cli import policy_params
from txrl import cli
from txrl.config import TrainConfig, load_train_config
from txrl.run.callbacks import BetweenRollouts
from txrl.run.run_files import CHECKPOINT_DIR, FINAL_CHECKPOINT
from txrl.run.train import warn_short_budget
from txrl.sb3.algorithm import MemoryOnPolicyAlgorithm

ROOT = Path(__file__).resolve().parents[1]
# Two envs of 16 steps: a rollout is 32 steps; checkpoints at 32 and 64.
TINY = tiny(budget=128, eval={"every": 0, "episodes": 2, "n_envs": 2})


def write(path: Path, **changes: Any) -> str:
    path.write_text(yaml.safe_dump({**TINY, **changes}))
    return str(path)


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err  # no traceback
    return lines[0]


def assert_ends_as_a_straight_run(config: str, run_dir: Path, straight: Path) -> None:
    """``run_dir``'s final weights are exactly those of ``config`` trained in one go."""
    assert cli.main(["train", config, "--run-dir", str(straight)]) == 0
    expected = policy_params(straight / CHECKPOINT_DIR / FINAL_CHECKPOINT)
    resumed = policy_params(run_dir / CHECKPOINT_DIR / FINAL_CHECKPOINT)
    for name, tensor in expected.items():
        torch.testing.assert_close(resumed[name], tensor, rtol=0, atol=0)


def temp_files(run_dir: Path) -> list[Path]:
    return [p for p in run_dir.rglob("*") if ".tmp-" in p.name]


# ---------------------------------------------------------------------------- Ctrl-C


def test_ctrl_c_names_the_step_the_checkpoint_and_the_resume_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / "run"
    start = BetweenRollouts._on_rollout_start

    def interrupt_at_64(self: BetweenRollouts) -> None:
        start(self)  # the checkpoint at 64 is written, then Ctrl-C
        if self.model.num_timesteps >= 64:
            raise KeyboardInterrupt

    monkeypatch.setattr(BetweenRollouts, "_on_rollout_start", interrupt_at_64)
    config = write(tmp_path / "tiny.yaml")
    assert cli.main(["train", config, "--run-dir", str(run_dir)]) == 130
    line = one_line(capsys.readouterr().err)
    checkpoint = run_dir / CHECKPOINT_DIR / "step_000000064.zip"
    assert line == (
        f"txrl train: interrupted at step 64; last checkpoint {checkpoint} (step 64); "
        f"resume with: txrl train --resume {run_dir}"
    )
    assert not (run_dir / CHECKPOINT_DIR / FINAL_CHECKPOINT).exists()

    monkeypatch.undo()  # the command it names finishes the run
    assert cli.main(["train", "--resume", str(run_dir)]) == 0
    assert "(resumed from step 64)" in capsys.readouterr().out


def test_ctrl_c_before_the_first_checkpoint_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupt(self: BetweenRollouts) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(BetweenRollouts, "_on_rollout_start", interrupt)
    run_dir = tmp_path / "run"
    assert cli.main(["train", write(tmp_path / "tiny.yaml"), "--run-dir", str(run_dir)]) == 130
    line = one_line(capsys.readouterr().err)
    assert "interrupted at step 0; no checkpoint saved yet" in line
    assert line.endswith(f"resume with: txrl train --resume {run_dir}")

    monkeypatch.undo()  # the command it names starts the run over: it had logged nothing past 0
    assert cli.main(["train", "--resume", str(run_dir)]) == 0
    assert (run_dir / CHECKPOINT_DIR / FINAL_CHECKPOINT).exists()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_mid_rollout_stops_at_a_checkpoint_and_the_resume_loses_nothing(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    signum: signal.Signals,
) -> None:
    """Ctrl-C or SIGTERM at step 40, in the second 32-step rollout, with no periodic
    checkpoint due: the run trains that rollout, writes a checkpoint at step 64 and stops;
    resumed, it ends with the weights of a run never stopped."""
    # Two envs, n_steps 16: rollouts start at 0, 32, 64, 96; no periodic checkpoint.
    config = write(tmp_path / "tiny.yaml", checkpoint={"every": 0, "keep": 0})
    run_dir = tmp_path / "run"
    step = BetweenRollouts._on_step

    def signal_at_40(self: BetweenRollouts) -> bool:
        if self.model.num_timesteps == 40:
            signal.raise_signal(signum)  # delivered to this thread at once
        return step(self)

    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    monkeypatch.setattr(BetweenRollouts, "_on_step", signal_at_40)
    try:
        assert cli.main(["train", config, "--run-dir", str(run_dir)]) == 130
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
    notice, line = capsys.readouterr().err.strip().splitlines()
    assert notice.startswith(f"txrl: {signum.name}: stopping after this rollout's update")
    checkpoint = run_dir / CHECKPOINT_DIR / "step_000000064.zip"
    assert line == (
        f"txrl train: interrupted at step 64; last checkpoint {checkpoint} (step 64); "
        f"resume with: txrl train --resume {run_dir}"
    )
    assert sorted(p.name for p in (run_dir / CHECKPOINT_DIR).glob("step_*.zip")) == [
        checkpoint.name
    ]
    assert signal.getsignal(signal.SIGTERM) is before[signal.SIGTERM]  # handlers put back

    monkeypatch.undo()
    assert cli.main(["train", "--resume", str(run_dir)]) == 0
    assert "(resumed from step 64)" in capsys.readouterr().out
    assert_ends_as_a_straight_run(config, run_dir, tmp_path / "straight")


def test_until_pauses_at_a_checkpoint_and_the_resume_loses_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--until 40`` (in the second 32-step rollout): the run trains that rollout, writes a
    checkpoint at step 64 and pauses there, unfinished, exit 0; a second ``--until`` at or
    before its step pauses again at once; continued to its budget, it ends with the weights
    of a run never paused (the ``lin_`` schedules ran over the whole budget throughout)."""
    config = write(tmp_path / "tiny.yaml", checkpoint={"every": 0, "keep": 0}, ppo={
        **TINY["ppo"], "learning_rate": "lin_1e-3"})  # fmt: skip
    run_dir = tmp_path / "run"
    assert cli.main(["train", config, "--run-dir", str(run_dir), "--until", "40"]) == 0
    checkpoint = run_dir / CHECKPOINT_DIR / "step_000000064.zip"
    pause = (
        f"txrl train: paused at step 64 (until 40) of 128; checkpoint {checkpoint}; "
        f"continue with: txrl train --resume {run_dir}"
    )
    assert capsys.readouterr().out.strip().splitlines()[-1] == pause
    assert [p.name for p in (run_dir / CHECKPOINT_DIR).glob("step_*.zip")] == [checkpoint.name]
    assert not (run_dir / CHECKPOINT_DIR / FINAL_CHECKPOINT).exists()

    assert cli.main(["train", "--resume", str(run_dir), "--until", "64"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == pause.replace("until 40", "until 64")
    assert cli.main(["train", "--resume", str(run_dir)]) == 0
    assert "(resumed from step 64)" in capsys.readouterr().out
    assert_ends_as_a_straight_run(config, run_dir, tmp_path / "straight")


@pytest.mark.slow  # a training process, interrupted
def test_sigint_to_a_training_process(tmp_path: Path) -> None:
    """A real Ctrl-C (SIGINT) to ``txrl train``: a notice, then one line on stderr naming
    the checkpoint it stopped at, exit status 130."""
    import time

    config = write(tmp_path / "long.yaml", budget=10**7, checkpoint={"every": 32, "keep": 1})
    run_dir = tmp_path / "run"

    process = subprocess.Popen(
        [sys.executable, "-m", "txrl", "train", config, "--run-dir", str(run_dir)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_from_a_terminal,
    )
    deadline = time.monotonic() + 120
    while not list((run_dir / CHECKPOINT_DIR).glob("step_*.zip")):  # training has begun
        assert process.poll() is None and time.monotonic() < deadline, process.stderr
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    notice, line = err.strip().splitlines()  # no traceback
    assert notice.startswith("txrl: SIGINT: stopping after this rollout's update")
    assert line.startswith("txrl train: interrupted at step ") and "last checkpoint" in line
    reached = line.split("interrupted at step ")[1].split(";")[0]
    assert f"(step {reached})" in line  # stopped at the checkpoint it names
    assert line.endswith(f"resume with: txrl train --resume {run_dir}")
    assert temp_files(run_dir) == []


# ---------------------------------------------------------------------------- disk errors


def failing_write(code: int, where: str) -> Any:
    """A ``_write_synced`` that writes part of the file, then fails with ``code`` for files
    whose name contains ``where``, as a full disk does."""
    write_synced = txrl.files._write_synced

    def write(path: Path, data: bytes) -> None:
        if where not in path.name:
            return write_synced(path, data)
        path.write_bytes(data[: len(data) // 2])
        raise OSError(code, os.strerror(code))

    return write


def test_atomic_write_leaves_no_temp_file_on_any_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "file.bin"
    txrl.files.atomic_write(target, b"old")
    monkeypatch.setattr(txrl.files, "_write_synced", failing_write(errno.ENOSPC, "file"))
    with pytest.raises(OSError) as caught:
        txrl.files.atomic_write(target, b"new" * 100)
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.bin"]
    assert target.read_bytes() == b"old"

    def interrupted(path: Path, data: bytes) -> None:
        path.write_bytes(data[:1])
        raise KeyboardInterrupt

    monkeypatch.setattr(txrl.files, "_write_synced", interrupted)
    with pytest.raises(KeyboardInterrupt):
        txrl.files.atomic_write(target, b"new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.bin"]


@pytest.mark.parametrize(
    ("code", "todo"),
    [
        (errno.ENOSPC, "free space on that disk"),
        (errno.EDQUOT, "free space on that disk (or raise the quota)"),
        (errno.EROFS, "make that directory writable"),
        (errno.EACCES, "make that directory writable"),
    ],
)
def test_a_failed_checkpoint_write_is_one_line_and_leaves_no_temp_file(
    code: int,
    todo: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(txrl.files, "_write_synced", failing_write(code, "step_"))
    run_dir = tmp_path / "run"
    assert cli.main(["train", write(tmp_path / "tiny.yaml"), "--run-dir", str(run_dir)]) == 1
    line = one_line(capsys.readouterr().err)
    path = run_dir / CHECKPOINT_DIR / "step_000000032.zip"
    assert line.startswith(
        f"txrl train: cannot write {path}: {os.strerror(code)} [{errno.errorcode[code]}]; {todo}"
    )
    assert line.endswith(f"then resume with: txrl train --resume {run_dir}")
    assert temp_files(run_dir) == [] and not path.exists()


def test_a_read_only_run_directory_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    read_only = tmp_path / "read_only"
    read_only.mkdir()
    read_only.chmod(0o555)
    if os.geteuid() == 0:
        # root writes through the mode bits: the file system's answer is simulated instead.
        mkdir = Path.mkdir

        def refuse(self: Path, *args: Any, **kwargs: Any) -> None:
            if read_only in self.parents:
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))
            mkdir(self, *args, **kwargs)

        monkeypatch.setattr(Path, "mkdir", refuse)
    run_dir = read_only / "run"
    try:
        status = cli.main(["train", write(tmp_path / "tiny.yaml"), "--run-dir", str(run_dir)])
    finally:
        read_only.chmod(0o755)
    assert status == 1
    line = one_line(capsys.readouterr().err)
    assert line == (
        f"txrl train: cannot write {run_dir}: Permission denied [EACCES]; make that directory "
        "writable, or write somewhere else (--run-dir, --out), then run the same command again"
    )
    assert not run_dir.exists()


# ---------------------------------------------------------------------------- budgets


def test_a_larger_budget_stretches_lin_schedules_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A finished run (learning rate at 0) extended from 64 to 128 steps: its updates follow
    ``x * (1 - step / 128)``, the schedule of the new budget."""
    run_dir = tmp_path / "run"
    config = write(
        tmp_path / "tiny.yaml", budget=64, ppo={**TINY["ppo"], "learning_rate": "lin_0.001"}
    )
    rates: list[tuple[int, float]] = []
    update = MemoryOnPolicyAlgorithm._update_learning_rate

    def record(self: BaseAlgorithm, optimizers: Any) -> None:
        update(self, optimizers)
        rates.append((int(self.num_timesteps), self.policy.optimizer.param_groups[0]["lr"]))

    monkeypatch.setattr(MemoryOnPolicyAlgorithm, "_update_learning_rate", record)
    assert cli.main(["train", config, "--run-dir", str(run_dir)]) == 0
    assert rates == [(32, pytest.approx(0.0005)), (64, 0.0)]  # the run ends at 0
    rates.clear()
    capsys.readouterr()
    assert cli.main(["train", "--resume", str(run_dir), "--set", "budget=128"]) == 0
    assert rates == [(96, pytest.approx(0.00025)), (128, 0.0)]  # 1 - 96/128 = 25%
    out = capsys.readouterr().out
    assert (
        "budget 64 -> 128: lin_ schedules are stretched over the new budget: at step 64 they go "
        "on from 50% of their start (ppo.learning_rate 0.0005; the old budget had them at 0%) "
        "and fall to 0 at step 128"
    ) in out


def test_a_budget_below_one_rollout_warns() -> None:
    said: list[str] = []
    warn_short_budget(TrainConfig.from_dict(tiny(budget=20)), said.append)
    assert said == [
        "budget 20 is below one rollout (ppo.n_steps * env.n_envs = 16 * 2 = 32 steps): the run "
        "trains one whole rollout, 32 steps; set budget >= 32 or lower ppo.n_steps"
    ]
    said.clear()
    warn_short_budget(TrainConfig.from_dict(tiny(budget=32)), said.append)
    assert said == []


# ---------------------------------------------------------------------------- learner switch


def test_switching_learner_names_the_dropped_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "tiny.yaml", ppo={**TINY["ppo"], "clip_range": 0.1, "gamma": 0.9})
    config = load_train_config(path, ["algo=vmpo"])
    assert config.algo == "vmpo" and config.learner_settings.gamma != 0.9  # vmpo's defaults
    line = one_line(capsys.readouterr().err)
    assert line.startswith(
        "warning: --set algo=vmpo drops the file's ppo: section (batch_size, clip_range, gamma, "
        "n_epochs, n_steps, segment_length); vmpo starts from its defaults; to keep the values "
        "it shares, add: --set vmpo.batch_size=32 "
    )
    assert "--set vmpo.gamma=0.9 " in line and "vmpo.clip_range" not in line  # not vmpo's
    load_train_config(path, ["algo=ppo"])  # the file's own learner: nothing dropped
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------------------- temp directory


@pytest.mark.slow  # a training process
def test_training_leaves_the_temp_directory_as_it_was(tmp_path: Path) -> None:
    """In a fresh process (in this one torch may have made its cache directory already):
    ``TMPDIR`` is where ``tempfile.gettempdir()`` and torch put temporary files."""
    temp = tmp_path / "temp"
    temp.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    config = write(tmp_path / "tiny.yaml", budget=32)
    done = subprocess.run(
        [sys.executable, "-m", "txrl", "train", config, "--run-dir", str(tmp_path / "run")],
        cwd=ROOT,
        env={**env, "TMPDIR": str(temp)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert list(temp.iterdir()) == []
