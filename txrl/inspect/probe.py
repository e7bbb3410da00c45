"""Linear probes: what each memory layer's output holds about a target, step by step.

A probe is a softmax (multinomial logistic) regression from one layer's output at one step
to a discrete per-episode target (the T-maze's cue, the episode's success, an ``info``
field, a past observation feature). One probe is fit per layer and per step, on standardised
features with an L2 penalty, and scored on held-out episodes: the episodes are split into
``folds`` groups and each group's steps are predicted by the probe fit on the others, so no
episode is scored by a probe that saw it. Chance is the accuracy of always answering the
most common value of the episodes scored at that step. The observation the agent acts on is probed as well,
as the memoryless control: what the current observation alone gives away needs no memory.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from txrl.inspect.episode import EpisodeRecord, InspectError
from txrl.inspect.plots import DRAWS, save_figure
from txrl.plotting import figure_class

ALIGNS = ("start", "cue", "decision")
MAX_CLASSES = 20
MIN_EPISODES = 4  # steps reached by fewer episodes than this are not scored
OBSERVATION = "observation"  # the memoryless control's name among the layers


@dataclasses.dataclass
class ProbeResult:
    """Held-out accuracy per layer and step; ``rows`` as written to ``probe.csv``."""

    target: str
    align: str
    classes: list[str]
    counts: list[int]  # episodes per class
    episodes: int  # episodes with the target (and the aligning event)
    played: int  # episodes recorded; the others lacked the target or the aligning event
    layers: list[str]
    rows: list[dict[str, Any]]  # layer, step, episodes, accuracy, chance

    def accuracy(self, layer: str) -> dict[int, float]:
        """``step -> accuracy`` of one layer."""
        return {row["step"]: row["accuracy"] for row in self.rows if row["layer"] == layer}

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ---------------------------------------------------------------------------- targets


def _obs_target(record: EpisodeRecord, spec: str, target: str) -> Any:
    """``INDEX[@STEP|@cue]`` -> the flat observation feature INDEX at that step."""
    index_text, _, step_text = spec.partition("@")
    if "obs" not in record.observations:
        raise InspectError(
            f"probe target {target!r}: obs:INDEX needs a Box observation; this env's "
            f"observation has parts {sorted(record.observations)}"
        )
    try:
        index = int(index_text)
        step = record.cue_step if step_text == "cue" else int(step_text or 0)
    except ValueError:
        raise InspectError(
            f"probe target {target!r}: write obs:INDEX, obs:INDEX@STEP or obs:INDEX@cue "
            "(INDEX, STEP integers)"
        ) from None
    flat = record.observations["obs"].reshape(record.steps, -1)
    if not 0 <= index < flat.shape[1]:
        raise InspectError(
            f"probe target {target!r}: the observation has {flat.shape[1]} features "
            f"(0..{flat.shape[1] - 1})"
        )
    if step is None or not 0 <= step < record.steps:
        return None
    return float(flat[step, index])


def target_value(record: EpisodeRecord, target: str) -> Any:
    """One episode's value of ``target`` (see [`probe_run`][txrl.inspect.probe_run]), None when it has none."""
    if target == "cue":
        return record.cue
    if target == "success":
        return record.success
    if target.startswith("info:"):
        return record.info.get(target.removeprefix("info:"))
    if target.startswith("obs:"):
        return _obs_target(record, target.removeprefix("obs:"), target)
    raise InspectError(
        f"unknown probe target {target!r}; valid: cue, success, info:KEY, obs:INDEX, "
        "obs:INDEX@STEP, obs:INDEX@cue"
    )


def check_probe(target: str, align: str) -> None:
    """Raise `InspectError` for a target or align that cannot be read, before any
    episode is played."""
    if target not in ("cue", "success") and not target.startswith(("info:", "obs:")):
        raise InspectError(
            f"unknown probe target {target!r}; valid: cue, success, info:KEY, obs:INDEX, "
            "obs:INDEX@STEP, obs:INDEX@cue"
        )
    if align not in ALIGNS:
        raise InspectError(f"probe align {align!r} is not one of {', '.join(ALIGNS)}")


def _event_step(record: EpisodeRecord, align: str) -> int | None:
    return {"start": 0, "cue": record.cue_step, "decision": record.decision_step}[align]


# ---------------------------------------------------------------------------- the fit


def fit_softmax(
    x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor, n_classes: int, l2: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """S independent L2-regularised softmax regressions, fit together (LBFGS).

    ``x`` (S, E, D) standardised features, ``y`` (E,) class indices, ``mask`` (S, E) which
    samples each regression is fit on. The summed loss has a block-diagonal Hessian, so one
    optimiser run fits each problem as if alone. Returns weights (S, D, C) and biases (S, C).
    """
    s, _, d = x.shape
    w = torch.zeros(s, d, n_classes, requires_grad=True)
    b = torch.zeros(s, 1, n_classes, requires_grad=True)
    weight = mask.float() / mask.sum(1, keepdim=True).clamp(min=1)  # (S, E)
    optimizer = torch.optim.LBFGS([w, b], max_iter=100, line_search_fn="strong_wolfe")
    labels = y.expand(s, -1)  # (S, E)

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        logits = x @ w + b  # (S, E, C)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, n_classes), labels.reshape(-1), reduction="none"
        ).view(s, -1)
        total = (loss * weight).sum() + l2 * (w * w).sum()
        total.backward()
        return total

    optimizer.step(closure)
    return w.detach(), b.detach()[:, 0]


def _standardise(x: torch.Tensor, fit: torch.Tensor) -> torch.Tensor:
    """``x`` (S, E, D) scaled by the mean and std of the ``fit`` (S, E) samples per step."""
    m = fit.float()[..., None]
    n = m.sum(1, keepdim=True).clamp(min=1)
    mean = (x * m).sum(1, keepdim=True) / n
    std = (((x - mean) ** 2 * m).sum(1, keepdim=True) / n).sqrt()
    return (x - mean) / (std + 1e-6)


def probe_records(
    records: Sequence[EpisodeRecord],
    target: str,
    *,
    align: str = "start",
    folds: int = 5,
    l2: float = 1e-2,
    seed: int = 0,
) -> ProbeResult:
    """Fit and score the probes of ``target`` on recorded episodes (see the module docstring).

    ``align``: count steps from the episode's start, its cue step or its decision step
    (negative: before the event); episodes without the event are left out.
    """
    check_probe(target, align)
    values = [target_value(r, target) for r in records]
    kept = [
        (r, v)
        for r, v in zip(records, values, strict=True)
        if v is not None and _event_step(r, align) is not None
    ]
    classes = sorted({str(v) for _, v in kept})
    if len(classes) < 2:
        raise InspectError(
            f"probe target {target!r} takes {len(classes)} value(s) ({', '.join(classes)}) "
            f"in the {len(kept)} of {len(records)} episodes that have it (and a {align} step): "
            "nothing to decode; play more episodes, or another target"
        )
    if len(classes) > MAX_CLASSES:
        raise InspectError(
            f"probe target {target!r} takes {len(classes)} distinct values; the probe decodes "
            f"discrete targets of at most {MAX_CLASSES}"
        )
    if len(kept) < 2 * MIN_EPISODES:
        raise InspectError(
            f"the probe needs at least {2 * MIN_EPISODES} episodes with target {target!r}, "
            f"got {len(kept)}: play more episodes"
        )
    labels = torch.tensor([classes.index(str(v)) for _, v in kept])
    events = [int(_event_step(r, align)) for r, _ in kept]  # type: ignore[arg-type]  # kept has them
    first = min(-e for e in events)
    last = max(r.steps - e for (r, _), e in zip(kept, events, strict=True))
    n_steps = last - first  # relative steps first .. last - 1
    feature_sets = {
        **{name: [r.hidden[name] for r, _ in kept] for name in kept[0][0].hidden},
        OBSERVATION: [
            np.concatenate([o.reshape(r.steps, -1) for o in r.observations.values()], axis=1)
            for r, _ in kept
        ],
    }
    folds = max(2, min(folds, len(kept)))
    fold = torch.as_tensor(np.random.default_rng(seed).permutation(len(kept)) % folds)
    rows: list[dict[str, Any]] = []
    for layer, per_episode in feature_sets.items():
        d = per_episode[0].shape[1]
        x = torch.zeros(n_steps, len(kept), d)  # (S, E, D): step first .. last - 1
        valid = torch.zeros(n_steps, len(kept), dtype=torch.bool)
        for e, (features, event) in enumerate(zip(per_episode, events, strict=True)):
            offset = -event - first
            x[offset : offset + len(features), e] = torch.as_tensor(features, dtype=torch.float32)
            valid[offset : offset + len(features), e] = True
        correct = torch.zeros(n_steps)
        for f in range(folds):
            fit, test = valid & (fold != f), valid & (fold == f)
            z = _standardise(x, fit)
            w, b = fit_softmax(z, labels, fit, len(classes), l2)
            predicted = (z @ w + b[:, None]).argmax(-1)  # (S, E)
            correct += ((predicted == labels) & test).sum(1)
        n = valid.sum(1)
        # chance: always answering the most common value of the episodes scored at the step
        chance = torch.stack([((labels == c) & valid).sum(1) for c in range(len(classes))])
        chance = chance.max(0).values
        for s in range(n_steps):
            if n[s] >= MIN_EPISODES:
                rows.append({
                    "layer": layer,
                    "step": first + s,
                    "episodes": int(n[s]),
                    "accuracy": float(correct[s] / n[s]),
                    "chance": float(chance[s] / n[s]),
                })  # fmt: skip
    return ProbeResult(
        target=target,
        align=align,
        classes=classes,
        counts=[int((labels == c).sum()) for c in range(len(classes))],
        episodes=len(kept),
        played=len(records),
        layers=list(feature_sets),
        rows=rows,
    )


# ---------------------------------------------------------------------------- output


def write_probe(result: ProbeResult, out: Path) -> list[Path]:
    """``probe.csv`` (one row per layer and step), ``probe.json`` and ``probe.png``."""
    import json

    from txrl.files import atomic_write

    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=["layer", "step", "episodes", "accuracy", "chance"])
    writer.writeheader()
    writer.writerows(result.rows)
    files = [out / "probe.csv", out / "probe.json", out / "probe.png"]
    atomic_write(files[0], text.getvalue().encode())
    atomic_write(files[1], (json.dumps(result.to_json(), indent=2) + "\n").encode())
    plot_probe(result, files[2])
    return files


def plot_probe(result: ProbeResult, path: Path) -> Any:
    """Held-out accuracy against the step, one line per layer, chance dashed; returns the
    figure."""
    Figure = figure_class(DRAWS)
    fig = Figure(figsize=(8.0, 4.6), layout="constrained")
    ax = fig.subplots()
    for layer in result.layers:
        accuracy = result.accuracy(layer)
        style = {"color": "0.5", "linestyle": "-."} if layer == OBSERVATION else {}
        label = "the observation alone (no memory)" if layer == OBSERVATION else layer
        if layer == "output":
            label = "output (what the policy heads read)"
        ax.plot(list(accuracy), list(accuracy.values()), marker=".", label=label, **style)
    chance = {row["step"]: row["chance"] for row in result.rows}
    ax.plot(list(chance), list(chance.values()), color="black", linestyle="--", linewidth=1,
            label="chance (most common value)")  # fmt: skip
    ax.set_ylim(-0.02, 1.02)
    since = {"start": "the episode's start", "cue": "the cue step", "decision": "the decision step"}
    ax.set_xlabel(f"steps since {since[result.align]}")
    ax.set_ylabel("held-out accuracy")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    values = ", ".join(f"{c} ({n})" for c, n in zip(result.classes, result.counts, strict=True))
    fig.suptitle(
        f"What the memory holds, and when: decoding {result.target!r} from each layer",
        fontsize="medium",
    )
    fig.text(
        0.01, -0.02,
        f"Linear (softmax) probe per layer and step, scored on held-out episodes "
        f"({_kept_of_played(result)}; values: {values}).\nA step is scored where at least "
        f"{MIN_EPISODES} episodes reach it.",
        fontsize="x-small", ha="left", va="top",
    )  # fmt: skip
    save_figure(fig, path)
    return fig


def _kept_of_played(result: ProbeResult) -> str:
    """``23 of 64 episodes have it and a decision step``: how many episodes the probe could
    use, which can itself be the finding (a policy that never looks at the cue)."""
    event = "" if result.align == "start" else f" and a {result.align} step"
    return f"{result.episodes} of {result.played} episodes have it{event}"


def summary_line(result: ProbeResult) -> str:
    """How many episodes it used, then ``layer0 1.00 (step 3)`` for each layer, for the
    terminal."""
    parts = []
    for layer in result.layers:
        accuracy = result.accuracy(layer)
        best = max(accuracy, key=lambda s: accuracy[s], default=None)
        if best is not None and not math.isnan(accuracy[best]):
            parts.append(f"{layer} {accuracy[best]:.2f} (step {best})")
    return (
        f"probe {result.target!r} ({_kept_of_played(result)}): best held-out accuracy "
        + ", ".join(parts)
    )
