"""Where the memory's attention looks, in MiniGrid-MemoryS9 checkpoints that solved the task
and that did not.

    python results/minigrid_memory_s9/archive/diagnostics/attention_probe.py CHECKPOINT.zip [...]

Episodes start at x = 1 (the start room's object in view at reset), actions sampled from the
policy, as in ``decision_probe.py``. Each finished episode is run again as one sequence
through the training path with :class:`txrl.nn.attention.AttentionRecorder` on (1-layer
GTrXL: one attention call, keys = the episode's steps). Printed per checkpoint:

* ``probe_features_t0``: a linear probe of the start room's object from the observation
  encoder's output at the first step (is the object encoded when it is seen?);
* ``cue_weight_at_decision``: the attention weight on the steps at which the object was in
  view, at the decision point (facing an end object at the junction), per head;
* ``probe_actions_before_decision``: a linear probe of the object from the agent's own
  moves before the decision (counts of each move and each pair of successive moves): does
  the agent mark what it saw in how it moves?
* ``probe_attention_out_at_decision``: a linear probe of the object from the attention's
  output at the decision;
* two example episodes: actions (L, R, F) and each head's weights at the decision.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

import txrl.envs  # noqa: F401 - registers the tasks
from txrl import MemoryPPO
from txrl.nn.attention import AttentionRecorder, RelativeMultiHeadAttention

sys.path.insert(0, str(Path(__file__).parent))
from decision_probe import probe_accuracy

EPISODES = 200


def play(policy, env, seed: int, rng: np.random.Generator) -> dict:
    """One episode from x = 1 with sampled actions: images, cue visibility, decision step."""
    env.reset(seed=seed)
    grid = env.unwrapped
    middle = grid.height // 2
    grid.agent_pos = np.array((1, middle))
    cue = type(grid.grid.get(1, middle - 1)).__name__
    obs = grid.gen_obs()["image"]
    state, start = policy.initial_state(1), torch.ones(1, 1, dtype=torch.bool)
    images, visible, actions, decision, done = [], [], [], None, False
    while not done:
        image = torch.as_tensor(obs.transpose(2, 0, 1)[None])  # (1, C, H, W), as trained
        images.append(image)
        visible.append(bool(grid.agent_sees(1, middle - 1)))
        with torch.inference_mode():
            memory_out, out = policy._memory_output(image, state, start, acting=True)
            probs = policy._get_action_dist_from_latent(policy.mlp_extractor(memory_out)[0])
            probs = probs.distribution.probs[0].numpy()
        state, start = out.state, torch.zeros(1, 1, dtype=torch.bool)
        if decision is None and tuple(grid.agent_pos) == (7, middle) and grid.agent_dir in (1, 3):
            decision = len(images) - 1
        action = int(rng.choice(3, p=probs))
        actions.append("LRF"[action])
        obs, _, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
    return {
        "images": images,
        "visible": np.array(visible),
        "cue": cue == "Key",
        "actions": "".join(actions),
        "decision": decision,
    }


def attention_of(
    policy, images: list[torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The episode as one sequence: encoder output (T, F), attention weights over the
    episode's steps (H, T, T) and the attention's output (T, D)."""
    t = len(images)
    x = torch.cat(images)
    starts = torch.zeros(t, 1, dtype=torch.bool)
    starts[0] = True
    attention = next(
        m for m in policy.backbone.modules() if isinstance(m, RelativeMultiHeadAttention)
    )
    captured: dict[str, torch.Tensor] = {}
    hook = attention.register_forward_hook(
        lambda m, i, o: captured.update(out=o[0] if isinstance(o, tuple) else o)
    )
    try:
        with torch.no_grad(), AttentionRecorder() as recorder:
            features = policy.extract_features(x, policy.features_extractor)
            policy._memory_output(x, policy.initial_state(1), starts)
    finally:
        hook.remove()
    weights = recorder.calls[0].weights[0]  # (H, T, M + T)
    return features, weights[:, :, -t:], captured["out"].reshape(t, -1)


def move_counts(actions: str) -> np.ndarray:
    """Counts of each move and of each pair of successive moves (3 + 9 features)."""
    singles = [actions.count(a) for a in "LRF"]
    pairs = [
        sum(1 for i in range(len(actions) - 1) if actions[i : i + 2] == a + b)
        for a in "LRF"
        for b in "LRF"
    ]
    return np.array(singles + pairs, dtype=np.float32)


def probe(checkpoint: str) -> dict:
    policy = MemoryPPO.load(checkpoint, device="cpu").policy.eval()
    env = gym.make("txrl/MiniGrid-MemoryS9-v0", actions=["left", "right", "forward"])
    rng = np.random.default_rng(0)
    first, labels_first, at_decision, out_decision, labels_decision = [], [], [], [], []
    moves, examples = [], []
    for episode in range(EPISODES):
        played = play(policy, env, 95_000 + episode, rng)
        features, weights, attention_out = attention_of(policy, played["images"])
        visible, decision = played["visible"], played["decision"]
        first.append(features[0].numpy())
        labels_first.append(played["cue"])
        on_cue = weights[:, :, visible].sum(-1)  # (H, T): weight on the steps the object was seen
        if decision is not None:
            moves.append(move_counts(played["actions"][:decision]))
            at_decision.append(on_cue[:, decision].numpy())
            out_decision.append(attention_out[decision].numpy())
            labels_decision.append(played["cue"])
            if len(examples) < 2 and (not examples or examples[0]["cue_key"] != played["cue"]):
                examples.append(
                    {
                        "cue_key": played["cue"],
                        "actions": played["actions"],
                        "weights_at_decision": weights[:, decision, : decision + 1]
                        .numpy()
                        .round(2)
                        .tolist(),
                    }
                )
    return {
        "checkpoint": checkpoint,
        "probe_features_t0": round(probe_accuracy(np.stack(first), np.array(labels_first)), 3),
        "cue_weight_at_decision": np.stack(at_decision).mean(0).round(3).tolist(),
        "probe_actions_before_decision": round(
            probe_accuracy(np.stack(moves), np.array(labels_decision)), 3
        ),
        "probe_attention_out_at_decision": round(
            probe_accuracy(np.stack(out_decision), np.array(labels_decision)), 3
        ),
        "examples": examples,
    }


if __name__ == "__main__":
    torch.set_num_threads(1)
    for checkpoint in sys.argv[1:]:
        print(json.dumps(probe(checkpoint)))
