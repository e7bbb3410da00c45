"""A sample of a module's parameter values, to notice the writes no version counter records.

Whatever an acting step derives from the weights (column-major copies, fused attention
weights, positional keys) is rebuilt when the checks of :mod:`txrl.nn.cache` say a weight
may have changed. A write through ``p.data`` (``p.data.copy_(...)``, an EMA or a weight
perturbation written that way, SB3's ``polyak_update`` on ``.data``) changes no version
counter, address or identity, so it goes unseen. The learners drop everything derived at
each rollout start; ``predict``, called between rollouts or by a user's own loop, compares
a :class:`ParameterSample` instead: one element of each parameter, the one of largest
magnitude when the sample was taken, read through views of the parameters' storages. Any
write that changes that element is seen: one that rewrites the whole tensor (an EMA, a
Polyak average, added noise, a copy of other weights, a rescaling) or clamps its values
(the largest is the first to be clamped). One that changes other elements only is not;
``on_parameters_changed()`` is the exact way.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn.modules.module import (
    register_module_module_registration_hook,
    register_module_parameter_registration_hook,
)

from txrl.nn.acting.replica import acting_cache

# bumped whenever any module in this process registers a parameter or a submodule (a
# ``load_state_dict(..., assign=True)``, a module replaced): a sample holds the parameters
# it was taken from, and is taken anew when they may no longer be the module's
_registrations = 0


def _registered(*_: object) -> None:
    global _registrations
    _registrations += 1


register_module_parameter_registration_hook(_registered)
register_module_module_registration_hook(_registered)


_data_ptr = torch.Tensor.data_ptr
_item = np.ndarray.item


class ParameterSample:
    """One element of each parameter of a module, compared with the values it had when
    taken (the module docstring says what that sees). The element of a parameter on a CPU
    is read through a numpy view of its storage (no torch op per call); any other through a
    one-element tensor view, all of them in one ``torch.cat``."""

    def __init__(self, module: nn.Module) -> None:
        self._registrations = _registrations
        self._parameters = tuple(p for p in module.parameters() if p.numel())
        self._addresses = list(map(_data_ptr, self._parameters))
        # views of each parameter's storage as it is now: they read what is written there
        # later, through .data or not
        self._views: list[np.ndarray] = []  # numpy views of the parameters on a CPU
        self._indices: list[int] = []  # each view's largest element (flat, row-major)
        elements: list[torch.Tensor] = []  # one-element tensor views
        with torch.no_grad():
            for p in self._parameters:
                weight = p.detach()
                largest = int(weight.abs().argmax())  # flat index, in row-major order
                try:
                    view = weight.numpy()
                except (RuntimeError, TypeError):  # not on a CPU, or a dtype numpy lacks
                    index = torch.unravel_index(torch.tensor(largest), weight.shape)
                    elements.append(weight[index].reshape(1))
                else:
                    self._views.append(view)
                    self._indices.append(largest)
            self._elements = elements
            self._values = torch.cat(elements) if elements else None
        self._array_values = list(map(_item, self._views, self._indices))

    def unchanged(self) -> bool:
        """Whether the module still has the parameters sampled, where they were, with the
        sampled values."""
        if _registrations != self._registrations:
            return False
        # one C-level pass each (``map`` over unbound methods): this runs at every predict
        if list(map(_data_ptr, self._parameters)) != self._addresses:
            return False
        if list(map(_item, self._views, self._indices)) != self._array_values:
            return False
        if self._values is None:
            return True
        with torch.no_grad():
            return torch.equal(torch.cat(self._elements), self._values)


def parameters_rewritten(module: nn.Module) -> bool:
    """Whether ``module``'s parameters may have been written since the last call in a way no
    version counter records: its :class:`ParameterSample` (held in its
    :class:`~txrl.nn.acting.replica.ActingCache`) differs, or none was taken yet. The sample
    is then taken anew, so a later write is compared against the values of this call."""
    cache = acting_cache(module)
    sample = cache.sample
    if sample is not None and sample.unchanged():
        return False
    cache.sample = ParameterSample(module)
    return True
