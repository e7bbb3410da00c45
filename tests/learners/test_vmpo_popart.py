"""VMPO's PopArt statistics move at the cadence of learner steps and preserve the outputs."""

from __future__ import annotations

import math

import numpy as np
import torch
from stable_baselines3.common.logger import Logger

from txrl import VMPO
from txrl.learners.vmpo.popart import PopArtValueHead

from ..numeric import F32_REL, close
from .test_vmpo_algorithm import TINY, small_env

# 2 envs x 16 steps = 4 segments of 8, one per minibatch, 2 epochs: 8 learner steps a rollout
SETTINGS = {"n_steps": 16, "batch_size": 8, "segment_length": 8, "n_epochs": 2}


def popart_model() -> VMPO:
    model = VMPO("MlpGTrXLPolicy", small_env(), policy_kwargs=TINY, seed=0, **SETTINGS)
    model.set_logger(Logger(folder=None, output_formats=[]))  # _update_settings records stats
    return model


def test_learner_steps_per_rollout_counts_every_minibatch_update() -> None:
    assert popart_model()._learner_steps_per_rollout() == 8


def test_popart_sigma_tracks_a_shifted_return_scale_within_the_stated_learner_steps() -> None:
    """Returns switch from scale 1 to mean 0, std 100. With step size beta per learner step,
    after n steps a fraction 1 - (1 - beta)^n of the way is made: sigma is within 10% of 100
    once nu >= 90^2, i.e. after n = ln((1e4 - 8100) / (1e4 - 1)) / ln(1 - beta) ~ 16,600
    learner steps for beta = 1e-4, however many of them one rollout holds."""
    model = popart_model()
    head = model.policy.value_net
    assert isinstance(head, PopArtValueHead)
    beta = head.step_size
    k = 2 * 4  # learner steps per rollout: 2 epochs x 4 minibatches of one segment
    n_needed = math.log((1e4 - 90.0**2) / (1e4 - 1.0)) / math.log(1 - beta)
    rollouts = math.ceil(n_needed / k)
    shape = model.rollout_buffer.returns.shape
    returns = np.random.default_rng(0).normal(size=shape)
    returns = (returns - returns.mean()) / returns.std() * 100.0  # exactly mean 0, std 100
    model.rollout_buffer.returns[:] = returns
    for _ in range(rollouts - 1):
        model._update_settings()
    assert float(head.sigma) < 90.0  # one rollout short: not yet
    model._update_settings()
    assert 90.0 <= float(head.sigma) <= 100.0
    moved = 1 - (1 - beta) ** (k * rollouts)
    assert math.isclose(float(head.nu), 1 + (1e4 - 1) * moved, rel_tol=1e-3)


def test_popart_update_in_training_preserves_the_value_outputs() -> None:
    model = popart_model()
    model.learn(32)  # a rollout and a training pass: returns in the buffer
    head = model.policy.value_net
    assert isinstance(head, PopArtValueHead)
    model.rollout_buffer.returns[:] *= 50.0  # a new return scale moves the statistics
    features = torch.randn(10, head.linear.in_features, device=head.linear.weight.device)
    with torch.no_grad():
        before = head(features)
        sigma_before = head.sigma.clone()
        model._update_settings()
        after = head(features)
    assert not torch.equal(head.sigma, sigma_before)
    assert close(after, before, F32_REL)
