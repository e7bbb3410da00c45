"""Column-major replicas of a module tree, for the products of an acting step on a CPU.

An acting step multiplies one row per env by each weight: ``x W^T`` with x (B, in), B a few
envs, and W (out, in) as ``nn.Linear`` keeps it, rows of ``in`` numbers. With MKL on one
thread that product runs faster when ``W^T`` lies contiguous in memory, i.e. when W is kept
column-major (``W.t().contiguous().t()``: the same (out, in) tensor, other strides), than
when it reads ``W^T`` across W's rows (``bench/throughput.py`` prints both). The training
pass, whose products have thousands of rows, runs slower on column-major parameters (their
gradients are copied to the parameters' layout, and fused Adam copies non-contiguous
parameters), so the parameters keep their layout and an acting step runs on copies.

The copies live in a replica of the module tree that this module builds and owns: each
plain ``nn.Linear`` on the step's path is replaced by a shallow copy of itself whose
``weight`` attribute is the column-major copy, and each module above one by a shallow copy
whose child modules are the replicas; everything else (every other submodule, the parameter,
buffer and hook dicts, the biases) is the model's own object, shared. The step runs the
model's own code on the replica (``replica.embed(x)``, ``block(h, y)``), so it computes what
the model computes with the same values; the model itself is never written: its parameters,
buffers and modules stay as they are, whatever thread acts, whatever copy of the model is
taken during a step (the wing keeps what it derived in one attribute of the module's own,
:data:`ACTING_CACHE`, which copies of the module leave out).

What is not replicated runs as itself: a linear whose weight is computed each call
(``torch.nn.utils.parametrizations.weight_norm`` or ``spectral_norm``, ``torch.nn.utils.prune``:
its ``weight`` is not a parameter of its own), a subclass of ``nn.Linear`` (its forward may
read the weight otherwise), the query, key-value and position-key linears of a
:class:`~txrl.nn.attention.RelativeMultiHeadAttention` (the ring step multiplies by their
fused weights instead, :mod:`txrl.nn.acting.ring`), and the whole module while gradients are
on (a copy carries none).

A replica is reused while the model is unchanged and built anew as soon as it may have
changed: an optimizer step of any kind, a weight written in place, replaced or moved (the
checks of :mod:`txrl.nn.cache`), a child module replaced, a module's class changed (a
parametrization added) or a module switched between training and evaluation, at or above a
replicated linear. A write through ``p.data`` is seen by no
check (:mod:`txrl.nn.cache`); :func:`forget_acting_cache` forgets the replica.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import nn

from txrl.nn.attention import RelativeMultiHeadAttention
from txrl.nn.cache import generation

#: where a module keeps its :class:`ActingCache` (in its ``__dict__``: not a parameter, buffer
#: or submodule; its class's ``__getstate__`` leaves it out, so a copy derives its own)
ACTING_CACHE = "_acting_cache"

#: children whose products the ring step makes through weights derived from them, never
#: through the children themselves: not worth a column-major copy
_FUSED_IN_THE_RING_STEP: dict[type[nn.Module], tuple[str, ...]] = {
    RelativeMultiHeadAttention: ("query", "key_value", "position_key"),
}


def column_major(weight: torch.Tensor) -> torch.Tensor:
    """``weight`` (out, in), same values and shape, stored column-major (a copy)."""
    return weight.detach().t().contiguous().t()


def takes_column_major(module: nn.Module) -> bool:
    """Whether an acting step may multiply by a column-major copy of ``module``'s weight:
    a plain ``nn.Linear`` whose weight is a parameter of its own (not one that a
    parametrization, weight norm or pruning computes from other tensors at each call)."""
    if type(module) is not nn.Linear:
        return False
    weight = module._parameters.get("weight")
    return isinstance(weight, nn.Parameter) and weight.dim() == 2


def _shallow_copy(module: nn.Module, **replaced: Any) -> nn.Module:
    """A new object of ``module``'s class holding the same attributes (the same parameter,
    buffer and hook dicts, so those stay live), except the wing's own and ``replaced``."""
    copied = object.__new__(type(module))
    attributes = copied.__dict__
    attributes.update(module.__dict__)
    for name in ACTING_ATTRIBUTES:
        attributes.pop(name, None)
    attributes.update(replaced)
    return copied


def _snapshot(module: nn.Module) -> tuple[Any, ...]:
    """What a copy of ``module`` in a replica holds of it by value: its class, its training
    flag and its child modules."""
    return (type(module), module.training, *module._modules.values())


class _ReplicaRecord(NamedTuple):
    """A replica and what it was built from, to tell whether it is still the model's."""

    replica: nn.Module
    generation: int  # optimizer steps taken in this process when it was built
    # each module copied because a linear below it was: (module, (class, training, *children))
    parents: tuple[tuple[nn.Module, tuple[Any, ...]], ...]
    # each replicated linear: (module, its weight, the weight's version and address)
    linears: tuple[tuple[nn.Module, torch.Tensor, int, int], ...]
    # the weights' storages, held so that no new tensor takes one of their addresses
    storages: tuple[Any, ...]


class ColumnMajorReplica:
    """The column-major replica of one module tree (the module docstring), under the
    children of the root named in ``include`` (None: all), reused while it is current."""

    def __init__(self, include: tuple[str, ...] | None = None) -> None:
        self.include = include
        self._record: _ReplicaRecord | None = None

    def of(self, root: nn.Module) -> nn.Module:
        """The replica of ``root``, built anew when anything it was built from changed."""
        record = self._record
        if record is not None and record.generation == generation():
            # per step: one tuple per copied module, four compares per replicated linear
            for module, snapshot in record.parents:
                if _snapshot(module) != snapshot:
                    break
            else:
                for module, weight, version, address in record.linears:
                    now = module._parameters.get("weight")
                    if (
                        type(module) is not nn.Linear  # e.g. a parametrization added
                        or now is not weight
                        or now._version != version
                        or now.data_ptr() != address
                    ):
                        break
                else:
                    return record.replica
        return self._build(root)

    def _build(self, root: nn.Module) -> nn.Module:
        parents: list[tuple[nn.Module, tuple[Any, ...]]] = []
        linears: list[tuple[nn.Module, torch.Tensor, int, int]] = []

        def replicate(module: nn.Module, names: tuple[str, ...] | None) -> nn.Module:
            if takes_column_major(module):
                weight = module._parameters["weight"]
                assert weight is not None  # takes_column_major checked it
                linears.append((module, weight, weight._version, weight.data_ptr()))
                return _shallow_copy(module, weight=column_major(weight))
            fused = _FUSED_IN_THE_RING_STEP.get(type(module), ())
            children = {
                name: child
                if child is None or name in fused or (names is not None and name not in names)
                else replicate(child, None)
                for name, child in module._modules.items()
            }
            if all(children[name] is child for name, child in module._modules.items()):
                return module  # nothing below to replicate: the module itself
            parents.append((module, _snapshot(module)))
            return _shallow_copy(module, _modules=children)

        built_at = generation()  # as of before the build, so a step during it is not missed
        # inference tensors, whichever way gradients are off, so that a compiled step that
        # takes them sees one kind (txrl.nn.cache.derived makes the same choice)
        with torch.inference_mode():
            replica = replicate(root, self.include)
        storages = tuple(weight.untyped_storage() for _, weight, _, _ in linears)
        self._record = _ReplicaRecord(replica, built_at, tuple(parents), tuple(linears), storages)
        return replica


class ActingCache:
    """What the acting wing derived from one module's weights: its column-major replicas (by
    the children they cover) and the ring step's derived weights
    (:func:`txrl.nn.cache.derived` entries); held by the module between steps
    (:func:`acting_cache`). A policy keeps here too the sample of its parameters that
    ``predict`` compares (:class:`txrl.nn.acting.sample.ParameterSample`)."""

    def __init__(self) -> None:
        self.replicas: dict[tuple[str, ...] | None, ColumnMajorReplica] = {}
        self.derived: dict[Any, Any] = {}
        self.sample: Any = None

    def clear(self) -> None:
        """Forget the replicas and derived weights (the sample stays: it is what later
        writes are compared against)."""
        self.replicas = {}
        self.derived = {}


def acting_cache(module: nn.Module) -> ActingCache:
    """The :class:`ActingCache` that ``module`` holds, made at the first call."""
    cache = module.__dict__.get(ACTING_CACHE)
    if cache is None:
        cache = module.__dict__.setdefault(ACTING_CACHE, ActingCache())
    return cache


def column_major_replica(module: nn.Module, include: tuple[str, ...] | None = None) -> nn.Module:
    """The column-major replica of ``module`` (under its children named in ``include``, or
    all) that ``module`` holds, current; ``module`` itself while gradients are on."""
    if torch.is_grad_enabled():
        return module
    replicas = acting_cache(module).replicas
    replica = replicas.get(include)
    if replica is None:
        replica = replicas.setdefault(include, ColumnMajorReplica(include))
    return replica.of(module)


def forget_acting_cache(module: nn.Module) -> None:
    """Forget the replicas and derived weights ``module`` holds (needed only after a write
    through ``p.data``, which no version counter records: :mod:`txrl.nn.cache`)."""
    cache = module.__dict__.get(ACTING_CACHE)
    if cache is not None:
        cache.clear()


#: where a backbone keeps the ring step's compiled function (:mod:`txrl.nn.acting.ring`)
COMPILED_STEP = "_compiled_step_fn"

#: the attributes the acting wing keeps in a module's ``__dict__``: left out of the module's
#: copies (its class's ``__getstate__``) and of its replicas
ACTING_ATTRIBUTES = (COMPILED_STEP, ACTING_CACHE)
