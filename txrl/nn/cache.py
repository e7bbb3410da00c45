"""Tensors derived from a module's parameters, computed once and reused while acting.

An acting step (gradients off) may reuse, for instance, fused weight matrices or the
projected positional encodings instead of rebuilding them each step. Entries are keyed on
the version counters of the weights they come from, which in-place updates bump, and are
dropped by :meth:`ParameterCache.clear_parameter_cache`, which learners reach through
:meth:`txrl.nn.protocol.Backbone.on_parameters_changed` after every optimizer step (fused
optimizers write weights without bumping their versions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import torch
from torch import nn

T = TypeVar("T")


class ParameterCache(nn.Module):
    """Mixin for modules that reuse tensors derived from their parameters while acting."""

    def __init__(self) -> None:
        super().__init__()
        self._cache: dict[tuple[Any, ...], Any] = {}

    def clear_parameter_cache(self) -> None:
        """Forget what was derived from the parameters; call after changing them."""
        self._cache.clear()

    def cached(
        self, name: str, n: int, weights: tuple[torch.Tensor, ...], build: Callable[[], T]
    ) -> T:
        """``build()`` (a tensor or a tuple of them), reused while gradients are off and ``weights`` keep their versions;
        ``n`` tells apart entries of one ``name`` built for different sizes."""
        if torch.is_grad_enabled():
            return build()
        key = (name, n, *(w._version for w in weights), weights[0].device, weights[0].dtype)
        found = self._cache.get(key)
        if found is None:
            self._cache = {k: v for k, v in self._cache.items() if k[:2] != (name, n)}
            # inference tensors whichever way gradients are off, so a compiled step that
            # takes them as inputs (txrl.nn.memory) sees one kind
            with torch.inference_mode():
                found = self._cache[key] = build()
        return found
