"""What a new user hits on the command line: corrupt checkpoints, demo options, empty or
unusable configs, switching backbone or learner, extending a finished run and a fast
``--help``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
import torch

from tests._runs import TINY, train_tiny, write_config
from txrl import MemoryPPO, cli
from txrl.config import ConfigError, load_train_config, read_run_config
from txrl.envs import TMazeEnv
from txrl.run.preflight import resolve
from txrl.run.run_files import CHECKPOINT_DIR, EVAL_LOG, FINAL_CHECKPOINT, LOCK_FILE, RESUME_LOG

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "configs" / "quickstart.yaml"


def exits_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    return capsys.readouterr().err


def checkpoint_steps(run_dir: Path) -> list[str]:
    """The periodic and final checkpoints (not ``best.zip``, which the evaluations write)."""
    return sorted(p.name for p in (run_dir / CHECKPOINT_DIR).iterdir() if p.name != "best.zip")


# ---------------------------------------------------------------------------- checkpoints


def test_resume_skips_a_truncated_checkpoint_names_it_and_sets_it_aside(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = train_tiny(tmp_path)
    # As if killed after step 96 and its checkpoint were then cut short on disk.
    (run_dir / CHECKPOINT_DIR / FINAL_CHECKPOINT).unlink()
    newest = run_dir / CHECKPOINT_DIR / "step_000000096.zip"
    newest.write_bytes(newest.read_bytes()[:2000])
    capsys.readouterr()

    # Evaluation reads the newest readable checkpoint and leaves the bad one where it is.
    assert cli.main(["eval", str(run_dir), "--episodes", "2", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["timesteps"] == 64 and "using step_000000064.zip instead" in err
    assert newest.exists()

    assert cli.main(["train", "--resume", str(run_dir)]) == 0
    err = capsys.readouterr().err
    assert "step_000000096.zip is not a readable txrl checkpoint" in err
    assert "set it aside as step_000000096.zip.corrupt" in err
    assert (run_dir / CHECKPOINT_DIR / "step_000000096.zip.corrupt").exists()
    resumes = [json.loads(line) for line in (run_dir / RESUME_LOG).read_text().splitlines()]
    assert resumes[0]["from"] == 64 and resumes[0]["checkpoint"] == "step_000000064.zip"
    assert MemoryPPO.load(run_dir / CHECKPOINT_DIR / FINAL_CHECKPOINT).num_timesteps == 128


def test_resume_finishes_a_run_whose_final_checkpoint_is_truncated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A truncated final.zip is not a finished run: evaluation says so and names the resume,
    and the resume sets the bad file aside and trains again from the newest readable
    checkpoint to the same budget."""
    run_dir = train_tiny(tmp_path)
    final = run_dir / CHECKPOINT_DIR / FINAL_CHECKPOINT
    final.write_bytes(final.read_bytes()[: final.stat().st_size // 2])
    capsys.readouterr()
    assert cli.main(["eval", str(run_dir), "--episodes", "2", "--json"]) == 0
    assert f"`txrl train --resume {run_dir}` finishes it" in capsys.readouterr().err

    assert cli.main(["train", "--resume", str(run_dir)]) == 0
    out, err = capsys.readouterr()
    assert "set it aside as final.zip.corrupt" in err and "(resumed from step 96)" in out
    assert MemoryPPO.load(final).num_timesteps == 128
    assert json.loads((run_dir / "finished.json").read_text())["timesteps"] == 128


def test_resume_with_no_readable_checkpoint_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = train_tiny(tmp_path, checkpoint={"every": 0})
    final = run_dir / CHECKPOINT_DIR / FINAL_CHECKPOINT
    final.write_bytes(final.read_bytes()[:-100])
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert cli.main(["train", "--resume", str(run_dir), "--set", "budget=192"]) == 1
    err = capsys.readouterr().err
    assert "final.zip is not a readable txrl checkpoint" in err and "nothing was changed" in err
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before


class OverflowingTMaze(TMazeEnv):
    """A passive T-maze whose rewards become 1e30 after its 20th step: finite data whose
    squared value error overflows float32, so the learner's update turns non-finite."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(active=False, **kwargs)
        self.steps = 0

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = super().step(action)
        self.steps += 1
        return obs, (1e30 if self.steps > 20 else reward), terminated, truncated, info


def test_a_non_finite_update_stops_the_run_and_keeps_the_last_good_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env_id = "tests/OverflowingTMaze-v0"
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=OverflowingTMaze)
    config = write_config(tmp_path / "run.yaml", env={**TINY["env"], "id": env_id})
    run_dir = tmp_path / "run"
    # 2 envs x 16 steps a rollout: the first update is good (checkpoint at 32), the second
    # rollout reaches the overflowing rewards.
    assert cli.main(["train", str(config), "--run-dir", str(run_dir)]) == 1
    err = capsys.readouterr().err
    assert "training stopped" in err and "non-finite training update" in err
    good = run_dir / CHECKPOINT_DIR / "step_000000032.zip"
    assert f"the newest checkpoint, {good}, holds the weights of the last good update" in err
    assert checkpoint_steps(run_dir) == ["step_000000032.zip"]  # none written after it
    model = MemoryPPO.load(good)
    assert all(torch.isfinite(p).all() for p in model.policy.parameters())


def test_a_run_directory_in_use_is_refused_and_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import fcntl

    run_dir = train_tiny(tmp_path)
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    # Another process holds the run (as a running `txrl train` does).
    with open(run_dir / LOCK_FILE, "a+") as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        other.truncate(0)
        other.write("4242")
        other.flush()
        capsys.readouterr()
        argv = ["train", "--resume", str(run_dir), "--set", "budget=256"]
        assert cli.main(argv) == 1
        assert "is being trained by another process (pid 4242)" in capsys.readouterr().err
    after = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and p.name != LOCK_FILE}
    assert after == {p: b for p, b in before.items() if p.name != LOCK_FILE}
    # Once released, the same command goes ahead.
    assert cli.main(argv) == 0


# ---------------------------------------------------------------------------- demo


@pytest.mark.parametrize("backbone", ["lstm", "gru", "universal", "linear", "performer"])
def test_demo_runs_every_kind_of_backbone(
    backbone: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["demo", "--backbone", backbone, "--steps", "6"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{backbone}: ") and "max |step-by-step - whole sequence|" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--steps", "0"], "--steps: must be an integer >= 1, got '0'"),
        (["--backbone", "nope"], "--backbone must be one of adaptive_span, compressive"),
        (["--backbone", "lstm", "--memory-length", "8"], "--memory-length does not apply"),
    ],
)
def test_demo_argument_errors_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert message in exits_2(["demo", *argv], capsys)


# ---------------------------------------------------------------------------- configs


def test_empty_yaml_is_an_error_not_a_default_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty.yaml").write_text("# nothing yet\n")
    err = exits_2(["train", str(tmp_path / "empty.yaml"), "--run-dir", str(tmp_path / "r")], capsys)
    assert "empty.yaml holds no settings" in err and "configs/quickstart.yaml" in err
    assert not (tmp_path / "r").exists()


def test_cuda_without_a_gpu_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    config = write_config(tmp_path / "tiny.yaml")
    argv = ["train", str(config), "--run-dir", str(tmp_path / "r"), "--set", "runtime.device=cuda"]
    err = exits_2(argv, capsys)
    assert "runtime.device is 'cuda' but torch sees no CUDA GPU here" in err
    assert "use cpu or auto" in err
    assert not (tmp_path / "r").exists()


def test_switching_backbone_reports_every_problem_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["train", str(QUICKSTART), "--run-dir", str(tmp_path / "r")]
    err = exits_2([*argv, "--set", "policy.backbone=lstm"], capsys)
    assert "3 problems" in err
    for key in ("gate", "n_heads", "memory_length"):
        assert f"policy.{key} does not apply to backbone 'lstm'" in err
    assert "--set policy.inapplicable=drop" in err
    assert not (tmp_path / "r").exists()

    config = resolve(
        load_train_config(QUICKSTART, ["policy.backbone=lstm", "policy.inapplicable=drop"])
    )
    assert config.policy.policy_kwargs() == {"backbone": "lstm", "d_model": 32, "n_layers": 1}


@pytest.mark.parametrize("backbone", ["trxl_i", "trxl"])
def test_the_gate_is_inapplicable_to_the_fixed_order_transformers(backbone: str) -> None:
    overrides = [f"policy.backbone={backbone}", "policy.gate_bias=1.0"]  # quickstart: gate gru
    with pytest.raises(ConfigError) as raised:
        resolve(load_train_config(QUICKSTART, overrides))
    for key in ("gate", "gate_bias"):
        assert f"policy.{key} does not apply to backbone '{backbone}'" in str(raised.value)

    config = resolve(load_train_config(QUICKSTART, [*overrides, "policy.inapplicable=drop"]))
    assert config.policy.gate is None and config.policy.gate_bias is None
    assert config.policy.policy_kwargs()["backbone"] == backbone


def test_schema_problems_are_reported_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path / "bad.yaml", budget="lots", ppo={"gama": 0.9, "gamma": 2})
    err = exits_2(["train", str(config)], capsys)
    assert "3 problems" in err
    assert "budget must be an integer >= 1" in err
    assert "unknown key ppo.gama" in err and "ppo.gamma must be a number in [0, 1]" in err


def test_set_algo_switches_learner_without_a_new_file() -> None:
    config = resolve(load_train_config(QUICKSTART, ["algo=vmpo", "vmpo.n_steps=64"]))
    assert config.algo == "vmpo" and config.learner_settings.n_steps == 64
    assert "ppo" not in config.to_dict()


def test_resume_with_a_larger_budget_extends_a_finished_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = train_tiny(tmp_path)
    capsys.readouterr()
    argv = ["train", "--resume", str(run_dir)]
    assert "cannot change policy.d_model" in exits_2([*argv, "--set", "policy.d_model=8"], capsys)
    assert cli.main([*argv, "--set", "budget=100"]) == 1
    assert "already finished at step 128" in capsys.readouterr().err

    assert cli.main([*argv, "--set", "budget=192", "--set", "eval.every=32"]) == 0
    assert "trained 192 steps" in capsys.readouterr().out
    assert read_run_config(run_dir).budget == 192 and read_run_config(run_dir).eval.every == 32
    assert MemoryPPO.load(run_dir / CHECKPOINT_DIR / FINAL_CHECKPOINT).num_timesteps == 192
    steps = [
        json.loads(line)["timesteps"] for line in (run_dir / EVAL_LOG).read_text().splitlines()
    ]
    assert steps == [0, 64, 128, 160, 192]
    assert "step_000000128.zip" in checkpoint_steps(run_dir)  # the old final, kept as periodic
    assert cli.main(argv) == 0
    assert "nothing to resume" in capsys.readouterr().out


# ---------------------------------------------------------------------------- speed


def test_help_and_config_errors_do_not_import_torch(tmp_path: Path) -> None:
    bad = write_config(tmp_path / "bad.yaml", budget="lots")
    script = (
        "import sys\n"
        "from txrl.cli import main\n"
        "for argv in (['--help'], ['train', '--help'], ['train', sys.argv[1]]):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit as e:\n"
        "        assert e.code in (0, 2), e.code\n"
        "print('torch' in sys.modules, 'stable_baselines3' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(bad)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "budget must be an integer >= 1" in result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False False"


def test_train_help_points_to_the_docs_not_to_source_files() -> None:
    """A user reads the config reference, not the modules that declare it."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "txrl.cli", "train", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "config reference" in out
    assert ".py" not in out and "txrl/" not in out
