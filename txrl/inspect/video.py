"""MP4 video of a recorded episode: per step, the env's frame beside the step's attention row
and its gates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from txrl.inspect.episode import EpisodeRecord, InspectError
from txrl.inspect.plots import CUE_COLOUR, DRAWS, episode_title
from txrl.plotting import figure_class

VIDEO_FPS = 4  # when the env's metadata names no render_fps


def _video_frame(fig: Any, record: EpisodeRecord, step: int) -> np.ndarray:
    """The env frame beside the step's attention row and gate bars, as an RGB array."""
    fig.clear()
    left, middle, right = fig.subplots(1, 3, width_ratios=(1.2, 1.6, 1.0))
    left.imshow(record.frames[step], interpolation="nearest")
    left.set_axis_off()
    reward = record.rewards[step]
    left.set_title(
        f"step {step}: {record.action_name(step)}, value {record.values[step]:+.2f}, "
        f"reward {reward:+.2f}",
        fontsize=9,
    )
    if record.has_attention:
        # over steps: the weight of the memory entry holding each step (its key, or the
        # compressed slot that summarises it); linformer's over its projected slots
        if record.projected is not None:
            rows, xlabel = record.projected[:, :, step], "projected slot"
        else:
            rows, xlabel = record.held_weights(step), "attended step"
        for layer, name in enumerate(record.layers):
            row = rows[layer].mean(axis=0)
            middle.bar(np.arange(len(row)), row, alpha=0.6, label=name)
        middle.set_ylim(0, 1)
        middle.set_xlim(-0.5, rows.shape[-1] - 0.5)
        middle.set_xlabel(xlabel)
        middle.set_title("attention of this step (heads averaged)", fontsize=9)
        if record.cue_step is not None and record.projected is None:
            middle.axvline(record.cue_step, color=CUE_COLOUR, linestyle="--", label="cue step")
        middle.legend(fontsize=7, loc="upper right")
    else:
        middle.text(0.5, 0.5, "no attention weights", ha="center", transform=middle.transAxes)
        middle.set_axis_off()
    names = record.gate_names or [n for n in record.traces if n.startswith("state/")]
    if names:
        values = [record.traces[n][step] for n in names]
        right.barh(range(len(names)), values, color="tab:purple")
        right.set_yticks(range(len(names)), [n.replace("/", "\n", 1) for n in names], fontsize=7)
        right.invert_yaxis()
        if record.gate_names:
            right.set_xlim(0, 1)
        right.set_title(
            "gate activations (mean; see traces.png)" if record.gate_names else "state norms",
            fontsize=9,
        )
    else:
        right.set_axis_off()
    decision = "  <- decision step" if step == record.decision_step else ""
    fig.suptitle(f"{episode_title(record)}{decision}", fontsize=10)
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()


def write_video(record: EpisodeRecord, path: Path, *, fps: int = VIDEO_FPS) -> None:
    """An MP4 with one frame per step (imageio's ffmpeg writer, as gymnasium's RecordVideo)."""
    import os

    try:
        import imageio.v2 as imageio
        import imageio_ffmpeg  # noqa: F401  (the ffmpeg binary imageio writes MP4 with)
    except ImportError as e:
        raise ImportError(
            "txrl inspect --video writes MP4 with imageio and imageio-ffmpeg: "
            "pip install 'txrl[video]'"
        ) from e
    if len(record.frames) != record.steps:
        raise InspectError(f"{len(record.frames)} frames recorded for {record.steps} steps")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    Figure = figure_class(DRAWS)
    # 960 x 320 pixels: multiples of 16, as H.264 wants
    fig = Figure(figsize=(9.6, 3.2), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    tmp = path.with_name(f".{path.stem}.partial{path.suffix}")
    writer = imageio.get_writer(tmp, fps=fps, codec="libx264", quality=7, macro_block_size=16)
    try:
        for step in range(record.steps):
            writer.append_data(_video_frame(fig, record, step))
    finally:
        writer.close()
    os.replace(tmp, path)
