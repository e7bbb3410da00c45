"""``txrl inspect`` beyond the TrXL family: what the compressive, adaptive-span, sparse,
Linformer, linear and Performer backbones hand out per step, and the maps of tiny runs."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from txrl import cli, make_backbone
from txrl.inspect import EpisodeRecord
from txrl.inspect.layers import (
    KernelWeights,
    KeyLayout,
    absolute_row,
    attention_layers,
    compressed_slots,
    key_layout,
)
from txrl.nn.attention import AttentionRecorder, RecordedAttention

from .test_inspect import TINY, _train_tiny

M = 4  # memory slots of the window backbones
#: backbone -> its settings beside the shared ones (2 layers, 2 heads, width 16)
SETTINGS: dict[str, dict[str, Any]] = {
    "compressive": {
        "memory_length": 3,
        "compressed_length": 2,
        "compression_rate": 2,
        "compression": "pool",
    },
    "adaptive_span": {"memory_length": M, "span_ramp": 1.0},
    "sparse_strided": {"memory_length": M},
    "sparse_fixed": {"memory_length": M},
    "linformer": {"memory_length": M, "proj_dim": 3},
    "linear": {},
    "performer": {"n_features": 8},
}
LAYERS, HEADS, STEPS, RESTART = 2, 2, 14, 8  # env 1 starts a new episode at step RESTART


def _backbone(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return make_backbone(
        name, input_dim=5, d_model=16, n_layers=LAYERS, n_heads=HEADS, **SETTINGS[name]
    ).eval()


def _starts() -> torch.Tensor:
    starts = torch.zeros(STEPS, 2, dtype=torch.bool)
    starts[0] = True
    starts[RESTART, 1] = True
    return starts


def _step_by_step(
    backbone: torch.nn.Module, xs: torch.Tensor, record: bool = True
) -> tuple[list[list[RecordedAttention]], torch.Tensor, list[Any]]:
    """Run ``xs`` (T, B, I) one step at a time from a fresh memory, recording each step's
    attention calls; returns them, the outputs (T, B, D) and the state after each step."""
    starts = _starts()
    state = backbone.initial_state(xs.shape[1])
    calls, outputs, states = [], [], []
    hooks = KernelWeights(backbone).register() if record else []
    try:
        with torch.no_grad():
            for t in range(xs.shape[0]):
                if record:
                    with AttentionRecorder() as recorder:
                        out = backbone.run(xs[t : t + 1], state, starts[t : t + 1], stats=True)
                    calls.append(recorder.calls)
                else:
                    out = backbone.run(xs[t : t + 1], state, starts[t : t + 1])
                state = out.state
                outputs.append(out.output)
                states.append(state)
    finally:
        for hook in hooks:
            hook.remove()
    return calls, torch.cat(outputs), states


def _episode_step(t: int, env: int) -> int:
    return t - RESTART if env == 1 and t >= RESTART else t


@pytest.mark.parametrize("name", list(SETTINGS))
def test_each_step_records_one_distribution_per_layer_and_head_within_the_episode(
    name: str,
) -> None:
    backbone = _backbone(name)
    layout = key_layout(backbone)
    layer_of = attention_layers(backbone)
    assert layer_of is not None and sorted(layer_of.values()) == ["layer0", "layer1"]
    xs = torch.randn(STEPS, 2, 5)
    calls, outputs, _ = _step_by_step(backbone, xs)
    for t, step_calls in enumerate(calls):
        assert [layer_of[id(c.module)] for c in step_calls] == ["layer0", "layer1"]
        for call in step_calls:
            weights, allowed = call.weights.double(), call.allowed  # (B, H, 1, K), (B, 1, K)
            k = weights.shape[-1]
            assert weights.shape[:3] == (2, HEADS, 1) and allowed.shape == (2, 1, k)
            expected_k = {
                "compressive": SETTINGS["compressive"]["compressed_length"] + 1 + 3 + 1,
                "projected": SETTINGS["linformer"]["proj_dim"],
                "kernel": t + 1,  # every step of env 0's episode so far
            }.get(layout.kind, M + 1)
            if name == "adaptive_span":  # the slots beyond every head's span are dropped
                assert 1 <= k <= M + 1
            else:
                assert k == expected_k, (t, k)
            assert torch.all(weights >= 0)
            assert torch.all(weights.masked_select(~allowed[:, None]) == 0)
            total = weights.sum(-1)
            if layout.kind == "kernel":  # phi^T z / (phi^T z + eps): 1 up to eps
                assert torch.all((total <= 1.0 + 1e-6) & (total >= 1.0 - 1e-4))
            else:
                assert torch.allclose(total, torch.ones((), dtype=torch.float64), atol=1e-5)
            for env in range(2):  # no allowed key lies before the env's episode start
                step, ok = _episode_step(t, env), allowed[env, 0].numpy()
                row = weights[env, :, 0].numpy()
                if layout.kind == "projected":
                    assert ok.all()
                    continue
                window = 0
                if layout.kind == "compressive":
                    window = layout.compressed_length + 1
                    compressed_slots(ok[: window - 1], step, layout, STEPS)
                absolute_row(row[:, window:], ok[window:], step, STEPS)
    # recording takes another path (explicit weights, hooks) to the same outputs
    _, plain, _ = _step_by_step(backbone, xs, record=False)
    assert (outputs - plain).abs().max() <= 1e-5 * plain.abs().max()


@pytest.mark.parametrize("name", list(SETTINGS))
def test_what_came_before_the_episode_does_not_change_its_weights(name: str) -> None:
    """Other inputs before env 1's new episode leave every weight of that episode as it was:
    nothing outside the episode is attended to (Linformer's projected slots included)."""
    backbone = _backbone(name)
    xs = torch.randn(STEPS, 2, 5)
    other = xs.clone()
    other[:RESTART, 1] = torch.randn(RESTART, 5)
    first, _, _ = _step_by_step(backbone, xs)
    second, _, _ = _step_by_step(backbone, other)
    for t in range(RESTART, STEPS):
        for a, b in zip(first[t], second[t], strict=True):
            assert a.weights.shape == b.weights.shape
            assert torch.allclose(a.weights[1], b.weights[1], atol=1e-6)
            assert torch.equal(a.allowed[1], b.allowed[1])


@pytest.mark.parametrize("name", ["linear", "performer"])
def test_linear_attentions_equivalent_weights_reproduce_its_output(name: str) -> None:
    """h_i = sum_j a_ij v_j with the recorded a_ij and each step's own value v_j."""
    backbone = _backbone(name)
    seen: list[tuple[torch.Tensor, torch.Tensor]] = []  # layer 0's (input z, output)
    attention = backbone.blocks[0].attention
    hook = attention.register_forward_hook(lambda m, args, out: seen.append((args[0], out[0])))
    try:
        calls, _, _ = _step_by_step(backbone, torch.randn(STEPS, 2, 5))
    finally:
        hook.remove()
    values = [attention.project(z)[2] for z, _ in seen]  # (B, H, 1, E) per step
    for t, ((_, output), step_calls) in enumerate(zip(seen, calls, strict=True)):
        weights = step_calls[0].weights  # (B, H, 1, K): the last K steps
        k = weights.shape[-1]
        v = torch.cat(values[t + 1 - k : t + 1], dim=2)  # (B, H, K, E)
        attended = (weights @ v).transpose(1, 2).reshape(2, 1, -1)  # (B, 1, D)
        expected = attention.out(attended)
        assert torch.allclose(output, expected, atol=1e-5 * output.abs().max().item())


def test_a_compressed_slot_holds_the_steps_its_mapping_names() -> None:
    """With mean pooling, each compressed slot is the mean of the layer inputs of the c
    steps that :func:`compressed_slots` says it summarises."""
    backbone = _backbone("compressive")
    layout = key_layout(backbone)
    assert layout == KeyLayout("compressive", 3, 2, 2)
    calls, _, states = _step_by_step(backbone, torch.randn(STEPS, 2, 5))
    inputs = torch.stack([s.hidden[:, :, -1] for s in states])  # (T, B, L, D) each step's
    checked = 0
    for t in range(1, STEPS):
        before = states[t - 1]  # the memory step t attends over
        for env in range(2):
            allowed = calls[t][0].allowed[env, 0, : layout.compressed_length].numpy()
            slots = compressed_slots(allowed, _episode_step(t, env), layout, STEPS)
            start = t - _episode_step(t, env)
            for slot in set(slots[slots >= 0].tolist()):
                held = np.flatnonzero(slots == slot) + start  # absolute steps of the run
                assert len(held) == layout.compression_rate
                mean = inputs[held, env].mean(0)  # (L, D)
                assert torch.allclose(before.compressed[env, :, slot], mean, atol=1e-5)
                checked += 1
    assert checked > 10


def test_a_compressed_slot_the_count_does_not_explain_is_an_error() -> None:
    layout = KeyLayout("compressive", memory_length=3, compressed_length=2, compression_rate=2)
    # step 7: 4 evicted steps, 2 compressions, both kept
    assert compressed_slots(np.array([True, True]), 7, layout, 9).tolist() == [
        0, 0, 1, 1, -1, -1, -1, -1, -1
    ]  # fmt: skip
    with pytest.raises(RuntimeError, match="was not cleared at the episode start"):
        compressed_slots(np.array([False, True]), 2, layout, 9)


# ---------------------------------------------------------------------------- tiny runs


@pytest.mark.parametrize("name", list(SETTINGS))
def test_inspect_draws_each_backbones_map_and_probes_its_layers(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = dict(SETTINGS[name])
    policy = {
        **TINY["policy"],
        "backbone": name,
        "inapplicable": "drop",
        "memory_length": settings.pop("memory_length", TINY["policy"]["memory_length"]),
        "backbone_kwargs": settings,
    }
    run_dir = _train_tiny(tmp_path, policy=policy, budget=32)
    out = tmp_path / "out"
    assert cli.main(["inspect", str(run_dir), "--episodes", "1", "--out", str(out)]) == 0
    assert "attention weights: not recorded" not in capsys.readouterr().out
    assert (out / "episode_0_attention.png").stat().st_size > 0
    data = np.load(out / "episode_0.npz")
    n = len(data["rewards"])
    if name == "linformer":
        assert data["projected"].shape == (2, 2, n, 3) and "attention" not in data.files
        assert np.allclose(data["projected"].sum(-1), 1.0, atol=1e-5)
    else:
        assert data["attention"].shape == (2, 2, n, n)
    if name == "compressive":
        assert data["compressed"].shape == (2, 2, n, 2)
        assert data["compressed_slot"].shape == (n, n)
    probe = ["--probe", "cue", "--episodes", "8", "--out", str(tmp_path / "probe")]
    assert cli.main(["inspect", str(run_dir), *probe]) == 0
    assert "probe 'cue'" in capsys.readouterr().out
    assert (tmp_path / "probe" / "probe.png").stat().st_size > 0


# ---------------------------------------------------------------------------- the reading


def _compressed_episode() -> EpisodeRecord:
    """Six steps, one layer, one head: from step 4 on, steps 0 and 1 sit in compressed slot
    1 (of 2) and the raw window holds the last three steps; the decision at step 5 gives the
    slot holding the cue (step 0) weight 0.6."""
    n = 6
    attention = np.zeros((1, 1, n, n), np.float32)
    attendable = np.zeros((n, n), bool)
    for s in range(n):
        attendable[s, max(0, s - 2) : s + 1] = True
        attention[0, 0, s, attendable[s]] = 1.0 / attendable[s].sum()
    compressed = np.zeros((1, 1, n, 2), np.float32)
    slot = np.full((n, n), -1, np.int32)
    slot[4:, :2] = 1
    attention[0, 0, 5] *= 0.4  # 0.4 over the window at the decision, 0.6 on the slot
    compressed[0, 0, 5, 1] = 0.6
    return EpisodeRecord(
        actions=np.zeros(n, np.int64),
        rewards=np.zeros(n, np.float32),
        values=np.zeros(n, np.float32),
        action_probs=None,
        attention=attention,
        attendable=attendable,
        layers=["layer0"],
        traces={},
        success=True,
        cue_step=0,
        decision_step=5,
        cue="up",
        cue_sightings=(0, 1),
        compressed=compressed,
        compressed_slot=slot,
        attention_kind="compressive",
    )


def test_the_cue_held_in_a_compressed_slot_gets_the_slots_weight() -> None:
    record = _compressed_episode()
    assert record.cue_mass_at_decision() == pytest.approx([0.6])
    assert record.keys_at(5) == 3 + 1  # three steps of the window and one slot
    sightings, focus = record.sightings_mass_at_decision(), record.decision_focus()
    assert sightings is not None and focus is not None
    mass, uniform = sightings  # both sightings sit in the one slot, counted once
    assert mass == pytest.approx([0.6]) and uniform == pytest.approx(1 / 4)
    steps_back, weight = focus  # (L, H): the slot, from the oldest step it summarises
    assert steps_back.tolist() == [[5]] and weight[0, 0] == pytest.approx(0.6)


@pytest.mark.parametrize("per_head", [False, True])
def test_maps_draw_raw_and_compressed_memory_or_projected_slots(
    per_head: bool, tmp_path: Path
) -> None:
    from txrl.inspect.plots import plot_attention_map, plot_summary

    record = _compressed_episode()
    fig = plot_attention_map(record, tmp_path / "c.png", per_head=per_head)
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    columns = 2 * (1 + per_head)  # heads averaged, and one head with per_head
    assert len(titles) == columns and sum("compressed memory" in t for t in titles) == columns / 2
    summary = plot_summary([record], tmp_path / "s.png")
    assert summary["cue_mass_at_decision"][0]["uniform"] == pytest.approx(1 / 4)

    projected = dataclasses.replace(
        record, attention=None, attendable=None, compressed=None, compressed_slot=None,
        projected=np.full((1, 1, 6, 3), 1 / 3, np.float32), attention_kind="projected",
    )  # fmt: skip
    fig = plot_attention_map(projected, tmp_path / "p.png", per_head=per_head)
    assert all("projected slot" in ax.get_xlabel() for ax in fig.axes if ax.get_title())
    assert plot_summary([projected], tmp_path / "ps.png")["cue_mass_at_decision"] == []


def test_video_frames_draw_the_held_or_projected_row(tmp_path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from txrl.inspect.video import _video_frame
    from txrl.plotting import figure_class

    frames = [np.zeros((8, 8, 3), np.uint8)] * 6
    record = dataclasses.replace(_compressed_episode(), frames=frames)
    projected = dataclasses.replace(
        record, attention=None, attendable=None, compressed=None, compressed_slot=None,
        projected=np.full((1, 1, 6, 3), 1 / 3, np.float32), attention_kind="projected",
    )  # fmt: skip
    fig = figure_class("test")(figsize=(9.6, 3.2), dpi=100)
    FigureCanvasAgg(fig)
    for episode, bars, width in ((record, 6, 0.6), (projected, 3, 1 / 3)):
        image = _video_frame(fig, episode, 5)
        assert image.shape == (320, 960, 3)
        middle = fig.axes[1]
        heights = [patch.get_height() for patch in middle.patches]
        assert len(heights) == bars and max(heights) == pytest.approx(width)
