"""The memory policies' ``reconstruct_observation`` auxiliary loss: off by default, what its
target is for each kind of observation, what its gradient reaches, that acting still equals
training, that every learner adds and logs it, and save/load."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from minigrid.wrappers import ImgObsWrapper, RGBImgPartialObsWrapper
from stable_baselines3.common.vec_env import DummyVecEnv
from torch import nn

import txrl.envs  # noqa: F401 - registers the tasks
from txrl import VMPO, MemoryPPO
from txrl.sb3.policies import (
    MemoryActorCriticCnnPolicy,
    MemoryActorCriticPolicy,
    MemoryMultiInputPolicy,
)
from txrl.sb3.reconstruction import GRID_CODES, RECONSTRUCTION_LOSS, ObservationDecoder

from .test_common import assert_next_rollout_recomputed_exactly

SMALL = {"d_model": 16, "n_layers": 1, "n_heads": 2, "memory_length": 8, "net_arch": [16]}
PIXELS = spaces.Box(0, 255, (3, 84, 84), dtype=np.uint8)  # as the policy gets it, transposed
CODES = spaces.Box(0, 255, (7, 7, 3), dtype=np.uint8)  # MiniGrid's symbolic view
VECTOR = spaces.Box(-1.0, 1.0, (5,), dtype=np.float32)
DICT = spaces.Dict({"image": PIXELS, "vector": VECTOR})
POLICY_OF = {
    "pixels": (MemoryActorCriticCnnPolicy, PIXELS),
    "codes": (MemoryActorCriticCnnPolicy, CODES),
    "vector": (MemoryActorCriticPolicy, VECTOR),
    "dict": (MemoryMultiInputPolicy, DICT),
}


def rgb_memory(max_steps: int = 16) -> gym.Env:
    """MiniGrid-MemoryS7 seen as pixels (42x42 RGB, SB3's NatureCNN reads it), episodes cut
    at ``max_steps`` so that they end inside a rollout."""
    env = gym.make("MiniGrid-MemoryS7-v0", max_steps=max_steps)
    return ImgObsWrapper(RGBImgPartialObsWrapper(env, tile_size=6))


def image_env(n_envs: int = 2) -> DummyVecEnv:
    return DummyVecEnv([rgb_memory] * n_envs)


def learner(
    algo: type[MemoryPPO] | type[VMPO],
    policy_name: str,
    settings: dict,
    *,
    n_steps: int = 32,
    segment_length: int = 16,
    **kwargs: object,
) -> MemoryPPO | VMPO:
    """``algo`` on two pixel envs with the loss on, each update one minibatch of the whole
    rollout (``kwargs``: more of the learner's arguments)."""
    return algo(
        policy_name,
        image_env(n_envs=2),
        n_steps=n_steps,
        batch_size=2 * n_steps,
        segment_length=segment_length,
        seed=0,
        policy_kwargs=settings | {"reconstruct_observation": True},
        **kwargs,
    )


def policy(kind: str, **options: object) -> MemoryActorCriticPolicy:
    cls, space = POLICY_OF[kind]
    torch.manual_seed(0)
    settings = SMALL | options
    return cls(space, spaces.Discrete(3), lambda _: 1e-3, **settings)  # type: ignore[arg-type]


def sequences(
    policy: MemoryActorCriticPolicy, t: int = 4, b: int = 2
) -> tuple[object, torch.Tensor, object, torch.Tensor]:
    """Observations (T * B, ...) drawn from the policy's space (a grid's codes as MiniGrid's),
    actions, a fresh state and episode starts (T, B)."""
    space = policy.observation_space
    space.seed(0)
    samples = [space.sample() for _ in range(t * b)]
    if space is CODES:  # the codes a MiniGrid view holds, not any byte
        samples = [sample % GRID_CODES for sample in samples]
    if isinstance(space, spaces.Dict):
        obs: object = {k: torch.as_tensor(np.stack([s[k] for s in samples])) for k in space.spaces}
    else:
        obs = torch.as_tensor(np.stack(samples))
    starts = torch.zeros(t, b, dtype=torch.bool)
    starts[0] = True
    return obs, torch.zeros(t * b, dtype=torch.long), policy.initial_state(b), starts


def training_pass(policy: MemoryActorCriticPolicy) -> tuple[torch.Tensor, torch.Tensor, dict]:
    obs, actions, state, starts = sequences(policy)
    values, log_prob, _, _, out = policy.evaluate_sequences(obs, actions, state, starts)
    return values, log_prob, out.aux_losses


@pytest.mark.parametrize("kind", ["pixels", "codes"])
def test_off_by_default_nothing_changes(kind: str) -> None:
    off = policy(kind)
    assert off.reconstruct_observation is False and not hasattr(off, "observation_decoder")
    on = policy(kind, reconstruct_observation=True)
    added = set(on.state_dict()) - set(off.state_dict())
    assert added and all(key.startswith("observation_decoder.") for key in added)
    assert set(off.state_dict()) <= set(on.state_dict())
    # the same weights give the same training pass: the option only adds the decoder's loss
    on.load_state_dict(off.state_dict() | {k: on.state_dict()[k] for k in added})
    values_off, log_prob_off, aux_off = training_pass(off)
    values_on, log_prob_on, aux_on = training_pass(on)
    assert RECONSTRUCTION_LOSS not in aux_off and set(aux_on) == {RECONSTRUCTION_LOSS}
    assert torch.equal(values_off, values_on) and torch.equal(log_prob_off, log_prob_on)


@pytest.mark.parametrize("kind", ["pixels", "codes", "vector", "dict"])
def test_the_gradient_reaches_decoder_memory_and_encoder(kind: str) -> None:
    on = policy(kind, reconstruct_observation=True)
    _, _, aux = training_pass(on)
    loss = aux[RECONSTRUCTION_LOSS]
    assert loss.ndim == 0 and loss.item() > 0.0
    loss.backward()
    trained = ["observation_decoder", "backbone", "features_extractor"]
    if kind == "vector":  # flattened: SB3's FlattenExtractor has no weights to train
        assert not list(on.features_extractor.parameters())
        trained.remove("features_extractor")
    for name in trained:
        grads = [p.grad for p in getattr(on, name).parameters() if p.requires_grad]
        assert any(g is not None and g.abs().sum() > 0 for g in grads), name
    # the heads do not take part in the loss
    assert all(p.grad is None for p in on.action_net.parameters())


class Fixed(nn.Module):
    """A decoder network that returns a given output whatever it reads."""

    def __init__(self, output: torch.Tensor) -> None:
        super().__init__()
        self.output = output

    def forward(self, memory: torch.Tensor) -> torch.Tensor:
        return self.output


@pytest.mark.parametrize("channels_first", [True, False])
def test_pixel_target_is_the_image_in_unit_range_in_either_layout(channels_first: bool) -> None:
    shape = (3, 40, 36) if channels_first else (40, 36, 3)
    decoder = ObservationDecoder(spaces.Box(0, 255, shape, dtype=np.uint8), memory_dim=8)
    rng = np.random.default_rng(0)
    image = torch.as_tensor(rng.choice([0, 255], size=(2, *shape)).astype(np.uint8))
    chw = image.permute(0, 3, 1, 2) if not channels_first else image
    assert decoder(torch.zeros(2, 8)).shape == (2, 3, 40, 36)  # every side decoded exactly
    decoder.net = Fixed((chw.float() / 255.0 - 0.5) * 40.0)  # logits of the true pixels
    assert decoder.loss(torch.zeros(2, 8), image).item() < 1e-6
    decoder.net = Fixed((0.5 - chw.float() / 255.0) * 40.0)  # every pixel wrong
    assert decoder.loss(torch.zeros(2, 8), image).item() > 10.0


def test_code_target_is_each_cells_category() -> None:
    decoder = ObservationDecoder(CODES, memory_dim=8)
    k = GRID_CODES
    codes = torch.randint(0, k, (2, 7, 7, 3))

    def logits(cells: torch.Tensor) -> Fixed:  # large logits on the codes ``cells``
        chosen = nn.functional.one_hot(cells.permute(0, 3, 1, 2), k).permute(0, 4, 1, 2, 3)
        return Fixed(chosen.reshape(2, k * 3, 7, 7).float() * 50.0)

    # logits over every code a MiniGrid view holds: 11 object types, 6 colours, 3 states
    assert k == 11 and decoder(torch.zeros(2, 8)).shape == (2, k, 3, 7, 7)
    decoder.net = logits(codes)
    assert decoder.loss(torch.zeros(2, 8), codes.to(torch.uint8)).item() < 1e-6
    # a neighbouring code is as wrong as any other: the codes are categories
    losses = []
    for wrong in ((codes + 1) % k, (codes + 5) % k):
        decoder.net = logits(wrong)
        losses.append(decoder.loss(torch.zeros(2, 8), codes.to(torch.uint8)).item())
    assert losses[0] == pytest.approx(losses[1]) and losses[0] > 10.0


def test_a_code_past_minigrids_is_a_clear_error() -> None:
    decoder = ObservationDecoder(CODES, memory_dim=8)
    codes = torch.zeros(2, 7, 7, 3, dtype=torch.uint8)
    codes[1, 3, 3, 0] = 200  # no MiniGrid object type
    with pytest.raises(
        ValueError, match=r"a code of 200, but a MiniGrid view's codes run from 0 to 10"
    ):
        decoder.loss(torch.zeros(2, 8), codes)


def test_dict_observations_need_one_image_entry() -> None:
    assert ObservationDecoder(DICT, memory_dim=8).entry == "image"
    for space in (
        spaces.Dict({"vector": VECTOR}),
        spaces.Dict({"a": PIXELS, "b": CODES}),
    ):
        with pytest.raises(ValueError, match=r"reconstruct_observation decodes the one image"):
            MemoryMultiInputPolicy(
                space, spaces.Discrete(3), lambda _: 1e-3, reconstruct_observation=True, **SMALL
            )


def test_a_bad_setting_is_named() -> None:
    with pytest.raises(ValueError, match=r"reconstruct_observation must be True or False"):
        policy("vector", reconstruct_observation="yes")


def test_acting_equals_training_with_the_loss_on() -> None:
    model = learner(MemoryPPO, "CnnGTrXLPolicy", SMALL, n_steps=24, segment_length=8, n_epochs=1)
    model.learn(48)  # one update: the decoder's gradient has moved the encoder and memory
    assert RECONSTRUCTION_LOSS in {k.rpartition("/")[2] for k in model.logger.name_to_value}
    assert_next_rollout_recomputed_exactly(model)


@pytest.mark.parametrize(
    ("backbone", "settings"),
    [
        ("gtrxl", SMALL),
        ("lstm", {"hidden_size": 16, "net_arch": [16]}),
        ("linear", {"d_model": 16, "n_layers": 1, "n_heads": 2, "net_arch": [16]}),
    ],
)
def test_memory_ppo_adds_weights_and_logs_it(backbone: str, settings: dict) -> None:
    model = learner(
        MemoryPPO,
        "CnnMemoryPolicy",
        settings | {"backbone": backbone},
        n_epochs=2,
        aux_loss_coef={RECONSTRUCTION_LOSS: 0.5},
    )
    decoder = [p.detach().clone() for p in model.policy.observation_decoder.parameters()]
    model.learn(256)
    logged = model.logger.name_to_value[f"train/aux/{RECONSTRUCTION_LOSS}"]
    assert 0.0 < logged < 1.0  # a binary cross-entropy on pixels in [0, 1]
    moved = model.policy.observation_decoder.parameters()
    assert any(not torch.equal(a, b) for a, b in zip(decoder, moved, strict=True))


def test_vmpo_trains_with_it_and_save_load_keeps_it(tmp_path) -> None:
    model = learner(VMPO, "CnnGTrXLPolicy", SMALL, n_epochs=1)
    model.learn(128)
    assert 0.0 < model.logger.name_to_value[f"train/aux/{RECONSTRUCTION_LOSS}"] < 1.0
    model.save(tmp_path / "model.zip")
    loaded = VMPO.load(tmp_path / "model.zip")
    assert loaded.policy.reconstruct_observation is True
    for key, value in model.policy.observation_decoder.state_dict().items():
        assert torch.equal(value, loaded.policy.observation_decoder.state_dict()[key]), key
    obs = model.env.reset()
    state = None
    for _ in range(3):  # the loaded policy acts as the saved one
        saved, _ = model.predict(obs, state, deterministic=True)
        again, state = loaded.predict(obs, state, deterministic=True)
        assert np.array_equal(saved, again)
