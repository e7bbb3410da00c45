"""``txrl inspect``'s pictures read without the README, distinct episodes, and the probe run."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from txrl.agents import recipe
from txrl.config import load_train_config
from txrl.envs.tmaze import TMazeEnv
from txrl.inspect import EpisodeRecord, inspect_run, probe_run, record_episodes
from txrl.inspect.layers import GATE_MEANINGS
from txrl.inspect.plots import draw_summary, plot_attention_map, plot_summary, plot_traces
from txrl.inspect.probe import OBSERVATION
from txrl.nn import gates
from txrl.run.checkpoint import read_checkpoint_config, resolve_checkpoint
from txrl.run.evaluate import load_checkpoint_model, make_checkpoint_eval_env
from txrl.run.train import train

from .test_inspect import TINY


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny two-layer GTrXL (GRU gates) on a passive T-maze of length 3."""
    root = tmp_path_factory.mktemp("views")
    (root / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    train(load_train_config(root / "tiny.yaml", []), root / "run", recipe=recipe.main)
    return root / "run"


def _record(run_dir: Path, episodes: int, **options: object) -> tuple[list[EpisodeRecord], list]:
    checkpoint = resolve_checkpoint(run_dir)
    config = read_checkpoint_config(checkpoint)
    env = make_checkpoint_eval_env(checkpoint, config, episodes=1, seed=0)
    model = load_checkpoint_model(checkpoint, config)
    try:
        recording = record_episodes(model.policy, env, episodes, **options)  # type: ignore[arg-type]
    finally:
        env.close()
    return recording.episodes, recording.missing


@pytest.fixture(scope="module")
def decided(run_dir: Path) -> EpisodeRecord:
    """An episode of the tiny run, with its decision (as the env would report a turn) placed
    on its last step and a success, so that every part of the title is drawn."""
    record = _record(run_dir, 1, seed=3)[0][0]
    return dataclasses.replace(record, decision_step=record.steps - 1, success=True)


def test_episodes_are_distinct_and_each_is_seeded_on_its_own(run_dir: Path) -> None:
    records, missing = _record(run_dir, 3, seed=10)
    # the passive T-maze offers a greedy agent two episodes, one per cue
    assert len(records) == 2 and {r.cue for r in records} == {"up", "down"}
    assert records[0].fingerprint() != records[1].fingerprint()
    assert not np.array_equal(records[0].observations["obs"], records[1].observations["obs"])
    assert any(m.startswith("episodes: 2 distinct episodes in") for m in missing)
    # with replays kept, episode k is the env reset with seed 10 + k: its cue is that draw's
    replays, _ = _record(run_dir, 6, seed=10, distinct=False)
    for k, record in enumerate(replays):
        obs, _ = TMazeEnv(length=3, active=False).reset(seed=10 + k)
        assert record.cue == ("up" if obs[1] > 0 else "down")
        assert np.array_equal(record.observations["obs"][0], obs)


def test_attention_legend_and_marks_leave_the_decision_cue_cell_visible(
    decided: EpisodeRecord, tmp_path: Path
) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.transforms import Bbox

    fig = plot_attention_map(decided, tmp_path / "a.png")
    canvas = FigureCanvasAgg(fig)
    canvas.draw()  # the layout as saved
    renderer = canvas.get_renderer()
    (legend,) = fig.legends
    box = legend.get_window_extent(renderer)
    maps = [ax for ax in fig.axes if ax.images]
    assert len(maps) == 2  # two layers
    for ax in maps:
        assert not box.overlaps(ax.get_window_extent(renderer))
        corners = [
            (decided.cue_step - 0.5, decided.decision_step - 0.5),
            (decided.cue_step + 0.5, decided.decision_step + 0.5),
        ]
        (x0, y0), (x1, y1) = ax.transData.transform(corners)
        cell = Bbox.from_extents(min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1))
        assert not box.overlaps(cell)
        for line in ax.lines:  # the step marks lie outside the axes, none on the cell
            (px, py) = line.get_transform().transform(line.get_xydata())[0]
            assert not cell.contains(px, py)
            assert not ax.get_window_extent(renderer).contains(px, py)


def test_titles_name_the_cue_the_choice_and_the_outcome(
    decided: EpisodeRecord, tmp_path: Path
) -> None:
    choice = decided.action_names[int(decided.actions[-1])]  # type: ignore[index]
    expected = [f"cue {decided.cue}", f"chose {choice} at step {decided.steps - 1}", "success"]
    for plot in (plot_attention_map, plot_traces):
        title = plot(decided, tmp_path / "p.png", index=0)._suptitle.get_text()
        assert all(part in title for part in expected), title
        assert f"return {decided.episode_return:+.2f}" in title
    failed = dataclasses.replace(decided, success=False)
    assert "failure" in plot_traces(failed, tmp_path / "f.png")._suptitle.get_text()


def test_traces_plot_one_probability_line_per_action_and_name_the_gates(
    decided: EpisodeRecord, tmp_path: Path
) -> None:
    fig = plot_traces(decided, tmp_path / "t.png")
    gates_ax, probs_ax, _ = fig.axes[:3]
    lines = {ln.get_label(): ln for ln in probs_ax.lines if not ln.get_label().startswith("_")}
    assert set(lines) == {"forward", "backward", "up", "down"}
    assert decided.action_probs is not None
    for action, name in enumerate(decided.action_names or []):
        assert np.allclose(lines[name].get_ydata(), decided.action_probs[:, action])
    labels = [line.get_label() for line in gates_ax.lines if not line.get_label().startswith("_")]
    assert labels == [
        f"layer{i}, after {part}: GRU gate z (eq. 14)"
        for i in range(2)
        for part in ("attention (g_MHA)", "MLP (g_MLP)")
    ]
    assert "0 = keep the input (identity)" in gates_ax.get_title()


@pytest.mark.parametrize("gate_class", list(GATE_MEANINGS))
def test_each_gate_meaning_says_which_activation_is_the_identity(gate_class: type) -> None:
    # Drive the gate's activation to each end with its bias and see where g(x, y) = x.
    torch.manual_seed(0)
    x, y = 0.3 * torch.randn(4, 8), 0.3 * torch.randn(4, 8)  # the bias outweighs W x, W y
    meaning = GATE_MEANINGS[gate_class][1]
    if gate_class is gates.ResidualGate:  # no bias to drive: always 1, input + update
        stats: list[torch.Tensor] = []
        with torch.no_grad():
            out = gate_class(8)(x, y, stats)
        assert torch.allclose(out, x + y) and round(float(stats[0])) == 1
        return
    for bias in (-30.0, 30.0):
        gate = gate_class(8, bias)
        stats = []
        with torch.no_grad():
            out = gate(x, y, stats)
        level = round(float(stats[0]))
        identity = torch.allclose(out, x, atol=1e-3)
        assert identity == (f"{level} = keep the input (identity)" in meaning), (level, meaning)


def test_summary_names_its_axes_groups_and_reference(tmp_path: Path) -> None:
    rows = [
        {"episode": 0, "success": True, "cue": "up", "mass": [0.9, 0.5], "uniform": 0.1},
        {"episode": 1, "success": False, "cue": "down", "mass": [0.2, 0.2], "uniform": 0.1},
    ]
    fig = draw_summary(
        {
            "episodes": 2,
            "successes": 1,
            "layers": ["layer0", "layer1"],
            "cue_mass_at_decision": rows,
        }
    )
    (ax,) = fig.axes
    assert ax.get_xlabel() == "attention layer"
    assert "cue step" in ax.get_ylabel() and "decision step" in ax.get_ylabel()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["layer0", "layer1"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    for part in ("cue up", "cue down", "success (1 episodes)", "failure (1 episodes)"):
        assert part in legend
    assert any(t.startswith("uniform attention (0.10") for t in legend)
    assert "1/2 episodes succeeded" in fig._suptitle.get_text()
    assert any("one episode" in t.get_text() for t in fig.texts)  # the caption


def test_inspect_run_writes_pictures_for_distinct_episodes_only(
    run_dir: Path, tmp_path: Path
) -> None:
    messages: list[str] = []
    result = inspect_run(run_dir, episodes=3, out_dir=tmp_path, echo=messages.append)
    names = {p.name for p in result.files}
    assert {"episode_0_traces.png", "episode_1_traces.png"} <= names
    assert "episode_2.npz" not in names and result.summary["episodes"] == 2
    first, second = (np.load(tmp_path / f"episode_{i}.npz") for i in range(2))
    assert not np.array_equal(first["obs"], second["obs"])
    assert {str(first["cue"]), str(second["cue"])} == {"up", "down"}
    assert first["hidden/layer0"].shape == (len(first["rewards"]), 16)


def test_probe_run_on_the_tiny_run_reads_the_cue_from_the_first_observation(
    run_dir: Path, tmp_path: Path
) -> None:
    result = probe_run(run_dir, "cue", episodes=16, out_dir=tmp_path, echo=lambda _: None)
    assert [p.name for p in result.files] == ["probe.csv", "probe.json", "probe.png"]
    with (tmp_path / "probe.csv").open() as f:
        rows = list(csv.DictReader(f))
    layers = {row["layer"] for row in rows}
    assert layers == {"layer0", "layer1", "output", OBSERVATION}
    observation = {int(r["step"]): float(r["accuracy"]) for r in rows if r["layer"] == OBSERVATION}
    assert observation[0] == 1.0  # the passive T-maze shows the cue at step 0
    assert all(0.0 <= float(r["chance"]) <= 1.0 for r in rows)
    assert result.summary["target"] == "cue" and sum(result.summary["counts"]) == 16


def test_decision_focus_names_where_each_head_looks_hardest_and_how_hard(
    decided: EpisodeRecord, tmp_path: Path
) -> None:
    """Per layer and head: the steps back of the largest weight in the decision step's row
    and that weight; what ``summary.json`` lists per episode."""
    t = decided.steps  # the tiny T-maze's episode: 4 steps or more
    d = t - 2  # a decision before the last step, whose row must not be read
    layers = len(decided.layers)
    attention = np.zeros((layers, 2, t, t), dtype=np.float32)  # (L, H, T, T)
    attention[:, 0, d, d] = 1.0  # head 0: all on the decision step itself (recency)
    attention[:, 1, d, [d - 3, d - 1]] = [0.7, 0.3]  # head 1: mostly three steps back
    attention[:, :, t - 1, 0] = 1.0  # the step after the decision
    record = dataclasses.replace(
        decided, attention=attention, decision_step=d, cue_step=d - 3, success=False
    )
    steps_back, weight = record.decision_focus()  # type: ignore[misc]
    assert steps_back.tolist() == [[0, 3]] * layers
    np.testing.assert_allclose(weight, [[1.0, 0.7]] * layers, rtol=1e-6)
    assert dataclasses.replace(record, decision_step=None).decision_focus() is None
    assert dataclasses.replace(record, attention=None).decision_focus() is None

    summary = plot_summary([record], tmp_path / "summary.png")
    (row,) = summary["decision_focus"]
    assert row == {
        "episode": 0,
        "success": False,
        "cue_step": d - 3,
        "decision_step": d,
        "steps_back": [[0, 3]] * layers,
        "weight": [[1.0, 0.7]] * layers,
    }


def test_sightings_mass_reads_every_look_at_the_cue_up_to_the_decision(
    decided: EpisodeRecord, tmp_path: Path
) -> None:
    """The first sighting's mass misses a memory that keeps a later look; the sightings mass
    counts every step that showed the cue up to the decision, against uniform's share."""
    t = decided.steps
    d = t - 2
    layers = len(decided.layers)
    attention = np.zeros((layers, 2, t, t), dtype=np.float32)
    attention[:, 0, d, 1] = 1.0  # head 0: all on the second look
    attention[:, 1, d, [0, d]] = [0.25, 0.75]  # head 1: a quarter on the first look
    attendable = np.tril(np.ones((t, t), dtype=bool))
    record = dataclasses.replace(
        decided, attention=attention, attendable=attendable, decision_step=d, cue_step=0,
        cue_sightings=(0, 1, t - 1),  # the last look comes after the decision: not counted
    )  # fmt: skip
    np.testing.assert_allclose(record.cue_mass_at_decision(), [0.125] * layers)
    mass, uniform = record.sightings_mass_at_decision()  # type: ignore[misc]
    np.testing.assert_allclose(mass, [0.625] * layers)
    assert uniform == pytest.approx(2 / (d + 1))
    assert dataclasses.replace(record, cue_sightings=None).sightings_mass_at_decision() is None
    (row,) = plot_summary([record], tmp_path / "summary.png")["cue_mass_at_decision"]
    assert row["sightings"] == 2 and row["sightings_mass"] == pytest.approx([0.625] * layers)
    (row,) = plot_summary(
        [dataclasses.replace(record, cue_sightings=None)], tmp_path / "again.png"
    )["cue_mass_at_decision"]
    assert "sightings" not in row and "sightings_mass" not in row


def test_the_summary_lists_each_episodes_choices_for_discrete_actions(
    decided: EpisodeRecord, tmp_path: Path
) -> None:
    """How often each action was taken and the first step's probabilities, per episode: what
    shows a policy that answers the same whatever it sees, with or without attention."""
    assert decided.action_probs is not None
    n_actions = decided.action_probs.shape[1]
    actions = np.zeros(decided.steps, dtype=np.int64)
    actions[-1] = n_actions - 1
    probs = np.full((decided.steps, n_actions), 1.0 / n_actions, dtype=np.float32)
    record = dataclasses.replace(decided, actions=actions, action_probs=probs, attention=None)
    summary = plot_summary([record], tmp_path / "summary.png")
    (row,) = summary["actions"]
    assert row["episode"] == 0 and row["steps"] == decided.steps
    assert row["counts"] == [decided.steps - 1] + [0] * (n_actions - 2) + [1]
    assert row["first_probs"] == [round(1.0 / n_actions, 4)] * n_actions
    assert row["return"] == round(decided.episode_return, 6)
    continuous = dataclasses.replace(record, action_probs=None)
    assert plot_summary([continuous], tmp_path / "summary2.png")["actions"] == []
