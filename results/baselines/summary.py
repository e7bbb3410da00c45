"""The fair-baseline comparisons in one table per task: each memory's judged score on each
declared seed, what it was given, and the GTrXL recipe's score on the same seeds.

    python results/baselines/summary.py --out results/baselines/summary.md

Reads each ``compare_*`` folder of ``results/baselines/`` as ``results/collect_study.py``
leaves it (``compare.yaml``, ``runs/<memory>/seed_<s>/`` with ``eval.jsonl``,
``finished.json`` and, where judged, ``eval_100_episodes.json``), and the GTrXL's runs on the
same seeds from the recipe's own study (``RECIPES``).

A run's score is its final agent judged over 100 greedy episodes (``txrl eval RUN --episodes
100 --json``), with its 95% CI: the success rate on the T-mazes, the mean return on POPGym.
A run not judged yet says what it is: finished and not judged, unfinished (running or
paused: its last 32-episode evaluation and step) or not run. "Given" is read from the
declared config: the memory, its width, how far its gradient reaches back
(``ppo.segment_length``; for sb3-contrib's RecurrentPPO its rollout, ``n_steps``), step size
and entropy bonus. The GTrXL's lead is the smallest per-seed difference over the seeds where
both are judged.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from txrl.config import TrainConfig, load_compare_config
from txrl.files import atomic_write
from txrl.run.run_files import EVAL_LOG, FINISHED_RECORD, read_eval_log

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent

#: Comparison folder -> (task as the README names it, the GTrXL recipe's study under
#: ``results/``, the metric judged).
RECIPES = {
    "compare_tmaze_1000": ("passive T-maze, 1,001-step span", "reach/tmaze_1000", "success_rate"),
    "compare_tmaze_3000": ("passive T-maze, 3,001-step span", "reach/tmaze_3000", "success_rate"),
    "compare_popgym_repeat_previous_medium": (
        "POPGym RepeatPreviousMedium",
        "popgym_recall/repeat_previous_medium_time_feature",
        "mean_return",
    ),
    "compare_popgym_repeat_first_medium": (
        "POPGym RepeatFirstMedium",
        "popgym_recall/repeat_first_medium",
        "mean_return",
    ),
    "compare_popgym_repeat_first_hard_decks": (
        "POPGym RepeatFirstHard (decks)",
        "popgym_recall/repeat_first_hard_decks",
        "mean_return",
    ),
    "compare_popgym_count_recall_easy": (
        "POPGym CountRecallEasy",
        "popgym_recall/count_recall_easy",
        "mean_return",
    ),
}
GTRXL = "gtrxl"


@dataclass(frozen=True)
class Score:
    """One run's standing: ``value`` and ``ci`` once judged, otherwise ``text`` says why not."""

    value: float | None
    ci: tuple[float, float] | None
    text: str

    def cell(self, digits: int) -> str:
        if self.value is None:
            return self.text
        assert self.ci is not None
        return f"{self.value:.{digits}f} [{self.ci[0]:.{digits}f}, {self.ci[1]:.{digits}f}]"


def score(run: Path, metric: str) -> Score:
    """The standing of the run folder ``run`` (see the module docstring)."""
    judged = run / "eval_100_episodes.json"
    if judged.exists():
        data = json.loads(judged.read_text())
        ci_key = "success_ci95" if metric == "success_rate" else "return_ci95"
        low, high = data[ci_key]
        return Score(float(data[metric]), (float(low), float(high)), "")
    if (run / FINISHED_RECORD).exists():
        return Score(None, None, "finished, not judged")
    entries = read_eval_log(run / EVAL_LOG)
    if not entries:
        return Score(None, None, "not run")
    last = entries[-1]
    return Score(
        None,
        None,
        f"unfinished: {last[metric]:.2f} at {last['timesteps'] / 1e6:.2f}M ({last['episodes']} episodes)",
    )


def given(config: TrainConfig) -> str:
    """What a variant's resolved ``TrainConfig`` gives its memory, in words."""
    policy = config.policy
    settings: Any = config.learner_settings  # PPO's or RecurrentPPO's settings
    if config.algo == "recurrent_ppo":
        width, reach = policy.hidden_size, settings.n_steps
        memory = "RecurrentPPO LSTM"
    else:
        width, reach = policy.d_model, settings.segment_length
        memory = (
            policy.backbone.upper()
            if policy.backbone in ("lstm", "gru", "ffm")
            else policy.backbone
        )
    horizon = policy.backbone_kwargs.get("max_period")
    traces = f", trace horizon {int(horizon):,}" if horizon else ""
    return (
        f"{memory} {width}{traces}, BPTT {reach:,}, step size {settings.learning_rate}, "
        f"entropy {settings.ent_coef}"
    )


def table(folder: Path) -> list[str]:
    """The Markdown section of one comparison folder."""
    task, recipe, metric = RECIPES[folder.name]
    study = load_compare_config(folder / "compare.yaml")
    seeds = list(study.seeds)
    rows: list[tuple[str, str, list[Score]]] = []
    gtrxl_runs = RESULTS / recipe / "runs" / GTRXL
    rows.append(
        (
            "GTrXL (the recipe)",
            f"`results/{recipe}/`",
            [score(gtrxl_runs / f"seed_{s}", metric) for s in seeds],
        )
    )
    for variant in study.variants():
        label = dict(variant.labels)["memory"]
        runs = folder / "runs" / label
        rows.append(
            (label, given(variant.config), [score(runs / f"seed_{s}", metric) for s in seeds])
        )
    reference = rows[0][2]
    metric_name = "success rate" if metric == "success_rate" else "mean return"
    # 100 episodes give a success rate in hundredths; POPGym returns need a third digit
    digits = 2 if metric == "success_rate" else 3
    lines = [
        f"## {task} (`{folder.name}/`)",
        "",
        f"{metric_name.capitalize()} over 100 greedy episodes, 95% CI, per declared seed.",
        "",
        "| memory | given | " + " | ".join(f"seed {s}" for s in seeds) + " | GTrXL's lead |",
        "|---|---|" + "---|" * len(seeds) + "---|",
    ]
    for name, what, scores in rows:
        if name.startswith("GTrXL"):
            lead = "–"
        else:
            gaps = [
                ref.value - own.value
                for ref, own in zip(reference, scores, strict=True)
                if ref.value is not None and own.value is not None
            ]
            lead = f"{min(gaps):+.{digits}f}" if gaps else "–"
        lines.append(
            f"| {name} | {what} | " + " | ".join(s.cell(digits) for s in scores) + f" | {lead} |"
        )
    return [*lines, ""]


def summarise(root: Path = HERE) -> str:
    """The whole summary for the comparison folders under ``root`` that ``RECIPES`` names."""
    parts = [
        "# The fair-baseline comparisons",
        "",
        "Written by `python results/baselines/summary.py --out results/baselines/summary.md`",
        "from each comparison's folder and the GTrXL recipe's study; each folder's",
        "`README.md` says what it shows. The GTrXL's lead is the smallest per-seed",
        "difference over the seeds where both are judged.",
        "",
    ]
    for name in RECIPES:
        folder = root / name
        if (folder / "compare.yaml").exists():
            parts += table(folder)
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the Markdown here (default: print it)")
    parser.add_argument(
        "--root", type=Path, default=HERE, help="the folder holding the compare_* folders"
    )
    args = parser.parse_args(argv)
    text = summarise(args.root)
    if args.out is None:
        print(text)
    else:
        atomic_write(args.out, text.encode())
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
