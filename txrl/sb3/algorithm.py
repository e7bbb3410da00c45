"""The on-policy machinery shared by txrl's learners: memory across rollouts, segment training.

``MemoryOnPolicyAlgorithm`` owns the loop (SB3's ``learn``), the rollout with each env's
memory carried from step to step and from rollout to rollout, the rollout buffer with its
memory streams, and the minibatch loop over segments. A learner (MemoryPPO, VMPO) supplies
only its loss (`MemoryOnPolicyAlgorithm._loss`) and optional hooks around it. What
it is given (policy, settings, envs, a saved file) is checked by `txrl.sb3.checks`.

Legend: S steps per segment, G segments per minibatch, X = S * G transitions, B envs.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections import defaultdict
from collections.abc import Mapping
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.distributions import Distribution
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback
from stable_baselines3.common.utils import explained_variance, obs_as_tensor
from stable_baselines3.common.vec_env import VecEnv

from txrl.nn.state import clone_state, state_from_numpy, state_to_numpy
from txrl.sb3.buffer import MemoryDictRolloutBuffer, MemoryRolloutBuffer, SegmentBatch
from txrl.sb3.checks import (
    CHECK_FINITE_MODES,
    CheckFinite,
    check_finite_step,
    check_finite_update,
    check_model_path,
    check_observation_space,
    check_policy_kwargs,
    check_saved_by,
    class_path,
    env_with_checked_observations,
)
from txrl.sb3.graphs import GraphedActing, graphs_apply
from txrl.sb3.logger import FolderlessLogging
from txrl.sb3.policies import POLICY_ALIASES, MemoryActorCriticPolicy
from txrl.sb3.schedule import setting_argument

SelfMemoryAlgorithm = TypeVar("SelfMemoryAlgorithm", bound="MemoryOnPolicyAlgorithm[Any]")
#: A learner's per-``train()`` settings for its loss (e.g. MemoryPPO's
#: :class:`txrl.learners.ppo.algorithm.PPOUpdate`): an immutable, typed object built once per
#: update by :meth:`MemoryOnPolicyAlgorithm._update_settings` and passed to every minibatch's
#: loss.
UpdateT = TypeVar("UpdateT")

SUPPORTED_ACTION_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


def with_cache_placeholders(
    backbone: Any, template: Any, arrays: tuple[np.ndarray, ...]
) -> tuple[np.ndarray, ...]:
    """``arrays``, a memory saved before its state held some of its last fields: those
    missing, appended from ``template`` when each is one ``backbone.without_caches``
    empties (the Compressive Transformer's keys and values: the next rollout's
    ``refresh_state`` projects them from the memory) or one ``backbone.added_state_fields``
    names (its ring positions, whose initial value, slots oldest first, is the layout
    older runs saved). Any other ``arrays`` as they are."""
    dropped = backbone.without_caches(template)
    added = getattr(backbone, "added_state_fields", ())
    restorable = [
        kept.shape != full.shape or name in added
        for name, kept, full in zip(template._fields, dropped, template, strict=True)
    ]
    n = len(arrays)
    if n < len(template) and all(restorable[n:]):
        return arrays + tuple(field.cpu().numpy() for field in template[n:])
    return arrays


class MemoryOnPolicyAlgorithm(FolderlessLogging, OnPolicyAlgorithm, Generic[UpdateT]):
    """SB3 on-policy algorithm whose policy has memory; subclasses define the loss.

    A learner subclasses ``MemoryOnPolicyAlgorithm[U]`` with ``U`` the type of its
    per-update settings (a frozen dataclass or NamedTuple): `_update_settings` builds
    one ``U`` per ``train()`` (schedules read at the current progress, whole-rollout
    statistics) and `_loss` receives it with each minibatch. It names its settings
    dataclass, `settings_class`; the constructor takes ``policy``, ``env``, SB3's wiring
    (``tensorboard_log``, ``policy_kwargs``, ``verbose``, ``seed``, ``device``) and, as
    keyword arguments, the fields of those settings, with their defaults.

    * ``segment_length``: steps per training sequence (S); ``n_steps`` and ``batch_size``
        must be multiples of it. A minibatch holds ``batch_size // segment_length`` segments.
    * ``aux_loss_coef``: coefficient per named auxiliary loss, a backbone's (e.g.
        ``{"span_l1": 1e-3}``) or the policy's own (``past_prediction``,
        ``observation_reconstruction``); names not listed get coefficient 1.
    * ``check_finite``: what a NaN or infinite observation or reward from an env does:
        ``"raise"`` (default) stops with an error naming the env, the field and the rollout
        step; ``"warn"`` warns the same and keeps the data (SB3's ``VecCheckNan`` with
        ``raise_exception=False``); ``"off"`` skips the check (one ``np.isfinite`` per step
        on the batch). Independently, a loss or gradient that turns non-finite always stops
        training before the optimizer step, so the weights stay those of the last good step.
    """

    policy: MemoryActorCriticPolicy
    rollout_buffer: MemoryRolloutBuffer
    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = POLICY_ALIASES  # type: ignore[assignment]  # SB3's dict of BasePolicy classes; a dict is invariant in its values

    #: The learner's settings dataclass (a subclass of
    #: :class:`~txrl.learners.settings.MemoryLearnerSettings`, the YAML section of its
    #: ``algo``): the one declaration of the settings the constructor takes, their defaults and
    #: their documentation. Its fields are the constructor's keyword arguments
    #: (``inspect.signature(MemoryPPO)`` lists them, derived in ``__init_subclass__``), and
    #: each becomes the attribute of its name (:meth:`_take_settings`).
    settings_class: ClassVar[type]
    __signature__: ClassVar[inspect.Signature | None]
    # the memory learners' common settings this class reads, as attributes (typed here for the
    # type checker; declared, with defaults and documentation, in MemoryLearnerSettings)
    check_finite: CheckFinite
    cuda_graph: bool

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # a class that writes its own constructor documents it itself
        own = "__init__" in vars(cls) or not hasattr(cls, "settings_class")
        cls.__signature__ = None if own else constructor_signature(cls.settings_class)

    def __init__(
        self,
        policy: str | type[MemoryActorCriticPolicy],
        env: GymEnv | str,
        *,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: torch.device | str = "auto",
        _init_setup_model: bool = True,
        **settings: Any,
    ) -> None:
        learner = learner_settings(type(self), self.settings_class, settings)
        check_policy_kwargs(policy, self.policy_aliases, policy_kwargs)
        env = env_with_checked_observations(env, verbose, policy, self.policy_aliases)
        for name in ("n_steps", "batch_size", "n_epochs", "segment_length"):
            value = getattr(learner, name)
            if not isinstance(value, int | np.integer) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        problems = learner.problems()
        if problems:
            raise ValueError("; ".join(problems))
        if learner.check_finite not in CHECK_FINITE_MODES:
            raise ValueError(
                f"check_finite must be one of {', '.join(map(repr, CHECK_FINITE_MODES))}, got {learner.check_finite!r}"
            )
        if not isinstance(learner.cuda_graph, bool):
            raise ValueError(f"cuda_graph must be True or False, got {learner.cuda_graph!r}")
        self._memory: Any = None
        self._shuffle_rng = np.random.default_rng(seed)
        super().__init__(
            policy,
            env,
            learning_rate=learner.learning_rate,
            n_steps=learner.n_steps,
            gamma=learner.gamma,
            gae_lambda=learner.gae_lambda,
            # SB3's entropy and value weights: a learner whose settings have them (MemoryPPO)
            # keeps its own as attributes below
            ent_coef=0.0,
            vf_coef=0.0,
            max_grad_norm=learner.max_grad_norm,
            use_sde=False,
            sde_sample_freq=-1,
            stats_window_size=learner.stats_window_size,
            tensorboard_log=tensorboard_log,
            policy_kwargs=policy_kwargs,
            verbose=verbose,
            seed=seed,
            device=device,
            _init_setup_model=False,
            supported_action_spaces=SUPPORTED_ACTION_SPACES,
        )
        self._take_settings(learner)
        self.batch_size, self.n_epochs = int(learner.batch_size), int(learner.n_epochs)
        self.segment_length = int(learner.segment_length)
        self.aux_loss_coef = dict(learner.aux_loss_coef or {})
        if _init_setup_model:
            self._setup_model()

    def _take_settings(self, settings: Any) -> None:
        """Keep each of the learner's settings as the attribute of its name, as SB3's
        algorithms keep theirs (and a saved model stores them). A learner that keeps some of
        them together overrides this (V-MPO's loss settings, one object its loss reads)."""
        for field in dataclasses.fields(settings):
            setattr(self, field.name, getattr(settings, field.name))

    def _setup_model(self) -> None:
        check_saved_by(self)
        self._check_action_space()
        check_observation_space(self.observation_space)
        is_dict = isinstance(self.observation_space, spaces.Dict)
        self.rollout_buffer_class = MemoryDictRolloutBuffer if is_dict else MemoryRolloutBuffer
        super()._setup_model()
        too_far = [k for k in getattr(self.policy, "predict_past", ()) if k >= self.segment_length]
        if too_far:
            raise ValueError(
                f"predict_past offsets {too_far} reach beyond a training sequence of "
                f"segment_length {self.segment_length}: use offsets below {self.segment_length}"
            )
        # saved with the model, so that loading it with another learner's class is named
        self._saved_by = class_path(type(self))

    def _check_action_space(self) -> None:
        """Hook: refuse an action space the learner's loss cannot train (a clear ValueError)."""

    def _excluded_save_params(self) -> list[str]:
        # the live memory belongs to the envs of this run, not to the model
        return [*super()._excluded_save_params(), "_memory"]

    @classmethod
    def load(
        cls: type[SelfMemoryAlgorithm], path: Any, *args: Any, **kwargs: Any
    ) -> SelfMemoryAlgorithm:
        """SB3's ``load``; a missing file is named as given (`check_model_path`)."""
        check_model_path(path)
        return super().load(path, *args, **kwargs)

    def learn(
        self: SelfMemoryAlgorithm,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 1,
        tb_log_name: str | None = None,
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfMemoryAlgorithm:
        """SB3's ``learn``; TensorBoard runs are named after the algorithm (``MemoryPPO_1``, ...)."""
        return super().learn(
            total_timesteps=total_timesteps,
            callback=callback,
            log_interval=log_interval,
            tb_log_name=tb_log_name or type(self).__name__,
            reset_num_timesteps=reset_num_timesteps,
            progress_bar=progress_bar,
        )

    # ------------------------------------------------------------------ memory

    def get_memory(self) -> tuple[np.ndarray, ...] | None:
        """Each env's live memory as numpy arrays (env on axis 0), e.g. for checkpoints."""
        return None if self._memory is None else state_to_numpy(self._memory)

    def set_memory(self, arrays: tuple[np.ndarray, ...] | None) -> None:
        """Restore what `get_memory` returned; ``None`` (a model that has not acted
        yet) leaves no live memory, so the next rollout starts each env from an empty one."""
        if arrays is None:
            self._memory = None
            return
        template = self.policy.initial_state(self.n_envs)
        arrays = with_cache_placeholders(self.policy.backbone, template, tuple(arrays))
        self._memory = state_from_numpy(template, arrays, self.device)

    def _live_memory(self, n_envs: int) -> Any:
        """The memory the next rollout starts from, with caches refreshed for the current weights.

        Everything the acting policy derived from its weights is dropped first
        (``on_parameters_changed``): the training pass and ``train()`` / ``eval()`` drop it
        too, but a write through ``p.data`` between rollouts (a callback's EMA or
        perturbation, SB3's ``polyak_update``) does not. Their rebuild at the rollout's first
        step is the one an update between rollouts causes anyway."""
        if self._memory is None or self._memory[0].shape[0] != n_envs:
            self._memory = self.policy.initial_state(n_envs)
        policy = self._acting_policy()
        policy.on_parameters_changed()
        with torch.no_grad():
            self._memory = policy.backbone.refresh_state(self._memory)
        return self._memory

    def _acting_policy(self) -> MemoryActorCriticPolicy:
        """The network that acts in rollouts (the trained policy, unless a learner keeps a target)."""
        return self.policy

    def _graphed_acting(self, policy: MemoryActorCriticPolicy, memory: Any) -> GraphedActing | None:
        """This rollout's acting step as a CUDA graph (`txrl.sb3.graphs`), or None: on a
        CPU, with ``cuda_graph=False``, for a continuous action space or a backbone that does
        not declare ``graph_capturable``.

        A capture that fails is an error, not a fall-back to eager steps: a failed capture
        can leave torch's CUDA generator unusable in this process, so eager steps after it
        would fail too, with a less helpful message."""
        if not (self.cuda_graph and graphs_apply(policy)):
            return None
        with torch.inference_mode():
            assert self._last_obs is not None  # the rollout's first observation
            obs = obs_as_tensor(self._last_obs, self.device)
            starts = torch.as_tensor(self._last_episode_starts, device=self.device).bool()
        try:
            return GraphedActing(policy, obs, memory, starts)
        except RuntimeError as error:
            name = type(policy.backbone).__name__
            raise RuntimeError(
                f"capturing the acting step of {name} as a CUDA graph failed ({error}); a "
                "backbone whose step syncs with the host (e.g. .item()) cannot be captured "
                "and should declare graph_capturable = False. Train with cuda_graph=False "
                "(ppo.cuda_graph: false) meanwhile"
            ) from error

    def _record_step(self, rollout_buffer: MemoryRolloutBuffer, distribution: Any) -> None:
        """Hook: store more of an acting step (e.g. the distribution's parameters)."""

    # ------------------------------------------------------------------ rollout

    def collect_rollouts(
        self,
        env: VecEnv,
        callback: Any,
        rollout_buffer: MemoryRolloutBuffer,  # type: ignore[override]  # SB3's takes any RolloutBuffer; this loop also stores the memory streams
        n_rollout_steps: int,
    ) -> bool:
        """SB3's rollout loop, acting with each env's memory and storing the memory streams."""
        assert self._last_obs is not None, "No previous observation was provided"
        assert self._last_episode_starts is not None  # set with the first observation
        policy = self._acting_policy()
        policy.set_training_mode(False)
        n_steps = 0
        rollout_buffer.reset()
        memory = self._live_memory(env.num_envs)
        carried = memory
        if policy.backbone.trace_is_state:
            # segments start every segment_length steps: no other step's state is read
            rollout_buffer.keep_trace_every(self.segment_length)
            # and each is read from the trace, never from the carried-in memory: its caches
            # (the Compressive Transformer's keys and values) would be kept for nothing
            carried = policy.backbone.without_caches(memory)
        rollout_buffer.set_initial_memory(clone_state(carried))  # acting advances memory in place
        graphed = self._graphed_acting(policy, memory)
        if graphed is not None:
            memory = self._memory = graphed.state  # the graph's copy, advanced by each replay
        callback.on_rollout_start()

        while n_steps < n_rollout_steps:
            with torch.inference_mode():  # no autograd bookkeeping while acting
                obs_tensor = obs_as_tensor(self._last_obs, self.device)
                starts = torch.as_tensor(
                    self._last_episode_starts, device=self.device
                ).bool()  # (B,)
                distribution: Distribution  # an ActingCategorical from the graph
                if graphed is not None:
                    actions_t, values, log_probs, distribution, out = graphed(obs_tensor, starts)
                else:
                    # the trace of a step the buffer keeps only (`keep_trace_every`)
                    actions_t, values, log_probs, distribution, out = policy.act(
                        obs_tensor, memory, starts, trace=rollout_buffer.wants_trace()
                    )
            memory = self._memory = out.state
            actions = actions_t.cpu().numpy()
            clipped_actions = actions
            if isinstance(self.action_space, spaces.Box):
                clipped_actions = np.clip(actions, self.action_space.low, self.action_space.high)

            new_obs, rewards, dones, infos = env.step(clipped_actions)
            # a Tuple observation space never gets here (check_observation_space refuses it)
            assert not isinstance(new_obs, tuple)
            if self.check_finite != "off":
                check_finite_step(self.check_finite, new_obs, rewards, n_steps, self.num_timesteps)
            self.num_timesteps += env.num_envs
            callback.update_locals(locals())
            if not callback.on_step():
                return False
            self._update_info_buffer(infos, dones)
            n_steps += 1
            if isinstance(self.action_space, spaces.Discrete):
                actions = actions.reshape(-1, 1)

            # Truncated episodes bootstrap from the value of the final observation
            truncated = [
                idx
                for idx, done in enumerate(dones)
                if done
                and infos[idx].get("terminal_observation") is not None
                and infos[idx].get("TimeLimit.truncated", False)
            ]
            if truncated:
                rewards[truncated] += self.gamma * self._final_values(
                    policy, memory, new_obs, infos, truncated
                )

            rollout_buffer.add(
                self._last_obs,  # type: ignore[arg-type]  # a Dict env's buffer (MemoryDictRolloutBuffer) takes the dict SB3 types RolloutBuffer.add without
                actions,
                rewards,
                self._last_episode_starts,
                values,
                log_probs,
            )
            rollout_buffer.add_trace(out.trace)
            self._record_step(rollout_buffer, distribution)
            self._last_obs = new_obs
            self._last_episode_starts = dones

        with torch.inference_mode():
            starts = torch.as_tensor(dones, device=self.device).bool()
            values = policy.value_of(obs_as_tensor(self._last_obs, self.device), memory, starts)
        rollout_buffer.compute_returns_and_advantage(last_values=values, dones=dones)
        callback.update_locals(locals())
        callback.on_rollout_end()
        return True

    def _final_values(
        self,
        policy: MemoryActorCriticPolicy,
        memory: Any,
        new_obs: Any,
        infos: list[dict],
        envs: list[int],
    ) -> np.ndarray:
        """Values (len(envs),) of the final observations of the truncated ``envs``, each with
        its env's memory (the final observation continues that episode), from one step of
        the acting network over every env (the others read their new observation, and their
        values are dropped), so the step has the batch size of acting (a compiled step,
        ``compile_step``, is not compiled again for it); ``memory`` stays as it is."""
        if isinstance(new_obs, dict):
            obs: Any = {key: np.array(value) for key, value in new_obs.items()}
            for idx in envs:
                for key in obs:
                    obs[key][idx] = infos[idx]["terminal_observation"][key]
        else:
            obs = np.array(new_obs)
            for idx in envs:
                obs[idx] = infos[idx]["terminal_observation"]
        no_start = torch.zeros(len(infos), dtype=torch.bool, device=self.device)  # (n_envs,)
        with torch.inference_mode():
            values = policy.value_of(obs_as_tensor(obs, self.device), memory, no_start)
        return values.flatten()[envs].cpu().numpy()

    # ------------------------------------------------------------------ training

    def evaluate_batch(
        self, batch: SegmentBatch, *, stats: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, Any, Any]:
        """Recompute values, log-probs (X,) and the distribution of a minibatch of segments."""
        s, g = batch.episode_starts.shape
        obs = batch.observations
        # (S, G, ...) -> (X, ...), time-major like the backbone's (T, B) layout
        if isinstance(obs, dict):
            flat_obs: Any = {k: v.reshape(s * g, *v.shape[2:]) for k, v in obs.items()}
        else:
            flat_obs = obs.reshape(s * g, *obs.shape[2:])
        actions = batch.actions.reshape(s * g, -1)  # (S, G, A) -> (X, A)
        if isinstance(self.action_space, spaces.Discrete):
            actions = actions.long().flatten()  # (X,)
        elif isinstance(self.action_space, spaces.MultiBinary):
            actions = actions.float()  # stored as int8; a Bernoulli's log-prob takes floats
        return self.policy.evaluate_sequences(
            flat_obs, actions, batch.memory, batch.episode_starts, stats=stats
        )

    def _update_settings(self) -> UpdateT:
        """The loss's settings for this ``train()``, built once before its first minibatch
        (schedules read at the current progress, constants over the whole rollout)."""
        raise NotImplementedError

    def _loss(
        self,
        batch: SegmentBatch,
        values: torch.Tensor,
        log_prob: torch.Tensor,
        entropy: torch.Tensor | None,
        distribution: Any,
        update: UpdateT,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The loss of one minibatch and its scalar statistics (logged as their means)."""
        raise NotImplementedError

    def _stop_epoch(self, stats: dict[str, torch.Tensor]) -> bool:
        """Whether to stop training on this rollout before the next gradient step."""
        return False

    def _after_gradient_step(self) -> None:
        """Hook after each optimizer step (e.g. a target network's update)."""

    def train(self) -> None:
        """Minibatches of whole segments, each recomputed from the memory it had while acting."""
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        update = self._update_settings()
        segments_per_batch = max(1, self.batch_size // self.segment_length)
        # statistics stay on the device until the update ends: reading each one per minibatch
        # would make the host wait for the GPU before it could queue the next minibatch
        logged: dict[str, list[torch.Tensor | float]] = defaultdict(list)
        diagnostics: dict[str, float] | None = None  # backbone stats, from the first minibatch
        stopped = False
        for _ in range(self.n_epochs):
            for batch in self.rollout_buffer.segments(
                self.policy.backbone,
                self.segment_length,
                segments_per_batch,
                generator=self._shuffle_rng,
            ):
                want_stats = diagnostics is None
                values, log_prob, entropy, distribution, out = self.evaluate_batch(
                    batch, stats=want_stats
                )
                loss, stats = self._loss(batch, values, log_prob, entropy, distribution, update)
                for name, aux in out.aux_losses.items():
                    loss = loss + self.aux_loss_coef.get(name, 1.0) * aux
                    stats[f"train/aux/{name}"] = aux.detach()
                # the loss the optimizer steps on, auxiliary terms included; it replaces the
                # total a learner's loss may report without them
                stats["train/loss"] = loss.detach()
                if want_stats:
                    diagnostics = {f"memory/{k}": float(v) for k, v in out.stats.items()}
                for key, value in stats.items():
                    logged[key].append(value.detach() if torch.is_tensor(value) else float(value))
                if self._stop_epoch(stats):
                    stopped = True
                    break
                self.policy.optimizer.zero_grad()
                loss.backward()
                grad_norm = torch.nn.utils.clip_grad_norm_(
                    self.policy.parameters(), self.max_grad_norm
                )
                check_finite_update(loss, grad_norm, stats, self._n_updates)
                # the norm before clipping: its growth is one of the signs a run is about to
                # lose what it learned
                logged["train/grad_norm"].append(grad_norm.detach())
                self.policy.optimizer.step()
                self.policy.on_parameters_changed()  # what acting derived is of the old weights
                self._after_gradient_step()
            self._n_updates += 1  # epochs started, one cut short included (as SB3's PPO counts)
            if stopped:
                break
        buffer = self.rollout_buffer
        explained = explained_variance(buffer.values.flatten(), buffer.returns.flatten())
        for key, values_logged in logged.items():
            self.logger.record(key, _mean(values_logged))
        for key, diagnostic in (diagnostics or {}).items():
            self.logger.record(key, diagnostic)
        self.logger.record("train/explained_variance", explained)
        # the advantages' scale before any normalisation: once a task is learned they shrink
        # to noise, which a per-minibatch normalisation rescales to the size they had while
        # learning
        self.logger.record("train/advantage_std", float(np.std(buffer.advantages)))
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record(
            "train/memory_bytes_per_transition", buffer.trace_nbytes_per_transition()
        )


def _mean(values: list[torch.Tensor | float]) -> float:
    """The float64 mean of one statistic's values over the minibatches (0-d tensors on any
    device, or floats), read from the device once."""
    parts = [v.reshape(()).to(torch.float64) if torch.is_tensor(v) else v for v in values]
    tensors = [v for v in parts if torch.is_tensor(v)]
    total = float(torch.stack(tensors).sum()) if tensors else 0.0
    total += sum(v for v in parts if not torch.is_tensor(v))
    return total / len(values)


def learner_settings(algorithm: type, settings_class: type, given: Mapping[str, Any]) -> Any:
    """``settings_class`` with the keyword arguments ``given`` to ``algorithm``'s constructor,
    each as the algorithm takes it (``lin_<x>`` as SB3's schedule, a dict as a copy:
    [`txrl.sb3.schedule.setting_argument`][txrl.sb3.schedule.setting_argument]); a name that is no setting is a TypeError
    naming the valid ones."""
    names = [f.name for f in dataclasses.fields(settings_class)]
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise TypeError(
            f"{algorithm.__name__}() got unexpected keyword argument(s) "
            f"{', '.join(map(repr, unknown))}; its settings ({settings_class.__name__}): "
            f"{', '.join(names)}"
        )
    settings = settings_class(**given)
    return dataclasses.replace(
        settings, **{name: setting_argument(getattr(settings, name)) for name in names}
    )


def constructor_signature(settings_class: type) -> inspect.Signature:
    """The signature of a memory learner's constructor: ``policy`` and ``env``, then each
    field of ``settings_class`` as a keyword argument with the field's default, then SB3's
    wiring (``tensorboard_log``, ``policy_kwargs``, ``verbose``, ``seed``, ``device``)."""
    base = inspect.signature(MemoryOnPolicyAlgorithm.__init__).parameters.values()
    policy_env = [p for p in base if p.kind is p.POSITIONAL_OR_KEYWORD and p.name != "self"]
    wiring = [p for p in base if p.kind is p.KEYWORD_ONLY]
    fields = [
        inspect.Parameter(
            field.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=(
                field.default_factory()
                if field.default_factory is not dataclasses.MISSING
                else field.default
            ),
            annotation=field.type,
        )
        for field in dataclasses.fields(settings_class)
    ]
    return inspect.Signature([*policy_env, *fields, *wiring])
