"""What does the memory hold when the agent decides? A linear probe of a MiniGrid-MemoryS9
checkpoint at its decision points.

    python results/minigrid_memory_s9/archive/diagnostics/decision_probe.py CHECKPOINT.zip [...]

Every episode starts at x = 1 (the start room's object in view at reset) and is played with
actions sampled from the policy. A decision point is a step at the junction facing one of
the two end objects: stepping forward there ends the episode, with success if that object
matches the start room's. At each decision point the backbone's output is recorded, and a
logistic regression (5-fold cross-validated, features standardised) is asked to read from
it (a) the start room's object, (b) the faced object and (c) whether they match. Printed
per checkpoint: success from x = 1, P(forward) when the faced object matches and when it
does not, and the three probe accuracies (0.5 is chance; the labels are balanced).

The library's probe, ``txrl inspect CHECKPOINT --probe TARGET --probe-align decision``
(``txrl/inspect/probe.py``), does the general part of this (held-out probes of every layer's
output at each step up to the decision, beside the observation alone as the no-memory
control) for the targets an env reports: ``success``, ``info:KEY``, ``obs:INDEX``, and ``cue``
where the env says what its cue was. MiniGrid-MemoryS9 reports when the start room's object
is seen (``cue_step``) but not which object it is, so the probes of the start room's object,
the faced object and their match exist only here; the script is kept, runnable, as the
record of the numbers in ``../../results.md`` and for those three probes.
"""

from __future__ import annotations

import json
import sys

import gymnasium as gym
import numpy as np
import torch

import txrl.envs  # noqa: F401 - registers the tasks
from txrl import MemoryPPO

EPISODES = 400


def fit_logistic(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Weights and bias of an L2-regularised logistic regression of ``y`` on ``x`` (LBFGS)."""
    w = torch.zeros(x.shape[1], requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.LBFGS([w, b], max_iter=200)

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(x @ w + b, y)
        loss = loss + 1e-3 * (w * w).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    return w.detach(), b.detach()


def probe_accuracy(features: np.ndarray, labels: np.ndarray, folds: int = 5) -> float:
    """Held-out accuracy of :func:`fit_logistic` on standardised features, ``folds``-fold."""
    x = torch.as_tensor(features, dtype=torch.float32)
    x = (x - x.mean(0)) / (x.std(0) + 1e-6)
    y = torch.as_tensor(labels, dtype=torch.float32)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    accuracies = []
    for k in range(folds):
        held_out = order[k::folds]
        fit = order[torch.isin(order, held_out, invert=True)]
        w, b = fit_logistic(x[fit], y[fit])
        accuracies.append(float(((x[held_out] @ w + b > 0).float() == y[held_out]).float().mean()))
    return float(np.mean(accuracies))


def decision_points(model: MemoryPPO, episodes: int) -> dict[str, np.ndarray | float]:
    policy = model.policy.eval()
    env = gym.make("txrl/MiniGrid-MemoryS9-v0", actions=["left", "right", "forward"])
    rng = np.random.default_rng(0)
    rows: list[tuple[np.ndarray, bool, bool, float]] = []
    successes = []
    for episode in range(episodes):
        env.reset(seed=70_000 + episode)
        grid = env.unwrapped
        middle = grid.height // 2
        grid.agent_pos = np.array((1, middle))
        cue = type(grid.grid.get(1, middle - 1))
        obs = grid.gen_obs()["image"]
        state, start = policy.initial_state(1), torch.ones(1, 1, dtype=torch.bool)
        done, reward = False, 0.0
        while not done:
            image = torch.as_tensor(obs.transpose(2, 0, 1)[None])  # (1, C, H, W), as trained
            with torch.inference_mode():
                memory_out, out = policy._memory_output(image, state, start, acting=True)
                latent_pi, _ = policy.mlp_extractor(memory_out)
                probs = policy._get_action_dist_from_latent(latent_pi).distribution.probs[0]
            state, start = out.state, torch.zeros(1, 1, dtype=torch.bool)
            if tuple(grid.agent_pos) == (7, middle) and grid.agent_dir in (1, 3):  # S or N
                faced = type(grid.grid.get(7, middle + (2 if grid.agent_dir == 1 else -2)))
                rows.append(
                    (
                        memory_out[0].numpy().copy(),
                        cue.__name__ == "Key",
                        faced.__name__ == "Key",
                        float(probs[2]),
                    )
                )
            obs, reward, terminated, truncated, _ = env.step(int(rng.choice(3, p=probs.numpy())))
            done = terminated or truncated
        successes.append(reward > 0)
    features = np.stack([r[0] for r in rows])
    cue_key, faced_key = np.array([r[1] for r in rows]), np.array([r[2] for r in rows])
    match, forward = cue_key == faced_key, np.array([r[3] for r in rows])
    return {
        "decision_points": len(rows),
        "success_from_x1": float(np.mean(successes)),
        "p_forward_match": float(forward[match].mean()),
        "p_forward_mismatch": float(forward[~match].mean()),
        "probe_start_object": probe_accuracy(features, cue_key),
        "probe_faced_object": probe_accuracy(features, faced_key),
        "probe_match": probe_accuracy(features, match),
    }


if __name__ == "__main__":
    torch.set_num_threads(1)
    for checkpoint in sys.argv[1:]:
        result = decision_points(MemoryPPO.load(checkpoint, device="cpu"), EPISODES)
        print(json.dumps({"checkpoint": checkpoint} | {k: round(v, 3) for k, v in result.items()}))
