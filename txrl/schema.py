"""The checker behind every config: YAML data -> frozen dataclass, every problem reported.

A config section is a frozen dataclass whose fields carry their type (``Annotated`` with an
[`Interval`][txrl.stats.Interval] for a range) and a docstring. [`from_mapping`][txrl.schema.from_mapping] builds one from plain
data and collects every problem before it reports (a [`ConfigError`][txrl.errors.ConfigError]
with one line per problem, each naming the key by its dotted path and the form it must
take). Two conveniences, both because of YAML: numbers written without a dot (``3e-4``,
which PyYAML reads as a string) are accepted where a number is expected, and an
integer-valued float (``1.0e5``) where an integer is.

It depends on nothing of txrl but its errors: the config's sections ([`txrl.config`][txrl.config])
and the learners' settings (each learner's ``settings`` module in [`txrl.learners`][txrl.learners], the
V-MPO loss's included) all declare their fields with its types, and the config reads the
learners' registry, so the checker sits below both.

Why not pydantic or OmegaConf: the sections are also the learners' settings
([`txrl.learners`][txrl.learners]), which must stay plain dataclasses importable without extra
dependencies, and the messages (the valid range in words, "did you mean", the note on
settings a backbone does not have) are tested as they are. Collecting problems instead of
raising at the first one is all either library would have added, and it is a few lines here.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar, Union

from txrl.errors import ConfigError


@dataclass(frozen=True)
class Interval:
    """Range of a numeric field, attached with ``Annotated[int, Interval(1)]``."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def contains(self, value: float) -> bool:
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return not (
            self.high is not None and (value >= self.high if self.high_open else value > self.high)
        )

    def describe(self) -> str:
        if self.low is not None and self.high is not None:
            left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
            return f"in {left}{_num(self.low)}, {_num(self.high)}{right}"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {_num(self.low)}"
        if self.high is not None:
            return f"{'<' if self.high_open else '<='} {_num(self.high)}"
        return ""


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


@dataclass(frozen=True)
class Pattern:
    """Form of a string field, attached with ``Annotated[str, Pattern(regex, "form")]``."""

    regex: str
    form: str  # the valid form in words, for messages

    def matches(self, value: str) -> bool:
        return re.fullmatch(self.regex, value) is not None


PositiveInt = Annotated[int, Interval(1)]
NonNegativeInt = Annotated[int, Interval(0)]
PositiveFloat = Annotated[float, Interval(0, low_open=True)]
NonNegativeFloat = Annotated[float, Interval(0)]
UnitFloat = Annotated[float, Interval(0, 1)]
#: rl-baselines3-zoo's notation of a linear schedule: ``lin_<start>``, from start to 0 over
#: the run's budget (see :func:`txrl.sb3.schedule.schedule`).
LinearDecay = Annotated[
    str, Pattern(r"lin_(?=[0-9.]*[1-9])[0-9.]+([eE][+-]?[0-9]+)?", "lin_<number>")
]
#: A positive number, or ``lin_<number>`` for one that decays linearly to 0 over the run.
PositiveRate = PositiveFloat | LinearDecay

#: What a learner does when an env emits a NaN or infinite observation or reward, or a loss
#: is not finite: raise an error, warn, or check nothing.
CheckFinite = Literal["raise", "warn", "off"]

_NUMBER = re.compile(r"^[+-]?(\d[\d_]*\.?[\d_]*|\.\d[\d_]*)([eE][+-]?\d+)?$")


def _describe(hint: Any, plural: bool = False) -> str:
    """The valid form of a value of type ``hint``, in words (``plural``: of several values)."""
    origin = typing.get_origin(hint)
    if origin is Annotated:
        base, *extras = typing.get_args(hint)
        forms = [e.form for e in extras if isinstance(e, Pattern)]
        if forms:
            return ("strings " if plural else "a string ") + " or ".join(forms)
        ranges = [e.describe() for e in extras if isinstance(e, Interval)]
        return " ".join([_describe(base, plural), *ranges])
    if origin in (Union, types.UnionType):
        args = typing.get_args(hint)
        parts = [_describe(a, plural) for a in args if a is not type(None)]
        return " or ".join(parts) + (" or null" if type(None) in args else "")
    if origin is Literal:
        return (
            ("each " if plural else "")
            + "one of "
            + ", ".join(repr(a) for a in typing.get_args(hint))
        )
    if origin in (tuple, list):
        return (
            "lists" if plural else "a list"
        ) + f" of {_describe(typing.get_args(hint)[0], True)}"
    if origin in (dict, Mapping) or hint is dict:
        args = typing.get_args(hint)
        what = "mappings" if plural else "a mapping"
        if args and args[1] is not Any:
            return f"{what} of names to {_describe(args[1], True)}"
        return what
    if dataclasses.is_dataclass(hint):
        what = "mappings" if plural else "a mapping"
        return f"{what} with keys " + ", ".join(f.name for f in dataclasses.fields(hint))
    words = {
        bool: ("true or false", "booleans"),
        int: ("an integer", "integers"),
        float: ("a number", "numbers"),
        str: ("a string", "strings"),
    }
    if hint in words:
        return words[hint][plural]
    return getattr(hint, "__name__", str(hint))


def _convert(value: Any, hint: Any, path: str) -> Any:
    """Return ``value`` checked (and normalised) as type ``hint``; raise ConfigError naming ``path``."""
    origin = typing.get_origin(hint)
    bad = ConfigError(f"{path} must be {_describe(hint)}, got {value!r}")
    if hint is Any:
        return value
    if origin is Annotated:
        base, *extras = typing.get_args(hint)
        try:
            converted = _convert(value, base, path)
        except ConfigError:
            raise bad from None
        for extra in extras:
            if isinstance(extra, Interval) and not extra.contains(converted):
                raise bad
            if isinstance(extra, Pattern) and not extra.matches(converted):
                raise bad
        return converted
    if origin in (Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None:
            if type(None) in args:
                return None
            raise bad
        for arg in (a for a in args if a is not type(None)):
            try:
                return _convert(value, arg, path)
            except ConfigError:
                continue
        raise bad
    if origin is Literal:
        if value in typing.get_args(hint) and type(value) is not bool:
            return value
        raise bad
    if origin in (tuple, list):
        if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
            raise bad
        (item,) = typing.get_args(hint)[:1]
        return tuple(_convert(v, item, f"{path}[{i}]") for i, v in enumerate(value))
    if origin in (dict, Mapping) or hint is dict:
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise bad
        args = typing.get_args(hint)
        item_hint = args[1] if args else Any
        return {k: _convert(v, item_hint, f"{path}.{k}") for k, v in value.items()}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return from_mapping(hint, value, path)
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise bad
    if hint is int:
        number = _as_number(value)
        if number is None or not float(number).is_integer():
            raise bad
        return int(number)
    if hint is float:
        number = _as_number(value)
        if number is None or not math.isfinite(number):
            raise bad
        return float(number)
    if hint is str:
        if isinstance(value, str) and value:
            return value
        raise bad
    raise TypeError(f"config field {path} has a type the checker does not know: {hint!r}")


def _as_number(value: Any) -> float | int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    if isinstance(value, str) and _NUMBER.match(value.strip()):
        return float(value.replace("_", ""))
    return None


T = TypeVar("T")


def from_mapping(cls: type[T], data: Any, path: str = "") -> T:
    """Build dataclass ``cls`` from ``data``, checking every key and value (see module doc).

    Every problem is found before one is reported: the `ConfigError` lists them all.
    """
    problems: list[str] = []
    built = _build(cls, data, path, problems)
    if problems:
        raise ConfigError(problems)
    return built


def _build(cls: type[T], data: Any, path: str, problems: list[str]) -> T:
    """``cls`` from ``data``; each bad key or value appends to ``problems`` and takes its default."""
    where = path or "the config"
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        problems.append(f"{where} must be {_describe(cls)}, got {data!r}")
        return cls()
    names = [f.name for f in dataclasses.fields(cls) if f.init and f.metadata.get("yaml", True)]  # type: ignore[arg-type]  # cls is a dataclass type
    for key in data:
        if not isinstance(key, str) or key not in names:
            dotted = f"{path}.{key}" if path else str(key)
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(
                f"unknown key {dotted}{hint}; valid keys of {where}: {', '.join(names)}"
            )
    hints = typing.get_type_hints(cls, include_extras=True)
    values = {}
    for name in names:
        if name not in data:
            continue
        dotted = f"{path}.{name}" if path else name
        if dataclasses.is_dataclass(hints[name]):
            values[name] = _build(hints[name], data[name], dotted, problems)
            continue
        try:
            values[name] = _convert(data[name], hints[name], dotted)
        except ConfigError as e:
            problems.extend(e.problems)
    return cls(**values)


def to_plain(obj: Any) -> Any:
    """A config as plain YAML-able data: dataclasses to dicts, tuples to lists."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {k: to_plain(v) for k, v in obj.items()}
    if isinstance(obj, tuple | list):
        return [to_plain(v) for v in obj]
    return obj
