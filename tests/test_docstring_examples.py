"""The Python examples in the docstrings of txrl, its tasks and its recipe run as written.

An example is a fenced ```` ```python ```` block in a module, class or function docstring
(how the API pages render it). Each runs in a fresh namespace, so it must import what it
uses, as a reader copying it would."""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / "txrl", ROOT / "envs", ROOT / "agents"]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def docstring_examples() -> list[tuple[str, str]]:
    """(``path:line of the docstring``, code) of every example, read without importing."""
    found = []
    for source in SOURCES:
        for path in sorted(source.rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            nodes = [tree, *ast.walk(tree)]
            for node in nodes:
                if not isinstance(
                    node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
                ):
                    continue
                doc = ast.get_docstring(node, clean=True)
                if not doc:
                    continue
                line = getattr(node, "lineno", 1)
                for match in BLOCK.finditer(doc):
                    where = f"{path.relative_to(ROOT)}:{line}"
                    found.append((where, textwrap.dedent(match.group(1))))
    return list(dict.fromkeys(found))  # a module's docstring is seen once


EXAMPLES = docstring_examples()


def test_the_docstrings_have_examples() -> None:
    assert any("MemoryPPO" in code for _, code in EXAMPLES), [w for w, _ in EXAMPLES]


@pytest.mark.parametrize("code", [c for _, c in EXAMPLES], ids=[w for w, _ in EXAMPLES])
def test_a_docstring_example_runs(code: str) -> None:
    exec(compile(code, "<docstring example>", "exec"), {"__name__": "__docstring_example__"})
