"""``txrl inspect``: the attention hook, the mapping to absolute steps, the files and the video."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
import yaml

from txrl import cli, make_backbone
from txrl.agents import recipe
from txrl.config import load_train_config
from txrl.envs.tmaze import TMazeEnv
from txrl.inspect import absolute_row, inspect_run
from txrl.learners.recurrent_ppo.algorithm import RecurrentPPO
from txrl.nn.attention import AttentionRecorder, RelativeMultiHeadAttention
from txrl.run.train import train

from .test_cli import TINY as CLI_TINY

# The command-line tests' tiny run (a passive T-maze of length 3), with two layers and a
# memory of 3 steps, shorter than an episode, so that the window slides within episodes.
TINY: dict[str, Any] = {
    **CLI_TINY,
    "name": "tiny-inspect",
    "budget": 64,
    "policy": {**CLI_TINY["policy"], "n_layers": 2, "memory_length": 3},
    "eval": {"every": 10_000, "episodes": 2, "n_envs": 1},
    "checkpoint": {"every": 10_000},
}


class _BlankTMaze(TMazeEnv):
    """Claims rgb_array rendering but renders nothing."""

    def render(self) -> None:
        return None


def _tmaze_without_render(length: int = 3) -> gym.Env:
    """Takes no render_mode, as many third-party envs."""
    return TMazeEnv(length=length, active=False)


def _tmaze_text_only(length: int = 3, render_mode: str | None = None) -> gym.Env:
    """Takes a render_mode but renders text whatever is asked."""
    return TMazeEnv(length=length, active=False, render_mode="ansi")


def _tmaze_blank(length: int = 3, render_mode: str | None = None) -> gym.Env:
    return _BlankTMaze(length=length, active=False, render_mode=render_mode)


NO_RGB_ENVS = {
    "txrl_test/TMazeNoRender-v0": ("render_mode='rgb_array'", _tmaze_without_render),
    "txrl_test/TMazeText-v0": ("does not render rgb_array", _tmaze_text_only),
    "txrl_test/TMazeBlank-v0": ("gave NoneType", _tmaze_blank),
}
for _env_id, (_, _entry_point) in NO_RGB_ENVS.items():
    if _env_id not in gym.registry:
        gym.register(id=_env_id, entry_point=_entry_point)


def _train_tiny(tmp_path: Path, **changes: Any) -> Path:
    config_path = tmp_path / "tiny.yaml"
    config_path.write_text(yaml.safe_dump({**TINY, **changes}))
    run_dir = tmp_path / "run"
    train(load_train_config(config_path, []), run_dir, recipe=recipe.main)
    return run_dir


# ---------------------------------------------------------------------------- the hook


def _attention_inputs(backbone: torch.nn.Module) -> dict[int, list[tuple]]:
    """Capture each attention call's inputs and output, per module."""
    seen: dict[int, list[tuple]] = {}

    def hook(module: torch.nn.Module, args: tuple, output: tuple) -> None:
        seen.setdefault(id(module), []).append((args, output[0]))

    for module in backbone.modules():
        if isinstance(module, RelativeMultiHeadAttention):
            module.register_forward_hook(hook)
    return seen


@pytest.mark.parametrize("stats", [False, True])
def test_recorded_rows_sum_to_one_over_allowed_keys_and_reproduce_the_output(stats: bool) -> None:
    torch.manual_seed(0)
    backbone = make_backbone(
        "gtrxl", input_dim=5, d_model=16, n_layers=2, n_heads=4, memory_length=4
    ).eval()
    seen = _attention_inputs(backbone)
    n_steps, n_envs = 9, 2
    xs = torch.randn(n_steps, n_envs, 5)
    starts = torch.zeros(n_steps, n_envs, dtype=torch.bool)
    starts[0] = True
    starts[6, 1] = True  # env 1 starts a new episode
    state = backbone.initial_state(n_envs)
    recorded, outputs = [], []
    with torch.no_grad():
        plain, _ = backbone(xs, backbone.initial_state(n_envs), starts)  # no recorder: fused path
        seen.clear()
        for t in range(n_steps):
            with AttentionRecorder() as recorder:
                out = backbone.run(xs[t : t + 1], state, starts[t : t + 1], stats=stats)
            state = out.state
            outputs.append(out.output)
            recorded += recorder.calls

    assert len(recorded) == 2 * n_steps  # one call per layer and step
    calls = [c for module_calls in seen.values() for c in module_calls]
    assert len(calls) == len(recorded)
    for call in recorded:
        weights = call.weights.double()  # (B, H, 1, K)
        allowed = call.allowed[:, None]  # (B, T, K) -> (B, 1, 1, K)
        assert torch.allclose(weights.sum(-1), torch.ones((), dtype=torch.float64), atol=1e-6)
        assert torch.all(weights.masked_select(~allowed) == 0)
    # Recompute each attention output from the recorded weights and the call's own values.
    for module in backbone.modules():
        if not isinstance(module, RelativeMultiHeadAttention):
            continue
        mine = [c for c in recorded if c.module is module]
        for call, (args, output) in zip(mine, seen[id(module)], strict=True):
            _, _, memory_values, _, values, _ = args
            value = torch.cat((memory_values, values), dim=1).double()  # (B, K, D)
            b, k, _ = value.shape
            heads = value.view(b, k, module.n_heads, -1).transpose(1, 2)  # (B, H, K, E)
            attended = (call.weights.double() @ heads).transpose(1, 2).reshape(b, 1, -1)
            expected = torch.nn.functional.linear(
                attended, module.out.weight.double(), module.out.bias.double()
            )
            scale = expected.abs().max()
            assert (output.double() - expected).abs().max() <= 1e-5 * scale
    # Recording does not change what the backbone computes.
    stepped = torch.cat(outputs)
    assert (stepped - plain).abs().max() <= 1e-5 * plain.abs().max()


def test_recorders_do_not_nest() -> None:
    with AttentionRecorder(), pytest.raises(RuntimeError, match="already active"):
        AttentionRecorder().__enter__()


# ---------------------------------------------------------------------------- absolute steps


def test_absolute_mapping_follows_the_window_and_stops_at_the_episode_start() -> None:
    # 4 memory slots and the step itself; step 2 of an episode may see slots 2, 3 (steps 0, 1)
    weights = np.array([[0.0, 0.0, 0.2, 0.3, 0.5]])  # (H=1, K=5)
    allowed = np.array([False, False, True, True, True])
    row, ok = absolute_row(weights, allowed, step=2, n_steps=6)
    assert row.tolist() == [[pytest.approx(0.2), pytest.approx(0.3), 0.5, 0.0, 0.0, 0.0]]
    assert ok.tolist() == [True, True, True, False, False, False]
    # further into the episode the window slides: step 5 sees steps 1..5
    row, ok = absolute_row(np.full((1, 5), 0.2), np.ones(5, bool), step=5, n_steps=6)
    assert ok.tolist() == [False, True, True, True, True, True]
    # an allowed key before the episode's start is a leak, not something to draw
    with pytest.raises(RuntimeError, match="before its episode's start"):
        absolute_row(weights, np.ones(5, bool), step=2, n_steps=6)


def test_episode_maps_start_at_each_episode_start(tmp_path: Path) -> None:
    # Memory (3 slots) shorter than an episode (4 steps); the second episode's first step must
    # attend to itself only, although the memory still holds the first episode's steps.
    run_dir = _train_tiny(tmp_path)
    result = inspect_run(run_dir, episodes=2, out_dir=tmp_path / "out", echo=lambda _: None)
    for index in range(2):
        data = np.load(tmp_path / "out" / f"episode_{index}.npz")
        attention, attendable = data["attention"], data["attendable"]  # (L, H, N, N), (N, N)
        n = attendable.shape[0]
        assert attention.shape[:2] == (2, 2) and n == len(data["rewards"])
        expected = np.tril(np.ones((n, n), bool)) & ~np.tril(np.ones((n, n), bool), -4)
        assert np.array_equal(attendable, expected)  # itself and the 3 steps before, in-episode
        assert np.allclose(attention.sum(-1), 1.0, atol=1e-5)
        assert np.all(attention[..., ~attendable] == 0)
        assert attention[:, :, 0, 0] == pytest.approx(1.0)  # step 0 sees only itself
    assert result.summary["episodes"] == 2


def test_a_critic_with_its_own_memory_has_its_layers_recorded_by_name(tmp_path: Path) -> None:
    policy = dict(TINY["policy"], critic_memory="separate")
    run_dir = _train_tiny(tmp_path, policy=policy)
    inspect_run(run_dir, episodes=1, out_dir=tmp_path / "out", echo=lambda _: None)
    data = np.load(tmp_path / "out" / "episode_0.npz")
    assert list(data["layers"]) == [
        "actor/layer0",
        "actor/layer1",
        "critic/layer0",
        "critic/layer1",
    ]
    assert np.allclose(data["attention"].sum(-1), 1.0, atol=1e-5)


# ---------------------------------------------------------------------------- files and video


@pytest.mark.slow  # trains, then encodes videos
def test_cli_writes_maps_traces_summary_data_and_one_video_frame_per_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import imageio.v2 as imageio
    import imageio_ffmpeg

    run_dir = _train_tiny(tmp_path)
    out = tmp_path / "inspect"
    argv = ["inspect", str(run_dir), "--episodes", "2", "--video", "--out", str(out), "--per-head"]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    for index in range(2):
        for suffix in ("_attention.png", "_traces.png", ".npz", ".mp4"):
            assert (out / f"episode_{index}{suffix}").stat().st_size > 0
            assert f"episode_{index}{suffix}" in printed
        data = np.load(out / f"episode_{index}.npz")
        frames, _ = imageio_ffmpeg.count_frames_and_secs(str(out / f"episode_{index}.mp4"))
        assert frames == len(data["rewards"]) == len(data["values"])
        frame = imageio.get_reader(out / f"episode_{index}.mp4").get_data(0)
        assert frame.ndim == 3 and frame.shape[2] == 3 and frame.std() > 0
        assert int(data["cue_step"]) == 0  # the passive T-maze shows its cue first
        assert data["action_probs"].sum(-1) == pytest.approx(np.ones(len(data["rewards"])))
        assert "trace/layer0/gate_attention" in data.files
    summary = (out / "summary.json").read_text()
    assert '"episodes": 2' in summary
    assert (out / "summary.png").stat().st_size > 0


@pytest.mark.parametrize("env_id", list(NO_RGB_ENVS))
@pytest.mark.filterwarnings(
    "ignore:.*RGB-array rendering should return"
)  # the blank env, on purpose
def test_env_without_rgb_array_gets_the_plots_and_a_message(tmp_path: Path, env_id: str) -> None:
    run_dir = _train_tiny(tmp_path, env={**TINY["env"], "id": env_id})
    messages: list[str] = []
    result = inspect_run(
        run_dir, episodes=2, video=True, out_dir=tmp_path / "out", echo=messages.append
    )
    names = {p.name for p in result.files}
    for index in range(2):
        assert {f"episode_{index}_attention.png", f"episode_{index}_traces.png"} <= names
        assert (tmp_path / "out" / f"episode_{index}.npz").exists()
    assert not list((tmp_path / "out").glob("*.mp4"))
    reason = NO_RGB_ENVS[env_id][0]
    assert any(reason in m and "plots and data only" in m for m in messages), messages


def test_recurrent_backbone_records_state_norms_and_says_what_is_missing(tmp_path: Path) -> None:
    policy = {"backbone": "lstm", "d_model": 16}
    run_dir = _train_tiny(tmp_path, policy=policy)
    messages: list[str] = []
    result = inspect_run(run_dir, episodes=1, out_dir=tmp_path / "out", echo=messages.append)
    assert "episode_0_attention.png" not in {p.name for p in result.files}
    data = np.load(tmp_path / "out" / "episode_0.npz")
    assert "attention" not in data.files
    norms = [k for k in data.files if k.startswith("trace/state/")]
    assert norms and all(np.all(data[k] >= 0) for k in norms)
    assert any(m.startswith("attention weights:") and "'lstm'" in m for m in messages)
    assert any(m.startswith("gates:") for m in messages)


def test_recurrent_ppo_run_records_its_lstm_and_replays_as_predict_acts(tmp_path: Path) -> None:
    """sb3-contrib's RecurrentPPO (``algo: recurrent_ppo``): the recording threads the LSTM
    states as the algorithm's own ``predict`` does: the same actor state after every step,
    the same greedy actions."""
    run_dir = _train_tiny(
        tmp_path,
        algo="recurrent_ppo",
        ppo=None,
        policy={"backbone": "lstm", "d_model": 16},
        recurrent_ppo={"n_steps": 16, "batch_size": 32, "n_epochs": 1},
    )
    messages: list[str] = []
    result = inspect_run(run_dir, episodes=2, out_dir=tmp_path / "out", echo=messages.append)
    assert "episode_0_attention.png" not in {p.name for p in result.files}
    assert any(m.startswith("attention weights:") and "RecurrentPPO" in m for m in messages)
    model = RecurrentPPO.load(run_dir / "checkpoints" / "final.zip")
    for index in range(result.summary["episodes"]):
        data = np.load(tmp_path / "out" / f"episode_{index}.npz")
        steps = len(data["rewards"])
        assert data["hidden/output"].shape == (steps, 16)
        assert data["action_probs"].sum(-1) == pytest.approx(np.ones(steps))
        assert all(np.all(data[f"trace/state/actor_{n}_norm"] > 0) for n in ("h", "c"))
        state, start, predicted = None, np.ones(1, dtype=bool), []
        for t in range(steps):
            action, state = model.predict(data["obs"][t][None], state, start, deterministic=True)
            predicted.append(int(action[0]))
            start = np.zeros(1, dtype=bool)
            assert data["hidden/output"][t] == pytest.approx(state[0][-1, 0], abs=1e-6)
        assert predicted == [int(a) for a in data["actions"]]
    probed = inspect_run(
        run_dir, probe="cue", episodes=8, out_dir=tmp_path / "probe", echo=lambda _: None
    )
    assert "output" in probed.summary["layers"]


def test_bad_target_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["inspect", str(tmp_path / "nowhere")]) == 1
    assert "neither a run directory nor a checkpoint file" in capsys.readouterr().err


@pytest.mark.slow  # trains a run on 84x84 pixels and records a video
@pytest.mark.skipif(
    importlib.util.find_spec("memory_gym") is None, reason="memory-gym is not installed"
)
def test_video_of_a_memory_gym_task_has_one_rgb_frame_per_step(tmp_path: Path) -> None:
    import imageio_ffmpeg

    env = {"id": "txrl/memorygym-MysteryPath-Grid-v0", "kwargs": {"reset_params": {"max_steps": 12}},
           "n_envs": 2}  # fmt: skip
    run_dir = _train_tiny(tmp_path, env=env, policy={**TINY["policy"], "encoder": "cnn"})
    result = inspect_run(run_dir, episodes=1, video=True, out_dir=tmp_path / "out", echo=print)
    assert "episode_0.mp4" in {p.name for p in result.files}
    data = np.load(tmp_path / "out" / "episode_0.npz")
    frames, _ = imageio_ffmpeg.count_frames_and_secs(str(tmp_path / "out" / "episode_0.mp4"))
    assert frames == len(data["rewards"]) <= 12


def test_minigrid_episodes_record_every_step_that_showed_the_object(tmp_path: Path) -> None:
    """MiniGrid-Memory reports ``cue_in_view`` on every observation; the record keeps each
    step whose observation showed the start room's object, the first of them the cue step."""
    env = {"id": "txrl/MiniGrid-MemoryS7-v0", "kwargs": {"actions": ["left", "right", "forward"]},
           "n_envs": 2}  # fmt: skip
    run_dir = _train_tiny(tmp_path, env=env)
    inspect_run(run_dir, episodes=4, deterministic=False, out_dir=tmp_path / "out",
                echo=lambda _: None)  # fmt: skip
    looked = 0
    for path in sorted((tmp_path / "out").glob("episode_*.npz")):
        data = np.load(path)
        sightings, steps = data["cue_sightings"].tolist(), len(data["rewards"])
        assert sightings == sorted(set(sightings)) and all(0 <= s < steps for s in sightings)
        cue_step = int(data["cue_step"])
        if sightings:
            looked += 1
            assert cue_step == sightings[0]
        else:
            assert cue_step in (-1, steps)  # never seen, or first seen on the terminal step
    assert looked > 0
