"""The generated pages of the documentation: the config reference, the CLI reference and
the API page of the backbones' settings.

They are derived at build time from what the library declares once, so they cannot drift:

* the config reference from the config dataclasses (:mod:`txrl.config.sections`, the
  learners' settings of :mod:`txrl.learners`, the backbones' settings of
  :mod:`txrl.backbones`, the compare grid of :mod:`txrl.config.grid`): each field's key, the
  form its value must take (in the words the config checker's errors use), its default and
  its docstring (the string literal under the field, read from the source);
* the CLI reference from the ``argparse`` parser that ``txrl`` itself runs
  (:func:`txrl.cli.build_parser`);
* the API page of the backbones' settings from the backbone registry: one mkdocstrings
  entry per settings class, so a backbone registered later gets its entry without an edit.

``mkdocs.yml`` loads this file as a hook: :func:`on_files` adds the pages to the build
without writing anything into ``docs/``. ``tests/test_docs.py`` calls the generators too.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import re
import textwrap
import typing
from collections.abc import Callable
from typing import Any

#: Where the generated pages sit in the site, and their nav entries in ``mkdocs.yml``.
CONFIG_PAGE = "reference/config.md"
CLI_PAGE = "reference/cli.md"
BACKBONE_SETTINGS_PAGE = "api/backbone-settings.md"


def field_docs(cls: type) -> dict[str, str]:
    """The docstring of every field of dataclass ``cls``: the string literal right under the
    field's annotation, from the nearest class of ``cls``'s MRO that documents it (a subclass
    that redeclares a field may document it anew)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or not dataclasses.is_dataclass(klass):
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        body = tree.body[0].body  # type: ignore[attr-defined]  # the class definition
        for node, after in zip(body, [*body[1:], None], strict=True):
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            if (
                isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def _markdown(text: str) -> str:
    """A docstring as one Markdown table cell: reST roles and literals to code spans, the
    lines joined, pipes escaped."""
    text = re.sub(r":(?:class|func|mod|meth|data|attr):`~?([^`]+)`", r"`\1`", text)
    text = re.sub(r"``([^`]+)``", r"`\1`", text)
    text = " ".join(line.strip() for line in text.splitlines() if line.strip())
    return text.replace("|", "\\|")


def _default(field: dataclasses.Field[Any]) -> str:
    """The field's default as it reads in YAML (``null``, ``true``, ``[]``); empty if none."""
    if field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    elif field.default is not dataclasses.MISSING:
        value = field.default
    else:
        return "required"
    if dataclasses.is_dataclass(value):
        return "see below"
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, tuple | list):
        return "`[" + ", ".join(map(str, value)) + "]`"
    return f"`{value}`"


def _form(hint: Any) -> str:
    """What a value of type ``hint`` must be, in the words of the config checker's errors."""
    from txrl.schema import _describe

    return _markdown(_describe(hint))


def settings_table(
    cls: type,
    prefix: str = "",
    *,
    skip: frozenset[str] = frozenset(),
    key: Callable[[str], str] | None = None,
) -> str:
    """A Markdown table of the YAML keys of dataclass ``cls``: key, valid form, default,
    meaning. ``prefix`` is the section's dotted path (``ppo.``), or ``key`` maps a field's
    name to its dotted key; fields in ``skip`` and those that are no YAML key
    (``metadata={"yaml": False}``) are left out."""
    hints = typing.get_type_hints(cls, include_extras=True)
    docs = field_docs(cls)
    fields = [
        f
        for f in dataclasses.fields(cls)
        if f.init and f.name not in skip and f.metadata.get("yaml", True)
    ]
    # settings documented in the class docstring alone (the backbones') get no empty column
    documented = any(f.name in docs for f in fields)
    rows = ["| key | value | default |" + (" meaning |" if documented else "")]
    rows.append("|---|---|---|" + ("---|" if documented else ""))
    for field in fields:
        dotted = key(field.name) if key is not None else prefix + field.name
        row = f"| `{dotted}` | {_form(hints[field.name])} | {_default(field)} |"
        if documented:
            row += f" {_markdown(docs.get(field.name, ''))} |"
        rows.append(row)
    return "\n".join(rows)


def _class_doc(cls: type) -> str:
    return _markdown(inspect.cleandoc(cls.__doc__ or ""))


def config_reference() -> str:
    """The config reference page: every key of a training config, of each learner's section,
    of each backbone's settings and of a compare grid."""
    from txrl.backbones import backbone_names, get_backbone
    from txrl.config.grid import CompareConfig, ReferenceConfig
    from txrl.config.sections import TrainConfig
    from txrl.learners import learners

    parts = [
        "# Config reference",
        "",
        "Generated from the config dataclasses when the site is built: each key, the form its "
        "value must take (as the checker's error messages word it), its default and its "
        "docstring. A key left out takes its default; a misspelt key, a wrong type or an "
        "out-of-range value is an error naming the key, and no training starts. `--set "
        "KEY=VALUE` on the command line takes the same dotted keys.",
        "",
        "## Top level",
        "",
        _class_doc(TrainConfig),
        "",
        settings_table(TrainConfig, skip=frozenset(f.name for f in _section_fields(TrainConfig))),
    ]
    for section in _section_fields(TrainConfig):
        section_cls = typing.get_type_hints(TrainConfig)[section.name]
        parts += [
            "",
            f"## `{section.name}:`",
            "",
            _class_doc(section_cls),
            "",
            settings_table(section_cls, f"{section.name}."),
        ]
    parts += [
        "",
        "## The learner's section",
        "",
        "The section named after `algo` holds the learner's settings; the other learners' "
        "sections are errors. The defaults are the learner's constructor defaults.",
    ]
    for learner in learners():
        parts += [
            "",
            f"### `{learner.name}:`",
            "",
            _class_doc(learner.settings),
            "",
            settings_table(learner.settings, f"{learner.name}."),
        ]
    parts += [
        "",
        "## Backbone settings",
        "",
        "`policy.backbone` picks one of these. The settings a backbone shares with the others "
        "are keys of `policy:` (`policy.d_model`); its own go in `policy.backbone_kwargs` "
        "(`policy.backbone_kwargs.d_ff`). `input_dim` is filled in by the policy. A setting the "
        "backbone does not have is an error (or is cleared, with `policy.inapplicable: drop`).",
    ]
    for name in backbone_names():
        record = get_backbone(name)
        table = settings_table(
            record.settings,
            skip=frozenset({"input_dim"}),
            key=functools.partial(_backbone_key, shared=set(record.shared)),
        )
        parts += [
            "",
            f"### `{name}`",
            "",
            f"Settings class `{record.settings.__module__}.{record.settings.__qualname__}`.",
            "",
            _class_doc(record.settings),
            "",
            table,
        ]
    parts += [
        "",
        "## Compare grids (`txrl compare`)",
        "",
        _class_doc(CompareConfig).split(" YAML::")[0],
        "",
        settings_table(CompareConfig, skip=frozenset({"reference"})),
        "",
        "### `reference:`",
        "",
        _class_doc(ReferenceConfig).split(" YAML::")[0],
        "",
        settings_table(ReferenceConfig, "reference."),
        "",
    ]
    return "\n".join(parts)


def _backbone_key(setting: str, shared: set[str]) -> str:
    """Where a backbone's ``setting`` goes in a config: a key of ``policy:`` if the backbones
    share it, else of ``policy.backbone_kwargs``."""
    return f"policy.{setting}" if setting in shared else f"policy.backbone_kwargs.{setting}"


def _section_fields(cls: type) -> list[dataclasses.Field[Any]]:
    """The fields of ``cls`` that are sections: dataclass-typed YAML keys."""
    hints = typing.get_type_hints(cls)
    return [
        f
        for f in dataclasses.fields(cls)
        if dataclasses.is_dataclass(hints[f.name]) and f.metadata.get("yaml", True)
    ]


def _argument_row(action: argparse.Action) -> str:
    """One row of a subcommand's table: the argument, its value, default and help."""
    if action.option_strings:
        name = ", ".join(f"`{s}`" for s in action.option_strings)
    else:
        name = _markdown(f"`{action.metavar or action.dest}`")
    if not action.option_strings:
        value = "positional, optional" if action.nargs == "?" else "positional"
    elif action.choices is not None:
        value = " \\| ".join(f"`{c}`" for c in action.choices)
    elif action.nargs == 0:
        value = "flag"
    else:
        value = _markdown(f"`{action.metavar or action.dest.upper()}`")
    if isinstance(action, argparse._AppendAction):
        value += ", repeatable"
    default = action.default
    shown = "" if default in (None, [], False) or default is argparse.SUPPRESS else f"`{default}`"
    help_text = (action.help or "").replace("%%", "%")
    return f"| {name} | {value} | {shown} | {_markdown(help_text)} |"


def cli_reference() -> str:
    """The CLI reference page: each ``txrl`` subcommand's usage, description and arguments,
    from the parser ``txrl`` runs."""
    from txrl.cli import build_parser

    parser = build_parser()
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help for choice in commands._choices_actions}
    parts = [
        "# CLI reference",
        "",
        "Generated from the parser `txrl` runs (`txrl.cli.build_parser`) when the site is "
        "built. `python -m txrl ...` is the same command. Bad input ends with a message "
        "naming what is wrong and what is valid, exit status 2, before any training starts.",
    ]
    for name, sub in commands.choices.items():
        usage = " ".join(sub.format_usage().split())
        parts += [
            "",
            f"## `txrl {name}`",
            "",
            _markdown((sub.description or helps.get(name) or "").replace("%%", "%")),
            "",
            "```text",
            usage.removeprefix("usage: "),
            "```",
            "",
            "| argument | value | default | what it does |",
            "|---|---|---|---|",
        ]
        parts += [_argument_row(a) for a in sub._actions if not isinstance(a, argparse._HelpAction)]
    parts.append("")
    return "\n".join(parts)


def backbone_settings_page() -> str:
    """The API page of every backbone's settings: one mkdocstrings entry per settings class
    (each with its constructor's signature and its fields), headed by the backbones that
    take it, in the registry's order."""
    from txrl.backbones import backbone_names, get_backbone

    classes: dict[type, list[str]] = {}
    for name in backbone_names():
        classes.setdefault(get_backbone(name).settings, []).append(name)
    parts = [
        "# Backbone settings",
        "",
        "Generated from the backbone registry when the site is built: the settings dataclass "
        "of every backbone, with its fields, their types and defaults. "
        "`txrl.make_backbone(name, **settings)` and `policy_kwargs` take them by name; the "
        "[config reference](../reference/config.md#backbone-settings) gives the same "
        "settings as the keys of a config.",
    ]
    for cls, names in classes.items():
        parts += [
            "",
            "## " + ", ".join(f"`{name}`" for name in names),
            "",
            f"::: {cls.__module__}.{cls.__qualname__}",
        ]
    parts.append("")
    return "\n".join(parts)


def on_files(files: Any, config: Any) -> Any:
    """mkdocs hook: add the generated pages to the build."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, CONFIG_PAGE, content=config_reference()))
    files.append(File.generated(config, CLI_PAGE, content=cli_reference()))
    files.append(File.generated(config, BACKBONE_SETTINGS_PAGE, content=backbone_settings_page()))
    return files
