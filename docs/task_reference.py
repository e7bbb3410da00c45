"""The task reference page: every Gymnasium id that ``import txrl.envs`` registers, with the
arguments each takes and their defaults.

Generated at build time, so it cannot drift from the code:

* the ids from Gymnasium's registry (``gymnasium.registry``, every ``txrl/`` id), grouped by
  entry point, each with the arguments its registration fixes (``active`` of the T-maze);
* each entry point's arguments from its constructor: the signature gives the name, the
  annotation and the default, the ``Args:`` section of its docstring the meaning;
* what a suite's own constructors take where txrl forwards keyword arguments to them (a
  POPGym family's, MiniGrid's ``MemoryEnv``, a Memory Gym task's reset parameters), read
  from the installed suite, or said to be unavailable when it is not installed.

``mkdocs.yml`` loads this file as a hook (:func:`on_files` adds the page);
``tests/test_docs.py`` compares the page with the registry.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import textwrap
from collections.abc import Callable
from typing import Any

#: Where the page sits in the site (its nav entry in ``mkdocs.yml``).
TASKS_PAGE = "reference/tasks.md"
#: The prefix of every id txrl registers.
PREFIX = "txrl/"


def registered_ids() -> list[str]:
    """Every ``txrl/`` id in Gymnasium's registry once ``txrl.envs`` is imported, in
    registration order."""
    import gymnasium as gym

    importlib.import_module("txrl.envs")
    return [env_id for env_id in gym.registry if env_id.startswith(PREFIX)]


def docstring_args(obj: Any) -> dict[str, str]:
    """The ``Args:`` section of ``obj``'s docstring (Google style) as name -> text, the lines
    of an entry joined; ``**kwargs`` keeps its stars. For a class, its ``__init__``'s
    docstring, else the class's."""
    docs = [inspect.getdoc(obj.__init__), inspect.getdoc(obj)] if inspect.isclass(obj) else []
    docs.append(inspect.getdoc(obj))
    for doc in docs:
        if doc and "Args:" in doc:
            return _parse_args(doc)
    return {}


def _parse_args(doc: str) -> dict[str, str]:
    lines = doc.split("Args:", 1)[1].splitlines()[1:]
    entries: dict[str, str] = {}
    indent: int | None = None
    name = ""
    for line in lines:
        if not line.strip():
            if indent is not None:
                break  # a blank line ends the section
            continue
        depth = len(line) - len(line.lstrip())
        if indent is None:
            indent = depth
        if depth < indent:
            break  # the next section
        match = re.match(r"(\*{0,2}\w+)(?: \([^)]*\))?: ?(.*)", line.strip())
        if depth == indent and match:
            name = match.group(1)
            entries[name] = match.group(2)
        elif name:
            entries[name] += " " + line.strip()
    return entries


def _rst_to_markdown(text: str) -> str:
    """Docstring text as one Markdown table cell: reST roles and literals to code spans,
    pipes escaped."""
    text = re.sub(r":(?:class|func|mod|meth|data|attr):`~?([^`]+)`", r"`\1`", text)
    text = re.sub(r"``([^`]+)``", r"`\1`", text)
    return text.replace("|", "\\|")


def _annotation(parameter: inspect.Parameter) -> str:
    annotation = parameter.annotation
    if annotation is inspect.Parameter.empty:
        return ""
    text = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
    return f"`{text}`".replace("|", "\\|")


def _default(parameter: inspect.Parameter) -> str:
    if parameter.kind is inspect.Parameter.VAR_KEYWORD:
        return "–"
    if parameter.default is inspect.Parameter.empty:
        return "required"
    return f"`{parameter.default!r}`"


def arguments_table(factory: Callable[..., Any], fixed: set[str]) -> str:
    """A Markdown table of ``factory``'s keyword arguments (name, type, default, meaning),
    leaving out those the id fixes (``fixed``)."""
    described = docstring_args(factory)
    rows = ["| argument | type | default | meaning |", "|---|---|---|---|"]
    for name, parameter in inspect.signature(factory).parameters.items():
        if name in fixed or parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            continue
        shown = f"**{name}" if parameter.kind is inspect.Parameter.VAR_KEYWORD else name
        meaning = described.get(shown, described.get(name, ""))
        rows.append(
            f"| `{shown}` | {_annotation(parameter)} | {_default(parameter)} | "
            f"{_rst_to_markdown(meaning)} |"
        )
    return "\n".join(rows)


def _fixed(kwargs: dict[str, Any]) -> str:
    return ", ".join(f"`{key}={value!r}`" for key, value in kwargs.items()) or "–"


def _entry_point(spec: Any) -> Callable[..., Any]:
    module, _, attr = str(spec.entry_point).partition(":")
    factory: Callable[..., Any] = getattr(importlib.import_module(module), attr)
    return factory


def _suite(module: str) -> Any | None:
    """The installed suite's module, or None where it is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def _popgym_families(specs: list[Any]) -> list[str]:
    """The POPGym section's tables: each family with its constructor, then each preset with
    the family's arguments it fixes (read from the preset's ``super().__init__`` call)."""
    from txrl.envs.popgym_adapter import POPGYM_FAMILIES, POPGYM_LEVELS, popgym_env_id

    registered = {spec.id for spec in specs}
    popgym = _suite("popgym.envs")
    families = [
        "| family id (takes the family's arguments) | the family's constructor | what it asks |",
        "|---|---|---|",
    ]
    presets = ["| preset id (takes none) | the family's arguments it fixes |", "|---|---|"]
    for family in POPGYM_FAMILIES:
        if popgym is None:
            signature, summary = "popgym not installed", ""
        else:
            cls = getattr(popgym, family)
            signature = f"`{family}{inspect.signature(cls)}`"
            summary = (inspect.getdoc(cls) or "").split("\n\n")[0].replace("\n", " ")
        families.append(
            f"| `{popgym_env_id(family)}` | {signature} | {_rst_to_markdown(summary)} |"
        )
        for level in POPGYM_LEVELS:
            preset = popgym_env_id(family + level)
            if preset in registered:
                fixed = (
                    "–" if popgym is None else _preset_arguments(getattr(popgym, family + level))
                )
                presets.append(f"| `{preset}` | {fixed} |")
    return [*families, "", *presets]


def _preset_arguments(cls: type) -> str:
    """The arguments a POPGym preset passes to its family's constructor, as written in its
    ``super().__init__(...)`` call; the family's defaults where it makes none."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "__init__"
            and isinstance(node.func.value, ast.Call)
            and isinstance(node.func.value.func, ast.Name)
            and node.func.value.func.id == "super"
        ):
            given = [ast.unparse(arg) for arg in node.args]
            given += [ast.unparse(keyword) for keyword in node.keywords]
            return ", ".join(f"`{text}`" for text in given) or "the family's defaults"
    return "the family's defaults"


def _minigrid_upstream(specs: list[Any]) -> list[str]:
    """The MiniGrid section's table: each id's upstream id and the kwargs it gives
    ``MemoryEnv``."""
    import gymnasium as gym

    minigrid = _suite("minigrid")
    rows = ["| id | upstream id | upstream's arguments |", "|---|---|---|"]
    for spec in specs:
        upstream = spec.kwargs["upstream_id"]
        given = _fixed(gym.spec(upstream).kwargs) if minigrid is not None else "–"
        rows.append(f"| `{spec.id}` | `{upstream}` | {given} |")
    if minigrid is not None:
        from minigrid.envs import MemoryEnv

        rows += ["", f"`**kwargs` go to `minigrid.envs.MemoryEnv{inspect.signature(MemoryEnv)}`."]
    return rows


def _memory_gym_tasks(specs: list[Any]) -> list[str]:
    """The Memory Gym section's table: each id and its task's default reset parameters."""
    from txrl.envs.memory_gym_adapter import import_memory_gym_class

    rows = ["| id | default reset parameters (keys of `reset_params`) |", "|---|---|"]
    for spec in specs:
        try:
            cls = import_memory_gym_class(spec.kwargs["name"])
            defaults = getattr(cls, "default_reset_parameters", {})
            shown = ", ".join(f"`{key}={value!r}`" for key, value in defaults.items())
        except ImportError:
            shown = "memory-gym not installed"
        rows.append(f"| `{spec.id}` | {shown} |")
    return rows


#: The families of ids, by entry point: title, what the section's extra table shows.
SECTIONS: dict[str, tuple[str, Callable[[list[Any]], list[str]] | None]] = {
    "txrl.envs.tmaze:TMazeEnv": ("T-maze", None),
    "txrl.envs.delayed_recall:DelayedRecallEnv": ("Delayed recall", None),
    "txrl.envs.minigrid_memory:make_minigrid_memory": ("MiniGrid-Memory", _minigrid_upstream),
    "txrl.envs.popgym_adapter:make_popgym_env": ("POPGym", _popgym_families),
    "txrl.envs.memory_gym_adapter:make_memory_gym_env": ("Memory Gym", _memory_gym_tasks),
}


def task_reference() -> str:
    """The task reference page."""
    import gymnasium as gym

    ids = registered_ids()
    groups: dict[str, list[Any]] = {}
    for env_id in ids:
        spec = gym.spec(env_id)
        groups.setdefault(str(spec.entry_point), []).append(spec)
    parts = [
        "# Task reference",
        "",
        f"Every id that `import txrl.envs` registers with Gymnasium ({len(ids)} in all), "
        "generated from Gymnasium's registry and the constructors' signatures and docstrings "
        "when the site is built. `gym.make(id, **kwargs)`, `make_vec_env(id, "
        "env_kwargs=...)` and a config's `env.kwargs` take the arguments below; an argument "
        "the id fixes cannot be given again. [Tasks](../tasks.md) says what each family "
        "asks of a memory.",
        "",
        "| family | ids | made by |",
        "|---|---|---|",
    ]
    for entry_point, specs in groups.items():
        title = SECTIONS.get(entry_point, (entry_point, None))[0]
        anchor = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
        parts.append(f"| [{title}](#{anchor}) | {len(specs)} | `{entry_point}` |")
    for entry_point, specs in groups.items():
        title, extra = SECTIONS.get(entry_point, (entry_point, None))
        factory = _entry_point(specs[0])
        fixed = set().union(*(spec.kwargs for spec in specs))
        summary = (inspect.getdoc(factory) or "").split("\n\n")[0].replace("\n", " ")
        module = entry_point.partition(":")[0]
        parts += [
            "",
            f"## {title}",
            "",
            f"`{entry_point}`: {_rst_to_markdown(summary)} The module's docstring is on the "
            f"[`txrl.envs` API page](../api/envs.md) (`{module}`).",
            "",
        ]
        if extra is None:
            parts += ["| id | fixed by the id |", "|---|---|"]
            parts += [f"| `{spec.id}` | {_fixed(spec.kwargs)} |" for spec in specs]
        else:
            parts += extra(specs)
        parts += ["", "Arguments:", "", arguments_table(factory, fixed)]
    parts.append("")
    return "\n".join(parts)


def on_files(files: Any, config: Any) -> Any:
    """mkdocs hook: add the task reference to the build."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, TASKS_PAGE, content=task_reference()))
    return files
