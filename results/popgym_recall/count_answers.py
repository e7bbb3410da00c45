"""Where a CountRecallEasy agent's answers go wrong: accuracy and error by step and by count.

    python results/popgym_recall/count_answers.py RUN_DIR... --episodes 100 \
        --out results/popgym_recall/count_recall_easy/answers.md

CountRecallEasy (POPGym, Morad et al. 2023) deals one card of 2 colours a step, 52 cards in
all, with a queried colour beside it; the answer at step t is how many cards of the queried
colour have been dealt up to and including step t (0-26). Each run's final checkpoint plays
``--episodes`` greedy episodes on its judging seeds (those of ``txrl eval``), and every answer
is scored against the count read off the observations (the first two one-hot features are the
dealt colour, the next two the queried colour), checked against the env's own reward. Written per run: the share of right answers
and the mean absolute error by step, the share of answers off by one, below and above the
count, right answers when the card just dealt has the queried colour and when not, and, for comparison,
what the step-count guess round((t+1)/2) and the exact count would score on the same episodes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from txrl.files import atomic_write
from txrl.run.checkpoint import read_checkpoint_config, resolve_checkpoint
from txrl.run.evaluate import load_checkpoint_model, make_checkpoint_eval_env

BUCKETS = ((0, 9), (10, 19), (20, 29), (30, 39), (40, 50))


def play(run: Path, episodes: int) -> dict[str, np.ndarray]:
    """Per answer of ``episodes`` greedy episodes: its step, the right count, the answer and
    whether the card just dealt has the queried colour (then it is part of the count)."""
    checkpoint = resolve_checkpoint(run)
    config = read_checkpoint_config(checkpoint)
    if "CountRecallEasy" not in config.env.id:
        raise SystemExit(f"{run}: trained on {config.env.id}, not CountRecallEasy")
    env = make_checkpoint_eval_env(checkpoint, config, episodes=episodes)
    model = load_checkpoint_model(checkpoint, config)
    n = env.num_envs
    obs = env.reset()
    state, starts = None, np.ones(n, dtype=bool)
    dealt = [[0, 0] for _ in range(n)]
    step = np.zeros(n, dtype=int)
    steps, counts, answers, queried_now = [], [], [], []
    playing: list[list[tuple[int, int, int, bool]]] = [[] for _ in range(n)]
    finished = 0
    while finished < episodes:
        flat = np.asarray(obs, dtype=np.float64).reshape(n, -1)
        for i in range(n):
            dealt[i][int(flat[i, 0:2].argmax())] += 1
        action, state = model.predict(obs, state=state, episode_start=starts, deterministic=True)
        for i in range(n):
            query = int(flat[i, 2:4].argmax())
            now = query == int(flat[i, 0:2].argmax())
            playing[i].append(
                (int(step[i]), dealt[i][query], int(np.asarray(action[i]).item()), now)
            )
        obs, rewards, dones, _ = env.step(action)
        for i in range(n):
            _, count, answer, _ = playing[i][-1]
            if (rewards[i] > 0) != (answer == count):
                raise SystemExit(
                    f"{run}: the count read off the observations ({count}) disagrees with the "
                    f"env's reward {rewards[i]:+.4f} for the answer {answer}"
                )
        step += 1
        for i in np.flatnonzero(dones):
            if finished < episodes:  # whole episodes only, the first ``episodes`` to end
                for at, count, answer, now in playing[i]:
                    steps.append(at)
                    counts.append(count)
                    answers.append(answer)
                    queried_now.append(now)
                finished += 1
            playing[i], dealt[i], step[i] = [], [0, 0], 0
        starts = dones.astype(bool)
    env.close()
    return {
        "step": np.array(steps),
        "count": np.array(counts),
        "answer": np.array(answers),
        "queried_now": np.array(queried_now, dtype=bool),
    }


def report(name: str, data: dict[str, np.ndarray]) -> list[str]:
    """Markdown lines for one run."""
    step, count, answer, now = data["step"], data["count"], data["answer"], data["queried_now"]
    right = answer == count
    error = np.abs(answer - count)
    guess = np.rint((step + 1) / 2) == count
    lines = [
        f"### {name}",
        "",
        f"{len(step)} answers: {right.mean():.3f} right (return {2 * right.mean() - 1:.3f}), "
        f"{(error == 1).mean():.3f} off by one, mean absolute error {error.mean():.2f}; "
        f"the step-count guess would be right on {guess.mean():.3f} "
        f"(return {2 * guess.mean() - 1:.3f}).",
        "",
        f"Answers below the count: {(answer < count).mean():.3f}, above it: "
        f"{(answer > count).mean():.3f}. Right when the card just dealt has the queried colour "
        f"(it is part of the count): {right[now].mean():.3f} of {now.sum()}; when not: "
        f"{right[~now].mean():.3f} of {(~now).sum()}.",
        "",
        "| steps | answers | right | off by one | mean abs. error | step-count guess right |",
        "|---|---|---|---|---|---|",
    ]
    for low, high in BUCKETS:
        at = (step >= low) & (step <= high)
        if at.any():
            lines.append(
                f"| {low}-{high} | {at.sum()} | {right[at].mean():.3f} | "
                f"{(error[at] == 1).mean():.3f} | {error[at].mean():.2f} | {guess[at].mean():.3f} |"
            )
    return [*lines, ""]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories (or checkpoints)")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--out", type=Path, help="markdown file (default: print)")
    args = parser.parse_args(argv)
    lines = [
        "# CountRecallEasy: the answers, by step",
        "",
        f"Greedy, {args.episodes} episodes a run on its judging seeds; written by "
        "`results/popgym_recall/count_answers.py`.",
        "",
    ]
    for run in args.runs:
        lines += report(str(run), play(run, args.episodes))
    text = "\n".join(lines)
    if args.out:
        atomic_write(args.out, (text + "\n").encode())
    else:
        print(text)


if __name__ == "__main__":
    main()
