"""Where RepeatFirstHard agents lose their answers: each agent judged at several deck counts.

    txrl eval RUN [--best] --episodes 100 --set eval.env_kwargs.num_decks=K --json \
        > results/stability/deck_probe/<name>_decks<K>.json
    python results/stability/deck_probe.py results/stability/deck_probe --far 623

Reads every ``<name>_decks<K>.json`` (a ``txrl eval --json`` judgement) in the folder and
writes ``deck_probe.md`` beside them: per agent and deck count, the greedy mean return with
its 95% interval and the wrong answers per episode it implies. A RepeatFirst episode of
length L pays +1/L for each right answer and -1/L for each wrong one, so a return r means
L (1 - r) / 2 wrong answers. Below the table, how the training mix of ``popgym_repeat_first_hard``
(decks drawn log-uniformly from 1 to 16 and rounded, `envs._validation.log_uniform_int`)
spreads episodes and steps over deck counts: the share of episodes of more than ``--far``
steps' reach and the share of training steps that ask for a card more than ``--far``
steps back.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections import defaultdict
from pathlib import Path

from txrl.files import atomic_write

_NAME = re.compile(r"^(?P<agent>.+)_decks(?P<decks>\d+)\.json$")
CARDS_PER_DECK = 52


def deck_share(k: int, low: int, high: int) -> float:
    """P(count = k) when round(exp(U(ln low, ln high))) is clipped to [low, high]."""
    lo = max(k - 0.5, low)
    hi = min(k + 0.5, high)
    return max(0.0, math.log(hi) - math.log(lo)) / (math.log(high) - math.log(low))


def mix_lines(low: int, high: int, far: int) -> list[str]:
    shares = {k: deck_share(k, low, high) for k in range(low, high + 1)}
    length = {k: CARDS_PER_DECK * k - 1 for k in shares}
    steps = sum(shares[k] * length[k] for k in shares)
    far_steps = sum(shares[k] * max(0, length[k] - (far + 1)) for k in shares)
    long_decks = [k for k in shares if length[k] > far + 1]
    first = min(long_decks) if long_decks else None
    long_episodes = sum(shares[k] for k in long_decks)
    return [
        f"Training mix: {low} to {high} decks, drawn log-uniformly and rounded. "
        f"Episodes of {first} decks or more (longer than {far + 1} steps): "
        f"{100 * long_episodes:.1f}% of episodes. Training steps that ask for the first "
        f"card more than {far} steps back: {100 * far_steps / steps:.1f}% of steps.",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--far", type=int, default=623, help="a lag in steps (default 623)")
    parser.add_argument("--min-decks", type=int, default=1)
    parser.add_argument("--num-decks", type=int, default=16)
    args = parser.parse_args(argv)
    rows: dict[str, dict[int, dict]] = defaultdict(dict)
    for path in sorted(args.folder.glob("*.json")):
        match = _NAME.match(path.name)
        if match is None:
            continue
        rows[match["agent"]][int(match["decks"])] = json.loads(path.read_text())
    if not rows:
        parser.error(f"no <name>_decks<K>.json judgements in {args.folder}")
    lines = [
        "| agent | checkpoint (step) | decks | steps | mean return | 95% CI | wrong answers per episode |",
        "|---|---|---|---|---|---|---|",
    ]
    for agent, by_decks in rows.items():
        for decks in sorted(by_decks):
            j = by_decks[decks]
            length = j["mean_length"]
            wrong = length * (1 - j["mean_return"]) / 2
            lo, hi = j["return_ci95"]
            lines.append(
                f"| {agent} | {j['judged']} ({j['timesteps'] / 1e6:.2f}M) | {decks} | "
                f"{length:.0f} | {j['mean_return']:.3f} | [{lo:.3f}, {hi:.3f}] | {wrong:.1f} |"
            )
    text = "\n".join(
        [
            "# RepeatFirstHard agents judged at several deck counts",
            "",
            "100 greedy episodes per agent and count (`txrl eval --set "
            "eval.env_kwargs.num_decks=K`); drawn by `deck_probe.py` from the JSON files here.",
            "",
            *lines,
            "",
            *mix_lines(args.min_decks, args.num_decks, args.far),
            "",
        ]
    )
    atomic_write(args.folder / "deck_probe.md", text.encode())
    print(f"{sum(map(len, rows.values()))} judgements -> {args.folder / 'deck_probe.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
