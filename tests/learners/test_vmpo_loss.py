"""V-MPO's loss terms against hand computations, the multipliers' directions of motion, the
loss's config and PopArt (txrl/learners/vmpo/: loss, multipliers, settings, popart)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from txrl.learners.vmpo.loss import (
    CategoricalParams,
    DiagGaussianParams,
    FullBatch,
    VMPOBatch,
    categorical_kl,
    gaussian_decoupled_kl,
    kl_constraint_loss,
    policy_loss,
    temperature_loss,
    top_half_mask,
    top_half_weights,
    vmpo_loss,
)
from txrl.learners.vmpo.multipliers import VMPOMultipliers
from txrl.learners.vmpo.popart import PopArt
from txrl.learners.vmpo.settings import VMPOLossSettings, loss_settings

from ..numeric import F64_REL, close

# The hand computations are in Python floats (double): the terms are computed in float64 too,
# so the relative tolerances below sit far above rounding on any machine.
pytestmark = pytest.mark.usefixtures("float64")

# six advantages; the top half is {3.0 (index 3), 2.0 (index 0), 1.0 (index 5)}
ADVANTAGES = [2.0, -1.0, 0.5, 3.0, -0.5, 1.0]
TOP = [3, 0, 5]
ETA = 1.5
LOG_PROBS = [-0.7, -1.2, -0.3, -2.0, -0.9, -1.1]


def _psi_by_hand(advantages, selected, eta):
    z = sum(math.exp(advantages[i] / eta) for i in selected)
    return [math.exp(a / eta) / z if i in selected else 0.0 for i, a in enumerate(advantages)]


def _softmax(logits):
    m = max(logits)
    e = [math.exp(x - m) for x in logits]
    return [x / sum(e) for x in e]


# --------------------------------------------------------------------------------------------
# E-step
# --------------------------------------------------------------------------------------------


def test_top_half_selection_and_threshold_by_hand():
    mask, threshold = top_half_mask(torch.tensor(ADVANTAGES))
    assert mask.tolist() == [i in TOP for i in range(6)]
    assert threshold.item() == 1.0


def test_psi_by_hand_and_eta_detached():
    eta = torch.tensor(ETA, requires_grad=True)
    psi, mask, _ = top_half_weights(torch.tensor(ADVANTAGES), eta=eta)
    expected = _psi_by_hand(ADVANTAGES, TOP, ETA)
    assert psi.tolist() == pytest.approx(expected, rel=1e-6)
    assert psi.sum().item() == pytest.approx(1.0)
    assert (psi[~mask] == 0).all()
    assert not psi.requires_grad  # eta is inside sg[.] in psi


def test_temperature_loss_by_hand():
    eps = 0.1
    selected = [ADVANTAGES[i] for i in TOP]
    expected = ETA * eps + ETA * math.log(sum(math.exp(a / ETA) for a in selected) / 3)
    got = temperature_loss(torch.tensor(selected), eta=torch.tensor(ETA), epsilon_eta=eps)
    assert got.item() == pytest.approx(expected, rel=1e-6)


def test_temperature_loss_is_finite_for_tiny_eta():
    eta = torch.tensor(1e-8, requires_grad=True)
    loss = temperature_loss(torch.tensor([3.0, 2.0, 1.0]), eta=eta, epsilon_eta=0.1)
    loss.backward()
    # eta log mean exp(A/eta) -> max A as eta -> 0
    assert loss.item() == pytest.approx(3.0, abs=1e-5)
    assert torch.isfinite(eta.grad)


def test_policy_loss_by_hand():
    psi, _, _ = top_half_weights(torch.tensor(ADVANTAGES), eta=ETA)
    expected = -sum(
        p * lp for p, lp in zip(_psi_by_hand(ADVANTAGES, TOP, ETA), LOG_PROBS, strict=True)
    )
    assert policy_loss(torch.tensor(LOG_PROBS), psi).item() == pytest.approx(expected, rel=1e-6)


def test_policy_loss_ignores_non_finite_log_probs_outside_top_half():
    psi, _, _ = top_half_weights(torch.tensor(ADVANTAGES), eta=ETA)
    log_probs = torch.tensor(LOG_PROBS)
    log_probs[1] = -math.inf  # a padded step, never selected
    assert torch.isfinite(policy_loss(log_probs, psi))


def test_valid_mask_excludes_steps_from_selection():
    advantages = torch.tensor([5.0, 4.0, 3.0, 2.0, 1.0, 0.0])
    valid = torch.tensor([False, True, True, True, True, True])
    psi, mask, threshold = top_half_weights(advantages, eta=1.0, valid=valid)
    # 5 valid steps, ceil(5 / 2) = 3 kept: 4, 3, 2; the invalid 5.0 is skipped
    assert mask.tolist() == [False, True, True, True, False, False]
    assert threshold.item() == 2.0
    assert psi[0].item() == 0.0
    assert psi.tolist() == pytest.approx(_psi_by_hand(advantages.tolist(), [1, 2, 3], 1.0))


def test_top_half_needs_a_valid_step():
    with pytest.raises(ValueError, match="no valid step"):
        top_half_mask(torch.zeros(4), torch.zeros(4, dtype=torch.bool))


def test_top_half_is_over_the_whole_batch_not_per_minibatch():
    advantages = torch.tensor([10.0, 9.0, 8.0, 1.0, 0.0, -1.0])
    whole, _ = top_half_mask(advantages)
    assert whole.tolist() == [True, True, True, False, False, False]
    # choosing inside the minibatch [1, 0, -1] would keep two of its steps
    per_minibatch, _ = top_half_mask(advantages[3:])
    assert per_minibatch.sum().item() == 2

    # through vmpo_loss: the second minibatch holds no selected step, so L_pi = 0 there
    config = VMPOLossSettings()
    multipliers = VMPOMultipliers.from_config(config, continuous=False)
    log_prob = torch.tensor([-0.5, -1.0, -1.5], requires_grad=True)
    logits = torch.zeros(3, 2)
    minibatch = VMPOBatch(
        log_prob=log_prob,
        advantages=advantages[3:],
        values=torch.zeros(3),
        returns=torch.zeros(3),
        old_policy=CategoricalParams(logits),
        new_policy=CategoricalParams(logits.clone().requires_grad_()),
    )
    full = FullBatch(advantages=advantages, index=torch.tensor([3, 4, 5]))
    _, stats = vmpo_loss(minibatch, multipliers, config, full_batch=full)
    assert stats["train/policy_loss"].item() == 0.0
    assert stats["train/top_half_threshold"].item() == 8.0
    _, wrong_stats = vmpo_loss(minibatch, multipliers, config)
    assert wrong_stats["train/policy_loss"].item() > 0.0

    # the first minibatch gets the full-batch psi of its rows
    first = minibatch._replace(advantages=advantages[:3])
    _, first_stats = vmpo_loss(
        first, multipliers, config, full_batch=full._replace(index=torch.tensor([0, 1, 2]))
    )
    psi = _psi_by_hand(advantages.tolist(), [0, 1, 2], config.init_eta)[:3]  # rows 0-2
    # the minibatch's share of the full-batch L_pi, scaled by N / B = 6 / 3
    expected = -2 * sum(p * lp for p, lp in zip(psi, [-0.5, -1.0, -1.5], strict=True))
    assert first_stats["train/policy_loss"].item() == pytest.approx(expected, rel=1e-5)


# --------------------------------------------------------------------------------------------
# KL terms
# --------------------------------------------------------------------------------------------


def test_categorical_kl_by_hand():
    old = [[1.0, 0.0, -1.0], [0.2, 0.4, 0.1]]
    new = [[0.5, 0.5, 0.0], [-0.3, 0.9, 0.0]]
    expected = []
    for o, n in zip(old, new, strict=True):
        p, q = _softmax(o), _softmax(n)
        expected.append(
            sum(pi * (math.log(pi) - math.log(qi)) for pi, qi in zip(p, q, strict=True))
        )
    got = categorical_kl(torch.tensor(old), torch.tensor(new))
    assert got.tolist() == pytest.approx(expected, rel=1e-5)


def test_categorical_kl_is_zero_for_equal_policies_and_handles_masked_actions():
    logits = torch.tensor([[0.3, -math.inf, 1.0]])
    assert categorical_kl(logits, logits).item() == pytest.approx(0.0, abs=1e-7)


def test_gaussian_decoupled_kl_by_hand():
    old_mean = [[0.0, 1.0], [0.5, -0.5]]
    old_log_std = [[0.0, math.log(0.5)], [math.log(2.0), 0.0]]
    new_mean = [[0.3, 0.8], [0.5, 0.5]]
    new_log_std = [[math.log(1.2), math.log(0.4)], [math.log(2.0), math.log(1.5)]]
    exp_mu, exp_sigma = [], []
    for mo, lo, mn, ln in zip(old_mean, old_log_std, new_mean, new_log_std, strict=True):
        so = [math.exp(x) for x in lo]
        sn = [math.exp(x) for x in ln]
        # KL(N(mu_old, s_old) || N(mu_new, s_old)) and KL(N(mu_old, s_old) || N(mu_old, s_new))
        exp_mu.append(sum(0.5 * (b - a) ** 2 / s**2 for a, b, s in zip(mo, mn, so, strict=True)))
        exp_sigma.append(
            sum(
                0.5 * (a**2 / b**2 - 1 + math.log(b**2 / a**2)) for a, b in zip(so, sn, strict=True)
            )
        )
    kl_mu, kl_sigma = gaussian_decoupled_kl(
        torch.tensor(old_mean),
        torch.tensor(old_log_std),
        torch.tensor(new_mean),
        torch.tensor(new_log_std),
    )
    assert kl_mu.tolist() == pytest.approx(exp_mu, rel=1e-5)
    assert kl_sigma.tolist() == pytest.approx(exp_sigma, rel=1e-5)
    # the second state has the old std in dim 0, so its covariance KL comes from dim 1 only
    assert kl_sigma[1].item() == pytest.approx(0.5 * (1 / 1.5**2 - 1 + math.log(1.5**2)), rel=1e-5)


def test_gaussian_decoupled_kl_gradients_are_split():
    old_mean, old_log_std = torch.zeros(3, 2), torch.zeros(3, 2)
    new_mean = torch.randn(3, 2, requires_grad=True)
    new_log_std = (0.3 * torch.randn(3, 2)).requires_grad_()
    kl_mu, kl_sigma = gaussian_decoupled_kl(old_mean, old_log_std, new_mean, new_log_std)
    grad_mean, grad_std = torch.autograd.grad(
        kl_mu.sum(), (new_mean, new_log_std), allow_unused=True
    )
    assert grad_mean.abs().sum() > 0 and grad_std is None
    grad_mean, grad_std = torch.autograd.grad(
        kl_sigma.sum(), (new_mean, new_log_std), allow_unused=True
    )
    assert grad_mean is None and grad_std.abs().sum() > 0


def test_kl_constraint_loss_by_hand_and_stop_gradients():
    kl = torch.tensor([0.02, 0.04, 0.0, 0.06], requires_grad=True)
    alpha = torch.tensor(5.0, requires_grad=True)
    eps = 0.01
    loss, mean_kl = kl_constraint_loss(kl, alpha=alpha, epsilon_alpha=eps)
    assert mean_kl.item() == pytest.approx(0.03)
    # value: alpha (eps - KL) + alpha KL = alpha eps
    assert loss.item() == pytest.approx(5.0 * eps)
    loss.backward()
    assert alpha.grad.item() == pytest.approx(eps - 0.03)  # dL/dalpha = eps - sg[KL]
    assert kl.grad.tolist() == pytest.approx([5.0 / 4] * 4)  # dL/dKL_s = sg[alpha] / |D|


def test_kl_constraint_loss_masks_invalid_states():
    kl = torch.tensor([0.02, 100.0, 0.04])
    valid = torch.tensor([True, False, True])
    _, mean_kl = kl_constraint_loss(kl, alpha=torch.tensor(1.0), epsilon_alpha=0.01, valid=valid)
    assert mean_kl.item() == pytest.approx(0.03)


# --------------------------------------------------------------------------------------------
# Directions of motion of the multipliers
# --------------------------------------------------------------------------------------------


def _eta_gradient_by_hand(advantages, eta, eps):
    # dL/deta = eps + log mean exp(A/eta) - E_psi[A] / eta
    k = len(advantages)
    psi = _softmax([a / eta for a in advantages])
    log_mean = math.log(sum(math.exp(a / eta) for a in advantages) / k)
    return eps + log_mean - sum(p * a for p, a in zip(psi, advantages, strict=True)) / eta


@pytest.mark.parametrize("eps, sign", [(0.5, 1.0), (0.01, -1.0)])
def test_temperature_gradient_matches_the_dual(eps, sign):
    selected = [ADVANTAGES[i] for i in TOP]
    eta = torch.tensor(ETA, requires_grad=True)
    temperature_loss(torch.tensor(selected), eta=eta, epsilon_eta=eps).backward()
    expected = _eta_gradient_by_hand(selected, ETA, eps)
    assert math.copysign(1.0, expected) == sign  # the two cases cover both signs
    assert eta.grad.item() == pytest.approx(expected, rel=1e-5)
    # and it equals eps - KL(psi || uniform over D~)
    psi = _softmax([a / ETA for a in selected])
    kl_to_uniform = sum(p * math.log(p * 3) for p in psi)
    assert eta.grad.item() == pytest.approx(eps - kl_to_uniform, rel=1e-5)


@pytest.mark.parametrize("eps, moves", [(0.5, "down"), (0.01, "up")])
def test_sgd_step_moves_eta_with_the_constraint(eps, moves):
    # psi is closer to uniform than eps allows (eps large): eta falls, sharpening psi;
    # psi is farther from uniform than eps allows (eps small): eta rises
    multipliers = VMPOMultipliers(continuous=False, init_eta=ETA)
    optimizer = torch.optim.SGD(multipliers.parameters(), lr=0.1)
    before = multipliers.eta.item()
    selected = torch.tensor([ADVANTAGES[i] for i in TOP])
    temperature_loss(selected, eta=multipliers.eta, epsilon_eta=eps).backward()
    optimizer.step()
    after = multipliers.eta.item()
    assert (after < before) if moves == "down" else (after > before)


def _one_alpha_step(multipliers, name, kl_value, eps):
    optimizer = torch.optim.SGD(multipliers.parameters(), lr=0.1)
    alpha = getattr(multipliers, name)
    before = alpha.item()
    loss, _ = kl_constraint_loss(torch.full((4,), kl_value), alpha=alpha, epsilon_alpha=eps)
    loss.backward()
    optimizer.step()
    return before, getattr(multipliers, name).item()


@pytest.mark.parametrize(
    "continuous, name", [(False, "alpha"), (True, "alpha_mu"), (True, "alpha_sigma")]
)
def test_sgd_step_raises_alpha_when_kl_exceeds_epsilon_and_lowers_it_when_slack(continuous, name):
    before, after = _one_alpha_step(VMPOMultipliers(continuous), name, kl_value=0.5, eps=0.01)
    assert after > before
    before, after = _one_alpha_step(VMPOMultipliers(continuous), name, kl_value=0.001, eps=0.01)
    assert after < before


def test_policy_gets_alpha_times_kl_gradient():
    old = torch.tensor([[1.0, 0.0, -1.0]])
    new = torch.tensor([[0.0, 0.5, 0.0]], requires_grad=True)
    alpha = torch.tensor(5.0, requires_grad=True)
    loss, _ = kl_constraint_loss(categorical_kl(old, new), alpha=alpha, epsilon_alpha=0.01)
    (grad_loss,) = torch.autograd.grad(loss, new)
    (grad_kl,) = torch.autograd.grad(categorical_kl(old, new).mean(), new)
    assert torch.allclose(grad_loss, 5.0 * grad_kl)


def test_multipliers_stay_positive_after_many_large_steps():
    multipliers = VMPOMultipliers(continuous=True)
    optimizer = torch.optim.SGD(multipliers.parameters(), lr=100.0)
    selected = torch.tensor([3.0, 2.0, 1.0])
    for _ in range(200):
        optimizer.zero_grad()
        # a huge eps drives eta down; KL far below eps drives both alphas down
        loss = temperature_loss(selected, eta=multipliers.eta, epsilon_eta=50.0)
        for name in ("alpha_mu", "alpha_sigma"):
            alpha = getattr(multipliers, name)
            loss = loss + kl_constraint_loss(torch.zeros(4), alpha=alpha, epsilon_alpha=50.0)[0]
        loss.backward()
        optimizer.step()
    for name in ("eta", "alpha_mu", "alpha_sigma"):
        value = getattr(multipliers, name)
        # the floor 1e-8, up to its float32 rounding
        assert torch.isfinite(value) and value.item() >= 0.999 * multipliers.floor > 0
    assert multipliers.eta.item() < 1e-3  # they did move, towards the floor


def test_multipliers_start_at_the_papers_initial_values():
    config = VMPOLossSettings()
    discrete = VMPOMultipliers.from_config(config, continuous=False)
    assert discrete.eta.item() == pytest.approx(1.0, rel=1e-6)
    assert discrete.alpha.item() == pytest.approx(5.0, rel=1e-6)
    continuous = VMPOMultipliers.from_config(config, continuous=True)
    assert continuous.alpha_mu.item() == pytest.approx(1.0, rel=1e-6)
    assert continuous.alpha_sigma.item() == pytest.approx(1.0, rel=1e-6)
    names = {name for name, _ in discrete.named_parameters()}
    assert names == {"eta_unconstrained", "alpha_unconstrained"}
    with pytest.raises(ValueError, match="alpha_mu"):
        _ = discrete.alpha_mu
    with pytest.raises(ValueError, match="alpha"):
        _ = continuous.alpha
    with pytest.raises(ValueError, match="init_eta"):
        VMPOMultipliers(continuous=False, init_eta=0.0)


# --------------------------------------------------------------------------------------------
# The combined loss
# --------------------------------------------------------------------------------------------


def _discrete_batch():
    old_logits = torch.tensor(
        [[1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [2.0, -1.0], [0.0, 0.0], [-1.0, 1.0]]
    )
    new_logits = (old_logits + 0.1 * torch.arange(12.0).reshape(6, 2)).requires_grad_()
    return VMPOBatch(
        log_prob=torch.tensor(LOG_PROBS, requires_grad=True),
        advantages=torch.tensor(ADVANTAGES),
        values=torch.tensor([0.5, 0.0, 1.0, -1.0, 2.0, 0.0], requires_grad=True),
        returns=torch.tensor([1.0, 0.5, 1.0, 0.0, 1.0, 0.5]),
        old_policy=CategoricalParams(old_logits),
        new_policy=CategoricalParams(new_logits),
    )


def test_vmpo_loss_discrete_sums_the_hand_computed_terms():
    config = VMPOLossSettings(value_loss_coef=0.7)
    multipliers = VMPOMultipliers.from_config(config, continuous=False)
    batch = _discrete_batch()
    loss, stats = vmpo_loss(batch, multipliers, config)

    eta, alpha = config.init_eta, config.init_alpha
    psi = _psi_by_hand(ADVANTAGES, TOP, eta)
    l_pi = -sum(p * lp for p, lp in zip(psi, LOG_PROBS, strict=True))
    selected = [ADVANTAGES[i] for i in TOP]
    l_eta = eta * config.epsilon_eta + eta * math.log(sum(math.exp(a / eta) for a in selected) / 3)
    kls = []
    for o, n in zip(
        batch.old_policy.logits.tolist(), batch.new_policy.logits.tolist(), strict=True
    ):
        p, q = _softmax(o), _softmax(n)
        kls.append(sum(pi * math.log(pi / qi) for pi, qi in zip(p, q, strict=True)))
    mean_kl = sum(kls) / 6
    l_alpha = alpha * config.epsilon_alpha  # the value of Eq. (5); its gradients differ
    values, returns = batch.values.tolist(), batch.returns.tolist()
    l_v = 0.5 * sum((v - g) ** 2 for v, g in zip(values, returns, strict=True)) / 6

    assert stats["train/policy_loss"].item() == pytest.approx(l_pi, rel=1e-5)
    assert stats["train/temperature_loss"].item() == pytest.approx(l_eta, rel=1e-5)
    assert stats["train/kl"].item() == pytest.approx(mean_kl, rel=1e-4)  # float32 KL ~ 1e-3
    assert stats["train/kl_loss"].item() == pytest.approx(l_alpha, rel=1e-5)
    assert stats["train/value_loss"].item() == pytest.approx(l_v, rel=1e-5)
    assert loss.item() == pytest.approx(0.7 * l_v + l_pi + l_eta + l_alpha, rel=1e-5)
    assert stats["train/eta"].item() == pytest.approx(eta, rel=1e-6)
    assert stats["train/alpha"].item() == pytest.approx(alpha, rel=1e-6)
    assert stats["train/top_half_threshold"].item() == 1.0
    ess = 1 / sum(p * p for p in psi)
    assert stats["train/psi_ess"].item() == pytest.approx(ess, rel=1e-5)
    assert stats["train/psi_ess_fraction"].item() == pytest.approx(ess / 3, rel=1e-5)
    assert all(not value.requires_grad for value in stats.values())

    loss.backward()
    # value loss gradient: coef * (V - G) / |D|
    expected = [0.7 * (v - g) / 6 for v, g in zip(values, returns, strict=True)]
    assert batch.values.grad.tolist() == pytest.approx(expected, rel=1e-5)
    # the policy's log-probs get -psi, zero outside the top half
    assert batch.log_prob.grad.tolist() == pytest.approx([-p for p in psi], rel=1e-5)
    assert multipliers.eta_unconstrained.grad is not None
    assert multipliers.alpha_unconstrained.grad.item() != 0


def test_vmpo_loss_continuous_stats_and_decoupled_terms():
    config = VMPOLossSettings()
    multipliers = VMPOMultipliers.from_config(config, continuous=True)
    old_mean, old_log_std = torch.zeros(6, 2), torch.full((6, 2), math.log(0.5))
    new_mean = torch.full((6, 2), 0.1, requires_grad=True)
    new_log_std = torch.full((6, 2), math.log(0.6), requires_grad=True)
    batch = VMPOBatch(
        log_prob=torch.tensor(LOG_PROBS),
        advantages=torch.tensor(ADVANTAGES),
        values=torch.zeros(6),
        returns=torch.zeros(6),
        old_policy=DiagGaussianParams(old_mean, old_log_std),
        new_policy=DiagGaussianParams(new_mean, new_log_std),
    )
    loss, stats = vmpo_loss(batch, multipliers, config)
    assert {
        "train/policy_loss",
        "train/value_loss",
        "train/temperature_loss",
        "train/kl_loss",
        "train/eta",
        "train/alpha_mu",
        "train/alpha_sigma",
        "train/kl_mu",
        "train/kl_sigma",
        "train/top_half_threshold",
        "train/psi_ess",
    } <= stats.keys()
    assert "train/alpha" not in stats and "train/kl" not in stats
    kl_mu = 2 * 0.5 * 0.1**2 / 0.5**2
    kl_sigma = 2 * 0.5 * (0.5**2 / 0.6**2 - 1 + math.log(0.6**2 / 0.5**2))
    assert stats["train/kl_mu"].item() == pytest.approx(kl_mu, rel=1e-5)
    assert stats["train/kl_sigma"].item() == pytest.approx(kl_sigma, rel=1e-5)
    loss.backward()
    # KL_mu = 0.08 > eps_mu = 0.01 and KL_Sigma ~ 0.03 > 5e-5: both alphas would rise
    assert multipliers.alpha_mu_unconstrained.grad.item() < 0
    assert multipliers.alpha_sigma_unconstrained.grad.item() < 0


def test_minibatch_policy_losses_average_to_the_full_batch_loss():
    config = VMPOLossSettings()
    multipliers = VMPOMultipliers.from_config(config, continuous=False)
    batch = _discrete_batch()
    _, full_stats = vmpo_loss(batch, multipliers, config)
    minibatch_losses = []
    for rows in ([4, 0, 2], [1, 5, 3]):
        index = torch.tensor(rows)
        minibatch = VMPOBatch(
            log_prob=batch.log_prob[index],
            advantages=batch.advantages[index],
            values=batch.values[index],
            returns=batch.returns[index],
            old_policy=CategoricalParams(batch.old_policy.logits[index]),
            new_policy=CategoricalParams(batch.new_policy.logits[index]),
        )
        full = FullBatch(advantages=batch.advantages, index=index)
        _, stats = vmpo_loss(minibatch, multipliers, config, full_batch=full)
        assert stats["train/temperature_loss"].item() == pytest.approx(
            full_stats["train/temperature_loss"].item()
        )
        minibatch_losses.append(stats["train/policy_loss"].item())
    assert sum(minibatch_losses) / 2 == pytest.approx(
        full_stats["train/policy_loss"].item(), rel=1e-6
    )


def test_vmpo_loss_rejects_mismatched_action_spaces():
    config = VMPOLossSettings()
    with pytest.raises(ValueError, match="action space"):
        vmpo_loss(_discrete_batch(), VMPOMultipliers(continuous=True), config)


def test_psi_ess_is_k_for_equal_advantages():
    config = VMPOLossSettings()
    batch = _discrete_batch()._replace(advantages=torch.zeros(6))
    _, stats = vmpo_loss(batch, VMPOMultipliers.from_config(config, continuous=False), config)
    assert stats["train/psi_ess"].item() == pytest.approx(3.0, rel=1e-6)
    assert stats["train/psi_ess_fraction"].item() == pytest.approx(1.0, rel=1e-6)


# --------------------------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------------------------


def test_config_defaults():
    config = VMPOLossSettings()
    assert (config.init_eta, config.init_alpha) == (1.0, 5.0)
    assert config.multiplier_floor == 1e-8
    assert config.top_k_fraction == 0.5
    assert (config.popart_scale_lower, config.popart_scale_upper) == (1e-2, 1e6)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.epsilon_eta = 1.0  # type: ignore[misc]  # frozen on purpose


@pytest.mark.parametrize(
    "field, value",
    [
        ("epsilon_eta", 0.0),
        ("epsilon_alpha", -0.1),
        ("epsilon_alpha_sigma", math.nan),
        ("init_alpha", 0.0),
        ("init_eta", 1e-9),
        ("value_loss_coef", -1.0),
        ("popart", "yes"),
    ],
)
def test_config_rejects_bad_values_naming_the_field(field, value):
    with pytest.raises(ValueError, match=f"VMPOLossSettings.{field} must be .*got {value!r}"):
        loss_settings(VMPOLossSettings(**{field: value}))


# --------------------------------------------------------------------------------------------
# PopArt
# --------------------------------------------------------------------------------------------


def test_popart_update_preserves_unnormalised_outputs():
    torch.manual_seed(0)
    head = PopArt(4, step_size=0.3)
    x = torch.randn(16, 4)
    before = head.unnormalize(head(x))
    for scale in (100.0, 1000.0, 5.0):
        head.update(scale * torch.randn(32, 1) + scale)
        after = head.unnormalize(head(x))
        assert close(after, before, F64_REL)
    assert head.mu.item() != 0.0 and head.sigma.item() != 1.0  # the statistics did move
    targets = torch.randn(8, 1) * 50
    assert close(head.unnormalize(head.normalize(targets)), targets, F64_REL)


def test_popart_scale_is_bounded_below():
    head = PopArt(2, step_size=1.0, scale_lower=1e-2)
    head.update(torch.full((8, 1), 3.0))  # zero variance
    assert head.sigma.item() == pytest.approx(1e-2)


def test_popart_update_of_k_steps_equals_k_updates():
    torch.manual_seed(0)
    once, stepwise = PopArt(3, step_size=0.05), PopArt(3, step_size=0.05)
    stepwise.load_state_dict(once.state_dict())
    targets = 10.0 * torch.randn(16, 1) + 4.0
    x = torch.randn(5, 3)
    once.update(targets, steps=7)
    for _ in range(7):
        stepwise.update(targets)
    assert close(once.mu, stepwise.mu, F64_REL) and close(once.nu, stepwise.nu, F64_REL)
    assert close(once.unnormalize(once(x)), stepwise.unnormalize(stepwise(x)), F64_REL)
    with pytest.raises(ValueError, match="steps must be a positive int"):
        once.update(targets, steps=0)
