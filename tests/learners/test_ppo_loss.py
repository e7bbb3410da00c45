"""The PPO loss's value term with and without value clipping."""

from __future__ import annotations

import pytest
import torch

from txrl.learners.ppo.loss import ppo_loss


def value_loss_and_grad(
    values: list[float], old_values: list[float], returns: list[float], clip_range_vf: float | None
) -> tuple[float, list[float]]:
    v = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    zeros = torch.zeros(len(values), dtype=torch.float64)
    loss, stats = ppo_loss(
        log_prob=zeros,
        old_log_prob=zeros,
        advantages=zeros,
        values=v,
        old_values=torch.tensor(old_values, dtype=torch.float64),
        returns=torch.tensor(returns, dtype=torch.float64),
        entropy=zeros,
        clip_range=0.2,
        clip_range_vf=clip_range_vf,
        ent_coef=0.0,
        vf_coef=1.0,
    )
    loss.backward()
    assert v.grad is not None
    return float(stats["train/value_loss"]), v.grad.tolist()


def test_clipped_value_loss_is_the_max_of_unclipped_and_clipped_errors() -> None:
    # V_old = 0, eps_vf = 0.5. Row 0: V = 2 moved past the clip away from G = 1, so the
    # unclipped error (2 - 1)^2 = 1 beats the clipped one (0.5 - 1)^2 = 0.25 and keeps its
    # gradient 2 (V - G) / n. Row 1: V = 2, G = 3: the clipped error (0.5 - 3)^2 = 6.25 is the
    # larger, and it has no gradient in V. Row 2: inside the clip range, both are equal.
    values, old, returns = [2.0, 2.0, 0.2], [0.0, 0.0, 0.0], [1.0, 3.0, -0.3]
    loss, grad = value_loss_and_grad(values, old, returns, clip_range_vf=0.5)
    assert loss == pytest.approx((1.0 + 6.25 + 0.25) / 3, rel=1e-12)
    assert grad == pytest.approx([2 * (2.0 - 1.0) / 3, 0.0, 2 * (0.2 + 0.3) / 3], rel=1e-12)


def test_value_gradient_outside_the_clip_range_where_the_unclipped_error_is_larger() -> None:
    _, grad = value_loss_and_grad([5.0], [0.0], [0.0], clip_range_vf=0.2)
    assert grad[0] == pytest.approx(2 * 5.0, rel=1e-12)  # pulled back towards the return


def test_without_clipping_the_value_loss_is_the_plain_squared_error() -> None:
    loss, grad = value_loss_and_grad([2.0, -1.0], [0.0, 0.0], [1.0, 1.0], clip_range_vf=None)
    assert loss == pytest.approx((1.0 + 4.0) / 2, rel=1e-12)
    assert grad == pytest.approx([2 * 1.0 / 2, 2 * -2.0 / 2], rel=1e-12)
