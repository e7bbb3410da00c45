"""Tensors derived from a module's parameters, computed once and reused while acting.

An acting step (gradients off) may reuse, for instance, fused weight matrices or the
projected positional encodings instead of rebuilding them each step. An entry remembers
what it was built from and is rebuilt as soon as any of it may have changed, whoever
changed it; no caller has to say so:

* each weight's identity (the Parameter object, so ``load_state_dict(..., assign=True)`` or
  a new ``module.weight = ...`` misses), its storage address (``p.data = t`` misses; the
  entry keeps the old storage alive, so no new tensor can reuse its address) and its
  version counter, which every in-place write through the tensor bumps (``p.copy_`` under
  ``torch.no_grad``, a default ``load_state_dict``, the for-loop and foreach optimizers);
* a process-wide generation that every ``torch.optim`` optimizer step bumps (a global
  ``register_optimizer_step_post_hook``): fused optimizers (``Adam(fused=True)``, AdamW, SGD)
  write the weights without bumping their versions;
* ``load_state_dict`` empties the cache of every module it loads, and a copy of the module
  (``copy.deepcopy``, pickling) starts with an empty one: a copy's weights are new tensors
  whose counters restart at 0.

A hit costs a dict lookup and, per weight, an identity, a version and an address compare.
What no counter sees is a write through ``p.data`` (``p.data.copy_(...)``,
``torch.add(..., out=p.data)``): ``.data`` is a tensor with a version counter of its own, by
design invisible to autograd and to this cache. The learners drop every cache at each
rollout start and a policy's ``predict`` compares a sample of the parameters' values at each
call (:mod:`txrl.nn.acting.sample`); anywhere else, after such a write call
:meth:`ParameterCache.clear_parameter_cache` (or
:meth:`txrl.nn.protocol.Backbone.on_parameters_changed`), or write under ``torch.no_grad()``
through the parameter itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook

T = TypeVar("T")

# bumped after every optimizer step in this process: a few wasted rebuilds when an unrelated
# model steps, no missed update when a fused optimizer writes ours
_generation = 0


def _optimizer_stepped(*_: Any) -> None:
    global _generation
    _generation += 1


def generation() -> int:
    """How many optimizer steps this process has taken (what an entry was built at)."""
    return _generation


register_optimizer_step_post_hook(_optimizer_stepped)


class _Entry(NamedTuple):
    """One cached value and what it was built from."""

    value: Any
    generation: int
    weights: tuple[torch.Tensor, ...]  # the weight objects themselves (identity)
    addresses: tuple[int, ...]  # their data pointers
    versions: tuple[int, ...]  # their version counters
    storages: tuple[Any, ...]  # their storages, held so no new tensor takes their addresses


def derived(
    store: dict[Any, _Entry], key: Any, weights: tuple[torch.Tensor, ...], build: Callable[[], T]
) -> T:
    """``build()``, kept in ``store`` under ``key`` and reused while gradients are off and
    ``weights`` (what it is derived from) stay the same tensors, unwritten (the module
    docstring says what that covers); with gradients on, built anew each call."""
    if torch.is_grad_enabled():
        return build()
    entry = store.get(key)
    if entry is not None and entry.generation == _generation:
        for w, old, version, address in zip(
            weights, entry.weights, entry.versions, entry.addresses, strict=True
        ):
            if w is not old or w._version != version or w.data_ptr() != address:
                break
        else:
            return entry.value  # built by this key's build()
    generation = _generation  # as of before the build, so a step during it is not missed
    # inference tensors whichever way gradients are off, so a compiled step that takes
    # them as inputs (txrl.nn.acting.ring) sees one kind
    with torch.inference_mode():
        value = build()
    store[key] = _Entry(
        value,
        generation,
        weights,
        tuple(w.data_ptr() for w in weights),
        tuple(w._version for w in weights),
        tuple(w.untyped_storage() for w in weights),
    )
    return value


class ParameterCache(nn.Module):
    """Mixin for modules that reuse tensors derived from their parameters while acting."""

    def __init__(self) -> None:
        super().__init__()
        self._cache: dict[tuple[str, int], _Entry] = {}

    def clear_parameter_cache(self) -> None:
        """Forget what was derived from the parameters (needed only after writes through
        ``.data``; see the module docstring)."""
        self._cache.clear()

    def cached(
        self, name: str, n: int, weights: tuple[torch.Tensor, ...], build: Callable[[], T]
    ) -> T:
        """``build()`` (a tensor or a tuple of them), reused while gradients are off and
        ``weights`` stay the same tensors, unwritten; ``n`` tells apart entries of one
        ``name`` built for different sizes."""
        return derived(self._cache, (name, n), weights, build)

    def _load_from_state_dict(self, *args: Any, **kwargs: Any) -> None:
        self._cache.clear()
        super()._load_from_state_dict(*args, **kwargs)

    def __getstate__(self) -> dict[str, Any]:
        # a copy's weights are new tensors: it derives its own (deepcopy and pickle go here)
        state = dict(super().__getstate__())
        state["_cache"] = {}
        return state
