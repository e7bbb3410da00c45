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


def clone_state(state: S) -> S:
    """A copy of ``state`` that shares no memory with it (a state `Backbone.step`
    may advance in place stays as it is)."""
    return type(state)(*(field.clone() for field in state))


def state_nbytes(state: tuple) -> int:
    """Bytes held by the tensors of ``state`` (or of a trace)."""
    return sum(field.numel() * field.element_size() for field in state)


def state_to_numpy(state: tuple) -> tuple[np.ndarray, ...]:
    """A plain tuple of numpy arrays, copies (a live state may be advanced in place later)."""
    return tuple(field.detach().cpu().numpy().copy() for field in state)


def as_state(template: S, given: Any, device: torch.device | str) -> S:
    """``given`` as a state like ``template``: a state of its type whose tensors are on
    ``device`` is checked and used as it is (no copy, the cheap path of ``predict``); a
    tuple of arrays (saved, or built by hand) goes through `state_from_numpy`."""
    wanted = torch.device(device)
    if isinstance(given, type(template)) and all(
        isinstance(field, torch.Tensor)
        and field.device.type == wanted.type
        and wanted.index in (None, field.device.index)
        for field in given
    ):
        _check_fields(template, tuple(given))
        return given
    return state_from_numpy(template, given, device)


def _check_fields(template: tuple, fields: tuple[torch.Tensor, ...]) -> None:
    for name, ref, tensor in zip(template._fields, template, fields, strict=True):  # type: ignore[attr-defined]  # a NamedTuple, which plain tuple does not declare _fields of
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


def state_from_numpy(template: S, arrays: tuple[Any, ...], device: torch.device | str) -> S:
    """Rebuild a state of ``template``'s type from `state_to_numpy` output."""
    if not isinstance(arrays, tuple) or len(arrays) != len(template):
        raise ValueError(
            f"state must be the tuple of {len(template)} arrays returned by predict(), got {type(arrays).__name__}"
            + (f" of length {len(arrays)}" if isinstance(arrays, tuple) else "")
        )
    fields = tuple(
        torch.tensor(np.asarray(arr), device=device)  # a copy: the state may be advanced in place
        for arr in arrays
    )
    _check_fields(template, fields)
    return type(template)(*fields)
