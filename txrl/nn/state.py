"""Helpers that treat any backbone state as data: a NamedTuple of tensors, env on axis 0.

Learners use only these, never the fields of a particular memory model.
"""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np
import torch

S = TypeVar("S", bound=tuple)


def index_state(state: S, index: torch.Tensor | slice | int) -> S:
    """Envs ``index`` of ``state`` (keeps axis 0 when ``index`` is a tensor or slice)."""
    return type(state)(*(field[index] for field in state))


def detach_state(state: S) -> S:
    return type(state)(*(field.detach() for field in state))


def state_nbytes(state: tuple) -> int:
    """Bytes held by the tensors of ``state`` (or of a trace)."""
    return sum(field.numel() * field.element_size() for field in state)


def state_to_numpy(state: tuple) -> tuple[np.ndarray, ...]:
    """A plain tuple of numpy arrays (the opaque state SB3's ``predict`` hands back)."""
    return tuple(field.detach().cpu().numpy() for field in state)


def state_from_numpy(template: S, arrays: tuple[Any, ...], device: torch.device | str) -> S:
    """Rebuild a state of ``template``'s type from :func:`state_to_numpy` output."""
    if not isinstance(arrays, tuple) or len(arrays) != len(template):
        raise ValueError(
            f"state must be the tuple of {len(template)} arrays returned by predict(), got {type(arrays).__name__}"
            + (f" of length {len(arrays)}" if isinstance(arrays, tuple) else "")
        )
    fields = []
    for name, ref, arr in zip(template._fields, template, arrays, strict=True):  # type: ignore[attr-defined]
        tensor = torch.as_tensor(np.asarray(arr), device=device)
        if tensor.shape[:1] != ref.shape[:1]:
            raise ValueError(
                f"state field {name!r} holds {tensor.shape[0] if tensor.dim() else 0} envs but the observation batch "
                f"has {ref.shape[0]}: pass the state returned for the same number of observations"
            )
        if tensor.shape[1:] != ref.shape[1:] or tensor.dtype != ref.dtype:
            raise ValueError(
                f"state field {name!r} must have shape (n_envs, {', '.join(map(str, ref.shape[1:]))}) "
                f"and dtype {ref.dtype}, got {tuple(tensor.shape)} {tensor.dtype}"
            )
        fields.append(tensor)
    return type(template)(*fields)
