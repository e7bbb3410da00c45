"""Stable-Baselines3 actor-critic policies whose trunk is any txrl memory backbone.

observation -> features extractor -> backbone (memory, shared by actor and critic)
-> SB3 ``MlpExtractor`` -> action distribution and value.

Legend: T steps, B envs, X = T * B transitions, F features, D backbone width.
The policy uses only the backbone protocol (`txrl.nn.protocol`); which memory model
sits inside is a setting (``backbone=...``) with one alias class per built-in choice.
SB3's ``predict`` with a state comes from `txrl.sb3.predict`, the ``past_prediction``
loss from `txrl.sb3.past_prediction`.

Every class here is pickled by its path ``txrl.sb3.policies.<name>`` when SB3 saves a model
(its ``policy_class``), so they stay defined in this module.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Any, ClassVar

import torch
from gymnasium import spaces
from stable_baselines3.common.distributions import Distribution
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.preprocessing import preprocess_obs
from stable_baselines3.common.torch_layers import (
    BaseFeaturesExtractor,
    FlattenExtractor,
    MlpExtractor,
)
from stable_baselines3.common.type_aliases import PyTorchObs, Schedule
from torch import nn

from txrl.backbones import make_backbone, shared_settings
from txrl.nn.pair import PairedBackbone
from txrl.nn.protocol import Backbone, BackboneOutput
from txrl.nn.state import clone_state
from txrl.sb3.distributions import draw_discrete, draw_discrete_action
from txrl.sb3.extractors import (
    MemoryCombinedExtractor,
    SmallCNN,
    chosen_extractor,
    code_grid_settings,
)
from txrl.sb3.past_prediction import (
    PAST_PREDICTION_LOSS,
    past_heads,
    past_offsets,
    past_prediction_loss,
)
from txrl.sb3.predict import MemoryPredictPolicy
from txrl.sb3.reconstruction import RECONSTRUCTION_LOSS, ObservationDecoder, reconstructed_entry

#: Precisions of the training pass (``training_precision``); acting is always fp32.
TRAINING_PRECISIONS = ("fp32", "bf16")
CRITIC_MEMORIES = ("shared", "separate")

#: Backbone settings the policy takes as keyword arguments of its own (the others come in
#: ``backbone_kwargs``): those the backbones' records share, as a config's ``policy:``
#: section does.
BACKBONE_KEYS: tuple[str, ...] = shared_settings()


class MemoryActorCriticPolicy(MemoryPredictPolicy):
    """Actor-critic with a memory backbone between the features extractor and the heads.

    ``n_layers``, ``d_model``, ``n_heads``, ``memory_length``, ``gate``, ``gate_bias``,
    ``hidden_size``: backbone settings taken by name, those the registry's records share
    (``BACKBONE_KEYS``, keyword arguments); ``None`` keeps the
    backbone's own default.

    :param backbone: a name from ``txrl.backbone_names()``; the alias classes set a default.
    :param backbone_kwargs: further settings of the chosen backbone (e.g. a variant's own).
    :param training_precision: ``"fp32"``, or ``"bf16"``: the training pass
        (`evaluate_sequences`) runs the features extractor, backbone and MLPs under
        ``torch.autocast`` with bfloat16 products (weights, gradients, optimizer and heads
        stay fp32). Acting and ``predict`` always run in fp32, so the rollout's log-probs
        and values are exact; under bf16 the training pass recomputes them within the
        tolerance that ``tests/sb3/test_precision.py`` states, not to 1e-5.
    :param predict_past: offsets k (steps back) of an auxiliary loss, ``past_prediction``,
        that makes the memory keep what it saw: from the backbone's output at step t, one
        linear head per k predicts the features extractor's output at step t - k
        (stop-gradient targets standardised per feature over the batch, squared error), over
        the pairs of a training sequence that lie in one episode. In the spirit of the
        observation-reconstruction loss that Pleines et al. (2023, Memory Gym) found
        Transformer-XL agents to need; here the targets are past steps, so the loss rewards
        retrieving them, not only encoding the present (k = 0 reconstructs the current
        step's features). Learners add it with ``aux_loss_coef["past_prediction"]`` and log
        it as ``train/aux/past_prediction``; empty (the default): no heads, no loss. With a
        separate critic memory the actor's memory output makes the predictions.
    :param reconstruct_observation: add the auxiliary loss ``observation_reconstruction``
        (`txrl.sb3.reconstruction`): a decoder from the backbone's output at step t back
        to the observation at step t, transposed convolutions to the pixels scaled to [0, 1]
        (binary cross-entropy) for images, logits over the codes (cross-entropy) for
        MiniGrid-style grids, an MLP to the vector (squared error) otherwise; a Dict's one
        image entry. The target is the observation itself, so the loss trains the features
        extractor and the memory as well as the decoder: the loss that Pleines et al. (2025,
        Memory Gym) found Transformer-XL agents to need on its finite tasks. Learners add it
        with ``aux_loss_coef["observation_reconstruction"]`` (1 when not listed) and log it
        as ``train/aux/observation_reconstruction``; ``False`` (the default): no decoder, no
        loss. With a separate critic memory the actor's memory output is decoded.
    :param critic_memory: ``"shared"`` (the default): actor and critic heads read one
        memory, so the value loss also trains what the actor remembers; ``"separate"``: the
        critic reads a second backbone of the same settings, with its own state
        ([`txrl.nn.PairedBackbone`][txrl.nn.PairedBackbone]), as sb3-contrib's RecurrentPPO gives its critic an
        LSTM of its own by default. Twice the backbone's cost per step.
    The other parameters are those of SB3's ``ActorCriticPolicy``; the features extractor is
    always shared (it has no memory).
    """

    default_backbone: ClassVar[str] = "gtrxl"

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        lr_schedule: Schedule,
        net_arch: list[int] | dict[str, list[int]] | None = None,
        activation_fn: type[nn.Module] = nn.Tanh,
        *,
        backbone: str | None = None,
        backbone_kwargs: dict[str, Any] | None = None,
        training_precision: str = "fp32",
        predict_past: tuple[int, ...] | list[int] = (),
        reconstruct_observation: bool = False,
        critic_memory: str = "shared",
        share_features_extractor: bool = True,
        **kwargs: Any,
    ) -> None:
        self.predict_past = past_offsets(predict_past)
        if not isinstance(reconstruct_observation, bool):
            raise ValueError(
                f"reconstruct_observation must be True or False, got {reconstruct_observation!r}"
            )
        if reconstruct_observation:
            reconstructed_entry(observation_space)  # a Dict without one image entry is named now
        self.reconstruct_observation = reconstruct_observation
        if critic_memory not in CRITIC_MEMORIES:
            raise ValueError(
                f"critic_memory must be one of {', '.join(CRITIC_MEMORIES)}, got {critic_memory!r}"
            )
        self.critic_memory = critic_memory
        if training_precision not in TRAINING_PRECISIONS:
            raise ValueError(
                f"training_precision must be one of {', '.join(TRAINING_PRECISIONS)}, "
                f"got {training_precision!r}"
            )
        self.training_precision = training_precision
        if not share_features_extractor:
            raise ValueError(
                "memory policies share one features extractor between actor and critic (a "
                "critic with a memory of its own: critic_memory='separate')"
            )
        # the shared backbone settings (n_layers, d_model, ...) come as keyword arguments
        given = {key: kwargs.pop(key) for key in BACKBONE_KEYS if key in kwargs}
        default_optimizer = kwargs.get("optimizer_class", torch.optim.Adam) is torch.optim.Adam
        if kwargs.get("optimizer_kwargs") is None and default_optimizer:
            # SB3's default (Adam, eps 1e-5) with the fused kernel: the same update in fewer
            # kernels (bench/results/throughput_changes.md, "fused Adam")
            kwargs["optimizer_kwargs"] = {"eps": 1e-5, "fused": True}
        chosen = self.encoder_class(observation_space, kwargs.get("features_extractor_class"))
        kwargs.update(code_grid_settings(observation_space, chosen, kwargs))
        self.backbone_name = backbone or self.default_backbone
        self.backbone_settings = {k: v for k, v in given.items() if v is not None} | dict(
            backbone_kwargs or {}
        )
        super().__init__(
            observation_space, action_space, lr_schedule, net_arch, activation_fn, **kwargs
        )

    # ------------------------------------------------------------------ construction

    def _build_mlp_extractor(self) -> None:
        # called by ActorCriticPolicy._build once the features extractor exists
        def build() -> Backbone:
            return make_backbone(
                self.backbone_name, input_dim=int(self.features_dim), **self.backbone_settings
            )

        self.backbone: Backbone = build()
        memory_dim = self.backbone.output_dim  # what each head reads
        if self.critic_memory == "separate":
            self.backbone = PairedBackbone(self.backbone, build())
        self.mlp_extractor = MlpExtractor(
            memory_dim,
            net_arch=self.net_arch,
            activation_fn=self.activation_fn,
            device=self.device,
        )
        # The auxiliary modules draw their initial weights from a fork of the generator, so
        # the weights the policy shares with and without them (the heads SB3 builds next)
        # start the same at a given seed, and a paired on/off study differs only in the loss.
        with torch.random.fork_rng(devices=[]):
            if self.predict_past:
                self.past_heads = past_heads(memory_dim, self.predict_past, int(self.features_dim))
            if self.reconstruct_observation:
                self.observation_decoder = ObservationDecoder(self.observation_space, memory_dim)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        settings = dict(self.backbone_settings)
        data["backbone"] = self.backbone_name
        data["backbone_kwargs"] = {k: v for k, v in settings.items() if k not in BACKBONE_KEYS}
        data.update({k: v for k, v in settings.items() if k in BACKBONE_KEYS})
        data["training_precision"] = self.training_precision
        data["predict_past"] = list(self.predict_past)
        data["reconstruct_observation"] = self.reconstruct_observation
        data["critic_memory"] = self.critic_memory
        return data

    def _training_autocast(self) -> contextlib.AbstractContextManager[Any]:
        """bfloat16 autocast on the policy's device for ``training_precision="bf16"``."""
        if self.training_precision == "bf16":
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    @classmethod
    def encoder_class(
        cls, observation_space: spaces.Space, given: type[BaseFeaturesExtractor] | None = None
    ) -> type[BaseFeaturesExtractor]:
        """The features extractor this policy builds for ``observation_space`` when
        ``features_extractor_class`` is ``given`` (``None``: the class's default): MiniGrid-style
        code grids get `SymbolicGridExtractor` unless another
        extractor was named (`txrl.sb3.extractors.chosen_extractor`)."""
        parameter = inspect.signature(cls.__init__).parameters.get("features_extractor_class")
        default = FlattenExtractor if parameter is None else parameter.default
        return chosen_extractor(observation_space, given, default)

    @classmethod
    def valid_kwargs(cls) -> list[str]:
        """Keyword arguments the policy accepts (for error messages on unknown ones)."""
        own = [
            p
            for p in inspect.signature(MemoryActorCriticPolicy.__init__).parameters
            if p not in ("self", "kwargs")
        ]
        base = [
            p
            for p in inspect.signature(ActorCriticPolicy.__init__).parameters
            if p not in ("self",)
        ]
        hidden = {"observation_space", "action_space", "lr_schedule", "use_sde"}
        return sorted({*own, *base, *BACKBONE_KEYS} - hidden)

    # ------------------------------------------------------------------ memory

    def on_parameters_changed(self) -> None:
        """Drop what the backbone derived from the weights for its acting steps
        ([`txrl.nn.protocol.Backbone.on_parameters_changed`][txrl.nn.protocol.Backbone.on_parameters_changed]). The learners call it
        after each optimizer step and at each rollout start; a training pass,
        ``train()`` / ``eval()`` and a load drop it by themselves. Call it after writing
        weights otherwise with gradients off (``p.data``, an EMA, SB3's ``polyak_update``)."""
        self.backbone.on_parameters_changed()

    def initial_state(self, n_envs: int) -> Any:
        return self.backbone.initial_state(n_envs, device=self.device)

    def _memory_output(
        self,
        obs: PyTorchObs,
        state: Any,
        episode_starts: torch.Tensor,
        *,
        trace: bool = False,
        stats: bool = False,
        acting: bool = False,
        aux: bool = False,
        next_state: bool = True,
    ) -> tuple[torch.Tensor, BackboneOutput]:
        """Features of X = T * B observations (time-major) through the memory -> (X, D).

        ``acting``: one step through `Backbone.step`, which may advance ``state`` in
        place. ``aux``: add the policy's own auxiliary losses (``predict_past``,
        ``reconstruct_observation``) to the backbone's. ``next_state`` False: the output's
        state is None (a training pass never reads it, so the backbone may skip building it).
        """
        t, b = episode_starts.shape
        # the one shared extractor (__init__ refuses share_features_extractor=False); the base
        # class's method, typed as the tensor it returns, where ActorCriticPolicy's may pair it
        features = self._features(obs)  # (X, F)
        x = features.reshape(t, b, -1)  # (X, F) -> (T, B, F)
        if acting:
            out = self.backbone.step(x, state, episode_starts, trace=trace)
        else:
            out = self.backbone.run(
                x, state, episode_starts, trace=trace, stats=stats, next_state=next_state
            )
        if aux and (self.predict_past or self.reconstruct_observation):
            own = dict(out.aux_losses)
            memory = self._heads_input(out.output)[0]  # (T, B, D), the actor's memory
            if self.predict_past:
                own[PAST_PREDICTION_LOSS] = self._past_prediction_loss(memory, x, episode_starts)
            if self.reconstruct_observation:
                own[RECONSTRUCTION_LOSS] = self.observation_decoder.loss(
                    memory.reshape(t * b, -1), obs
                )
            out = out._replace(aux_losses=own)
        return out.output.reshape(t * b, -1), out  # (T, B, D) -> (X, D)

    def _past_prediction_loss(
        self, output: torch.Tensor, features: torch.Tensor, episode_starts: torch.Tensor
    ) -> torch.Tensor:
        """The ``past_prediction`` loss of the memory output (T, B, D) against the features
        (T, B, F) (`txrl.sb3.past_prediction.past_prediction_loss`)."""
        return past_prediction_loss(
            self.past_heads, self.predict_past, output, features, episode_starts
        )

    def _latent(
        self, obs: PyTorchObs, state: Any, episode_starts: torch.Tensor, **options: bool
    ) -> tuple[torch.Tensor, torch.Tensor, BackboneOutput]:
        """`_memory_output` (``options`` are its flags) through the actor's and the
        critic's MLPs -> (X, latent) x 2."""
        latent, out = self._memory_output(obs, state, episode_starts, **options)
        actor_in, critic_in = self._heads_input(latent)
        latent_pi = self.mlp_extractor.forward_actor(actor_in)
        latent_vf = self.mlp_extractor.forward_critic(critic_in)
        return latent_pi, latent_vf, out

    def _heads_input(self, latent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The memory output (..., D) as the actor's and the critic's inputs: the same
        tensor when they share the memory, its two parts when the critic has its own."""
        if isinstance(self.backbone, PairedBackbone):
            return self.backbone.split(latent)
        return latent, latent

    def act(
        self,
        obs: PyTorchObs,
        state: Any,
        episode_starts: torch.Tensor,
        deterministic: bool = False,
        *,
        trace: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Distribution, BackboneOutput]:
        """One acting step for B envs, ``episode_starts`` (B,) bool.

        Returns actions, values (B, 1), log-probs (B,), the action distribution and the
        backbone output (new state, and the step's trace unless ``trace`` is False). Without
        gradients the backbone may advance ``state`` in place
        ([`txrl.nn.protocol.Backbone.step`][txrl.nn.protocol.Backbone.step]): use the returned state,
        and copy the old one first (``txrl.nn.state.clone_state``) if you need it again.
        """
        if isinstance(self.action_space, spaces.Discrete):
            log_probs, values, out = self.act_discrete_heads(
                obs, state, episode_starts, trace=trace
            )
            actions, log_prob, distribution = draw_discrete_action(log_probs, deterministic)
            return actions, values, log_prob, distribution, out
        latent_pi, latent_vf, out = self._latent(
            obs, state, episode_starts[None], trace=trace, acting=True
        )
        continuous = self._get_action_dist_from_latent(latent_pi)
        actions = continuous.get_actions(deterministic=deterministic)
        log_prob = continuous.log_prob(actions)
        values = self.value_net(latent_vf)
        actions = actions.reshape((-1, *self._action_shape()))
        return actions, values, log_prob, continuous, out

    def act_discrete_heads(
        self, obs: PyTorchObs, state: Any, episode_starts: torch.Tensor, *, trace: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor, BackboneOutput]:
        """The network part of a discrete acting step (everything but the draw): the
        log-probabilities of every action (B, n), values (B, 1) and the backbone output
        (with the step's trace unless ``trace`` is False, as for ``predict``).
        `act` draws from them; a CUDA graph of a rollout's step captures this alone
        (``txrl.sb3.graphs``), so its draws come from torch's generator as eager ones do."""
        stepper = getattr(self.backbone, "step_with_head", None)
        if stepper is None:  # e.g. a critic with a memory of its own
            latent_pi, latent_vf, out = self._latent(
                obs, state, episode_starts[None], trace=trace, acting=True
            )
            return self.action_net(latent_pi).log_softmax(dim=-1), self.value_net(latent_vf), out
        # the heads run in the backbone's step (in its graph when it compiles its step)
        x = self._acting_features(obs)
        (log_probs, values), out = stepper(
            x, state, episode_starts[None], self._discrete_heads, trace=trace
        )
        return log_probs, values, out

    def _parameter_dtype(self) -> torch.dtype:
        """The dtype the policy's parameters are kept in (float32 unless moved)."""
        return next(self.backbone.parameters()).dtype

    def _features(self, obs: PyTorchObs) -> torch.Tensor:
        """The one shared extractor's output of X observations -> (X, F), the observations
        preprocessed as SB3 does (which gives float32) and then cast to the policy's dtype,
        so a policy moved to float64 acts and trains in float64."""
        preprocessed = preprocess_obs(
            obs, self.observation_space, normalize_images=self.normalize_images
        )
        dtype = self._parameter_dtype()
        if isinstance(preprocessed, dict):
            preprocessed = {key: value.to(dtype) for key, value in preprocessed.items()}
        else:
            preprocessed = preprocessed.to(dtype)
        return self.features_extractor(preprocessed)

    def _acting_features(self, obs: PyTorchObs) -> torch.Tensor:
        """The features extractor's output of one step's B observations -> (1, B, F)."""
        features = self._features(obs)  # (B, F)
        return features[None]

    def _discrete_heads(self, latent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The actor's log-probabilities (B, n) and the critic's values (B, 1) of the memory
        output (B, D) shared by both, as `act_discrete_heads` returns them."""
        latent_pi, latent_vf = self.mlp_extractor(latent)
        return self.action_net(latent_pi).log_softmax(dim=-1), self.value_net(latent_vf)

    def value_of(self, obs: PyTorchObs, state: Any, episode_starts: torch.Tensor) -> torch.Tensor:
        """Values (B, 1) of one step for B envs from ``state``, which is left as it is: the
        step runs on a copy, so without gradients it takes the acting path
        ([`txrl.nn.protocol.Backbone.step`][txrl.nn.protocol.Backbone.step], e.g. TrXL's ring step)."""
        _, latent_vf, _ = self._latent(obs, clone_state(state), episode_starts[None], acting=True)
        return self.value_net(latent_vf)

    def evaluate_sequences(
        self,
        obs: PyTorchObs,
        actions: torch.Tensor,
        state: Any,
        episode_starts: torch.Tensor,
        *,
        stats: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, Any, BackboneOutput]:
        """Values, log-probs and entropies (X,) of T-step sequences of B envs, observations time-major.

        Also returns the distribution (for losses that need it, e.g. V-MPO's KL) and the
        backbone output (auxiliary losses and diagnostics; its ``state`` is None, since no loss
        reads the memory after the sequences).
        """
        with self._training_autocast():
            latent_pi, latent_vf, out = self._latent(
                obs, state, episode_starts, stats=stats, aux=True, next_state=False
            )
        # the heads, the distribution and the losses in the heads' precision (fp32 when the
        # trunk ran under bf16 autocast, fp64 for a policy moved to float64)
        dtype = self._parameter_dtype()
        latent_pi, latent_vf = latent_pi.to(dtype), latent_vf.to(dtype)
        distribution = self._get_action_dist_from_latent(latent_pi)
        log_prob = distribution.log_prob(actions)
        values = self.value_net(latent_vf).flatten()
        return values, log_prob, distribution.entropy(), distribution, out

    # ------------------------------------------------------------------ predict

    def _predicted_actions(
        self, obs: PyTorchObs, state: Any, episode_starts: torch.Tensor, deterministic: bool
    ) -> tuple[torch.Tensor, Any]:
        """``predict``'s step: with ``compile_step``, a discrete action comes from the acting
        step's heads in its one compiled call; otherwise the actor alone runs."""
        if isinstance(self.action_space, spaces.Discrete) and getattr(
            self.backbone, "compiles_step", False
        ):
            log_probs, _, out = self.act_discrete_heads(obs, state, episode_starts, trace=False)
            return draw_discrete(log_probs, deterministic), out.state
        latent, out = self._memory_output(obs, state, episode_starts[None], acting=True)
        return self._actor_actions(latent, deterministic), out.state

    def _actor_actions(self, latent: torch.Tensor, deterministic: bool) -> torch.Tensor:
        """Actions from the backbone's output (X, D) through the actor alone. A discrete
        action is the argmax or a draw (``torch.multinomial``, as ``Categorical.sample``)
        from the logits' softmax without building a distribution; other spaces go through
        SB3's distributions."""
        latent_pi = self.mlp_extractor.forward_actor(self._heads_input(latent)[0])
        if isinstance(self.action_space, spaces.Discrete):
            return draw_discrete(self.action_net(latent_pi), deterministic)  # (X, n) -> (X,)
        distribution = self._get_action_dist_from_latent(latent_pi)
        return distribution.get_actions(deterministic=deterministic)


class MemoryActorCriticCnnPolicy(MemoryActorCriticPolicy):
    """Image observations through `SmallCNN` (works from 7x7 MiniGrid views up)."""

    def __init__(
        self,
        *args: Any,
        features_extractor_class: type[BaseFeaturesExtractor] = SmallCNN,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, features_extractor_class=features_extractor_class, **kwargs)


class MemoryMultiInputPolicy(MemoryActorCriticPolicy):
    """Dict observations through `MemoryCombinedExtractor`."""

    def __init__(
        self,
        *args: Any,
        features_extractor_class: type[BaseFeaturesExtractor] = MemoryCombinedExtractor,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, features_extractor_class=features_extractor_class, **kwargs)


#: The policy class of each observation kind (the alias names' prefix).
ENCODER_POLICY_BASES: dict[str, type[MemoryActorCriticPolicy]] = {
    "Mlp": MemoryActorCriticPolicy,
    "Cnn": MemoryActorCriticCnnPolicy,
    "MultiInput": MemoryMultiInputPolicy,
}


# The policy classes SB3's ``policy`` argument names (``MemoryPPO("MlpGTrXLPolicy", env)``):
# one per observation kind (the base classes above) and built-in backbone, named by the rule
# of :mod:`txrl.policy_names` (``<kind><backbone>Policy``), and ``<kind>MemoryPolicy``, which
# takes any registered backbone through ``policy_kwargs=dict(backbone=...)`` (GTrXL by
# default). Written out, as SB3 writes its ``MlpPolicy``: SB3 pickles a saved model's policy
# class by its path in this module. tests/sb3/test_policy_aliases.py checks that these are
# exactly the names the rule makes of txrl.policy_names.MEMORY_POLICY_NAMES.


class MlpGTrXLPolicy(MemoryActorCriticPolicy):
    default_backbone = "gtrxl"


class MlpTrXLIPolicy(MemoryActorCriticPolicy):
    default_backbone = "trxl_i"


class MlpTrXLPolicy(MemoryActorCriticPolicy):
    default_backbone = "trxl"


class MlpLstmPolicy(MemoryActorCriticPolicy):
    default_backbone = "lstm"


class MlpGruPolicy(MemoryActorCriticPolicy):
    default_backbone = "gru"


class MlpMemoryPolicy(MemoryActorCriticPolicy):
    """Any registered backbone, ``policy_kwargs=dict(backbone=...)``; GTrXL by default."""


class CnnGTrXLPolicy(MemoryActorCriticCnnPolicy):
    default_backbone = "gtrxl"


class CnnTrXLIPolicy(MemoryActorCriticCnnPolicy):
    default_backbone = "trxl_i"


class CnnTrXLPolicy(MemoryActorCriticCnnPolicy):
    default_backbone = "trxl"


class CnnLstmPolicy(MemoryActorCriticCnnPolicy):
    default_backbone = "lstm"


class CnnGruPolicy(MemoryActorCriticCnnPolicy):
    default_backbone = "gru"


class CnnMemoryPolicy(MemoryActorCriticCnnPolicy):
    """Any registered backbone, ``policy_kwargs=dict(backbone=...)``; GTrXL by default."""


class MultiInputGTrXLPolicy(MemoryMultiInputPolicy):
    default_backbone = "gtrxl"


class MultiInputTrXLIPolicy(MemoryMultiInputPolicy):
    default_backbone = "trxl_i"


class MultiInputTrXLPolicy(MemoryMultiInputPolicy):
    default_backbone = "trxl"


class MultiInputLstmPolicy(MemoryMultiInputPolicy):
    default_backbone = "lstm"


class MultiInputGruPolicy(MemoryMultiInputPolicy):
    default_backbone = "gru"


class MultiInputMemoryPolicy(MemoryMultiInputPolicy):
    """Any registered backbone, ``policy_kwargs=dict(backbone=...)``; GTrXL by default."""


#: SB3's ``policy_aliases`` of the memory learners: every policy class above by its name.
POLICY_ALIASES: dict[str, type[MemoryActorCriticPolicy]] = {
    cls.__name__: cls
    for cls in (
        MlpGTrXLPolicy,
        MlpTrXLIPolicy,
        MlpTrXLPolicy,
        MlpLstmPolicy,
        MlpGruPolicy,
        MlpMemoryPolicy,
        CnnGTrXLPolicy,
        CnnTrXLIPolicy,
        CnnTrXLPolicy,
        CnnLstmPolicy,
        CnnGruPolicy,
        CnnMemoryPolicy,
        MultiInputGTrXLPolicy,
        MultiInputTrXLIPolicy,
        MultiInputTrXLPolicy,
        MultiInputLstmPolicy,
        MultiInputGruPolicy,
        MultiInputMemoryPolicy,
    )
}
