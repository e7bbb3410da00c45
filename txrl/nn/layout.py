"""Weights laid out for an acting step's products, on a CPU.

An acting step multiplies one row per env by each weight: ``x W^T``, x (B, in) with B a
few envs, W (out, in) as ``nn.Linear`` keeps it (rows of ``in`` numbers). On the CPUs this
project measures on (MKL, one thread), that product runs about a third faster when ``W^T``
lies contiguous in memory, i.e. W is kept column-major (``W.t().contiguous().t()``: the same
(out, in) tensor to every op, only its strides differ), than when the product reads ``W^T``
across W's rows: the 37 products of a GTrXL 3 x 128 step at B = 8 took 0.36-0.49 ms against
0.54-0.73 ms (``bench/throughput.py``'s "column-major vs row-major" row). The training pass, whose products have thousands of rows, runs slower
with column-major parameters (their gradients are copied to the parameters' layout, and
fused Adam copies non-contiguous parameters: one ``train()`` at the bench setup took 13-21 %
longer), so the parameters keep their layout and the acting step runs on column-major
copies, derived and reused while the weights stay unchanged like the attention's fused
weights (:func:`txrl.nn.cache.derived`), and put in place of the parameters for the step
(:func:`torch.nn.utils.stateless._reparametrize_module`, which ``torch.compile`` traces, so
inside a compiled step the swap costs nothing); an eager step writes them into the modules'
parameter dicts for the step and back (:class:`Swapped`). So during an acting step on a CPU, a
linear's ``weight`` is its copy, a plain tensor of the same values (a forward hook reading it
sees that); outside the step, and on other devices, the parameters are as they always are.
"""

from __future__ import annotations

import contextlib
from typing import Any, NamedTuple

import torch
from torch import nn

from txrl.nn.cache import derived, generation

#: a weight's place in a module tree: submodule names, then the parameter's name
Path = tuple[str, ...]
_KEY = "column_major"


def column_major(weight: torch.Tensor) -> torch.Tensor:
    """``weight`` (out, in), same values and shape, stored column-major (a copy)."""
    return weight.detach().t().contiguous().t()


def product_weight_paths(root: nn.Module, include: tuple[str, ...] | None = None) -> list[Path]:
    """The weights of the ``nn.Linear`` modules under ``root`` whose products a step makes
    with them (under the submodules named in ``include``, or all). A module lists in
    ``fused_in_acting`` the ``nn.Linear`` children whose products its acting step makes
    through weights of its own (e.g. the attention's fused query, key and value)."""
    fused = {
        id(module._modules[name])
        for module in root.modules()
        for name in getattr(module, "fused_in_acting", ())
    }
    paths = []
    for name, module in root.named_modules():
        inside = include is None or name.split(".")[0] in include
        if inside and isinstance(module, nn.Linear) and id(module) not in fused:
            paths.append((*name.split("."), "weight"))
    return paths


def _follow(root: nn.Module, path: Path) -> tuple[nn.Module, torch.Tensor] | None:
    """The module holding the parameter at ``path`` under ``root`` and the parameter (None
    where the tree no longer has it), read from the modules' own dicts (no
    ``nn.Module.__getattr__``)."""
    module = root
    for name in path[:-1]:
        child = module._modules.get(name)
        if child is None:
            return None
        module = child
    param = module._parameters.get(path[-1])
    return None if param is None else (module, param)


class LaidOut(NamedTuple):
    """The column-major copies of :class:`ProductWeights`, two ways."""

    #: by parameter name under the root, for :func:`laid_out` (a compiled step's input)
    by_name: dict[str, torch.Tensor]
    #: (module, parameter name, copy), for :class:`Swapped` (an eager step)
    slots: tuple[tuple[nn.Module, str, torch.Tensor], ...]


class ProductWeights:
    """Column-major copies of the product weights of a module tree (:func:`column_major`,
    :func:`product_weight_paths`), for :func:`laid_out` and :class:`Swapped`.

    Each call walks the tree for the weights it has now and reuses the copies while they are
    the same tensors, unwritten (:func:`txrl.nn.cache.derived`: optimizer steps, loads, new
    tensors and ``.to`` are seen). A tree whose modules changed is walked afresh; an
    ``nn.Linear`` added after the first call keeps its own weight until then. Held outside
    the module's state (not a submodule, not copied with it)."""

    def __init__(self, include: tuple[str, ...] | None = None) -> None:
        self.include = include
        self._paths: list[Path] | None = None
        self._plan: _Plan | None = None
        self._store: dict[Any, Any] = {}

    def __call__(self, root: nn.Module) -> LaidOut:
        # the hit, every step: each module on the weights' paths looked up once, then
        # derived()'s check of each weight (identity, version, address) in the same pass
        entry = self._store.get(_KEY)
        plan = self._plan
        if entry is not None and plan is not None and entry.generation == generation():
            nodes, leaves = plan
            try:
                modules = [root]
                for parent, name in nodes:
                    modules.append(modules[parent]._modules[name])  # type: ignore[arg-type]
                for (owner, name), old, version, address in zip(
                    leaves, entry.weights, entry.versions, entry.addresses, strict=True
                ):
                    w = modules[owner]._parameters[name]
                    if w is not old or w._version != version or w.data_ptr() != address:
                        break
                else:
                    return entry.value
            except (KeyError, TypeError, AttributeError):  # a module or weight went
                pass
        return self._walk(root)

    def _walk(self, root: nn.Module) -> LaidOut:
        """The weights as the tree has them now, their copies derived again if they changed."""
        if self._paths is None:
            self._paths = product_weight_paths(root, self.include)
            self._plan = _lookup_plan(self._paths)
        paths = self._paths
        found = [_follow(root, path) for path in paths]
        held = [pair for pair in found if pair is not None]
        if len(held) < len(found):  # a module went: walk the tree again
            self._paths = self._plan = None
            self._store.clear()
            return self._walk(root)

        def build() -> LaidOut:
            by_name, slots = {}, []
            for path, (module, weight) in zip(paths, held, strict=True):
                if weight.dim() == 2:  # a linear replaced by another kind keeps its own
                    copied = by_name[".".join(path)] = column_major(weight)
                    slots.append((module, path[-1], copied))
            return LaidOut(by_name, tuple(slots))

        return derived(self._store, _KEY, tuple(w for _, w in held), build)

    def clear(self) -> None:
        """Forget the copies (needed only after a write through ``p.data``: txrl.nn.cache)."""
        self._paths = self._plan = None
        self._store.clear()


#: how :class:`ProductWeights` finds its weights: the modules on their paths, each as
#: (index of its parent among them, the root being 0; its name), then each weight as (index
#: of its module; its name)
_Plan = tuple[tuple[tuple[int, str], ...], tuple[tuple[int, str], ...]]


def _lookup_plan(paths: list[Path]) -> _Plan:
    """The :data:`_Plan` of ``paths``: a module shared by several paths is looked up once."""
    index: dict[Path, int] = {(): 0}
    nodes: list[tuple[int, str]] = []
    leaves: list[tuple[int, str]] = []
    for path in paths:
        parent = 0
        for depth in range(1, len(path)):
            if path[:depth] not in index:
                index[path[:depth]] = len(nodes) + 1
                nodes.append((parent, path[depth - 1]))
            parent = index[path[:depth]]
        leaves.append((parent, path[-1]))
    return tuple(nodes), tuple(leaves)


#: where :func:`product_weights` keeps a module's :class:`ProductWeights` (in its ``__dict__``,
#: outside its state: ``__getstate__`` drops it, so a copy derives its own)
HELD = "_product_weights"


def product_weights(module: nn.Module, include: tuple[str, ...] | None = None) -> LaidOut:
    """:class:`ProductWeights` of ``module`` (under the submodules in ``include``, or all),
    held by the module between calls."""
    held: dict[Any, ProductWeights] = module.__dict__.setdefault(HELD, {})
    weights = held.get(include)
    if weights is None:
        weights = held[include] = ProductWeights(include)
    return weights(module)


def forget_product_weights(module: nn.Module) -> None:
    """Drop the copies :func:`product_weights` holds for ``module`` (needed only after a
    write through ``p.data``: txrl.nn.cache)."""
    for weights in module.__dict__.get(HELD, {}).values():
        weights.clear()


def laid_out(module: nn.Module, weights: dict[str, torch.Tensor] | None) -> Any:
    """A context in which ``module``'s parameters named in ``weights`` are those tensors
    (:attr:`LaidOut.by_name`), through torch's ``_reparametrize_module``, which
    ``torch.compile`` traces (inside a compiled step it costs nothing); nothing changes for
    None. Eager, :class:`Swapped` does the same for a tenth of the cost."""
    if weights is None:
        return contextlib.nullcontext()
    return torch.nn.utils.stateless._reparametrize_module(module, weights)


class Swapped:
    """A context in which each (module, name, tensor) of ``slots`` (:attr:`LaidOut.slots`)
    stands in the module's parameter dict for the parameter of that name, put back on
    exit: two dict writes a weight, about 15 us for a GTrXL 3 x 128 step against about
    140 us through :func:`laid_out` eager. Not traced by ``torch.compile``: a compiled step
    takes :func:`laid_out`."""

    __slots__ = ("_saved", "_slots")

    def __init__(self, slots: tuple[tuple[nn.Module, str, torch.Tensor], ...]) -> None:
        self._slots = slots
        self._saved: list[Any] = []

    def __enter__(self) -> None:
        saved = self._saved
        try:
            for module, name, tensor in self._slots:
                params = module._parameters
                saved.append(params[name])
                params[name] = tensor  # type: ignore[assignment]  # a plain tensor, for the step
        except BaseException:
            self.__exit__()
            raise

    def __exit__(self, *exc: object) -> None:
        for (module, name, _), original in zip(self._slots, self._saved, strict=False):
            module._parameters[name] = original
        self._saved.clear()
