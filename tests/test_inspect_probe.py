"""``txrl.inspect.probe``: linear probes on episodes whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest

from txrl.inspect import EpisodeRecord, InspectError, probe_records
from txrl.inspect.probe import OBSERVATION, summary_line

STEPS, WIDTH, FORGET_AT = 8, 6, 3


def _episode(cue: str, rng: np.random.Generator, steps: int = STEPS) -> EpisodeRecord:
    """An episode whose layer "holds" keeps the cue in unit 0 at every step, whose layer
    "forgets" has it only before step 3, and whose observation shows it at step 0 only."""
    sign = 1.0 if cue == "up" else -1.0
    holds = rng.normal(0, 0.3, (steps, WIDTH))
    holds[:, 0] += sign
    forgets = rng.normal(0, 0.3, (steps, WIDTH))
    forgets[:FORGET_AT, 0] += sign
    obs = np.zeros((steps, 3), np.float32)
    obs[:, 0] = np.arange(steps) / steps
    obs[0, 1] = sign
    return EpisodeRecord(
        actions=np.zeros(steps, np.int64),
        rewards=np.zeros(steps, np.float32),
        values=np.zeros(steps, np.float32),
        action_probs=None,
        attention=None,
        attendable=None,
        layers=[],
        traces={},
        success=None,
        cue_step=0,
        decision_step=steps - 1,
        observations={"obs": obs},
        hidden={"holds": holds.astype(np.float32), "forgets": forgets.astype(np.float32)},
        cue=cue,
        info={"level": cue == "up", "seed": int(rng.integers(1000))},
    )


@pytest.fixture(scope="module")
def episodes() -> list[EpisodeRecord]:
    rng = np.random.default_rng(0)
    return [_episode(str(rng.choice(["up", "down"])), rng) for _ in range(40)]


def test_probe_finds_the_layer_that_holds_the_cue_and_when_the_other_forgets_it(
    episodes: list[EpisodeRecord],
) -> None:
    result = probe_records(episodes, "cue")
    assert result.layers == ["holds", "forgets", OBSERVATION]
    assert sum(result.counts) == result.episodes == 40 and result.classes == ["down", "up"]
    holds, forgets, obs = (result.accuracy(n) for n in ("holds", "forgets", OBSERVATION))
    assert sorted(holds) == list(range(STEPS))
    assert min(holds.values()) >= 0.95
    assert min(forgets[s] for s in range(FORGET_AT)) >= 0.95
    assert np.mean([forgets[s] for s in range(FORGET_AT, STEPS)]) <= 0.7
    assert obs[0] == 1.0 and np.mean([obs[s] for s in range(1, STEPS)]) <= 0.7
    majority = max(result.counts) / result.episodes
    for row in result.rows:
        assert row["chance"] == pytest.approx(majority)


def test_probe_aligned_on_the_decision_counts_steps_back_from_it(
    episodes: list[EpisodeRecord],
) -> None:
    result = probe_records(episodes, "obs:1@0", align="decision")
    forgets = result.accuracy("forgets")
    assert sorted(forgets) == list(range(-(STEPS - 1), 1))
    assert min(forgets[s - (STEPS - 1)] for s in range(FORGET_AT)) >= 0.95
    assert result.accuracy(OBSERVATION)[-(STEPS - 1)] == 1.0


def test_it_says_how_many_episodes_had_what_it_decodes(episodes: list[EpisodeRecord]) -> None:
    """Episodes without the target (the cue never in view) or the aligning event are left
    out, and the result says how many of those played it kept: that count can be the
    finding itself."""
    import dataclasses

    rng = np.random.default_rng(2)
    unseen = [dataclasses.replace(_episode("up", rng), cue=None) for _ in range(3)]
    no_decision = [dataclasses.replace(_episode("down", rng), decision_step=None)]
    played = [*episodes, *unseen, *no_decision]
    at_start = probe_records(played, "cue")
    assert (at_start.episodes, at_start.played) == (41, 44)
    assert summary_line(at_start).startswith("probe 'cue' (41 of 44 episodes have it): best")
    at_decision = probe_records(played, "cue", align="decision")
    assert (at_decision.episodes, at_decision.played) == (40, 44)
    assert "(40 of 44 episodes have it and a decision step)" in summary_line(at_decision)
    assert at_decision.to_json()["played"] == 44


def test_steps_reached_by_few_episodes_are_not_scored(episodes: list[EpisodeRecord]) -> None:
    rng = np.random.default_rng(1)
    longer = [_episode("up", rng, steps=STEPS + 2), _episode("down", rng, steps=STEPS + 2)]
    result = probe_records([*episodes, *longer], "info:level")
    assert max(result.accuracy("holds")) == STEPS - 1  # steps 8, 9: two episodes only


@pytest.mark.parametrize(
    ("target", "align", "message"),
    [
        ("colour", "start", "unknown probe target 'colour'; valid: cue, success"),
        ("cue", "end", "probe align 'end' is not one of start, cue, decision"),
        ("success", "start", "takes 0 value(s)"),
        ("info:seed", "start", "distinct values; the probe decodes discrete targets"),
        ("obs:7", "start", "the observation has 3 features (0..2)"),
        ("obs:x@2", "start", "write obs:INDEX, obs:INDEX@STEP or obs:INDEX@cue"),
    ],
)
def test_targets_it_cannot_decode_are_named(
    episodes: list[EpisodeRecord], target: str, align: str, message: str
) -> None:
    with pytest.raises(InspectError, match=message.replace("(", r"\(").replace(")", r"\)")):
        probe_records(episodes, target, align=align)


def test_too_few_episodes_is_a_clear_error(episodes: list[EpisodeRecord]) -> None:
    with pytest.raises(InspectError, match="at least 8 episodes"):
        probe_records(episodes[:5], "cue")
