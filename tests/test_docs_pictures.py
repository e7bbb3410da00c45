"""The pictures of the documentation site exist, come from where they say, and are drawn by
``docs/figures.py``: a study's picture is served from ``results/``, the ``txrl inspect``
pictures are drawn from a quick-start run."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _figures() -> ModuleType:
    spec = importlib.util.spec_from_file_location("txrl_docs_figures", DOCS / "figures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_picture_the_pages_show_exists() -> None:
    figures = _figures()
    shown = figures.shown_pictures()
    assert figures.missing_pictures() == {}
    # the pictures the pages are meant to show: the reach curve, each results page's
    # learning curves, and the attention map, gate trace and probe of txrl inspect
    assert "figures/results/reach/reach.png" in shown
    for picture in figures.INSPECT_PICTURES:
        assert shown[f"figures/inspect/{picture}"] == {"inspect.md"}
    pages_with_curves = {
        page
        for picture, pages in shown.items()
        if picture.startswith(figures.RESULTS_FIGURES) and picture.endswith("/curves.png")
        for page in pages
    }
    assert pages_with_curves == {
        f"results/{name}.md"
        for name in (
            "tmaze",
            "reach",
            "minigrid-s9",
            "minigrid-random",
            "gates",
            "popgym",
            "popgym-recall",
            "memory-gym",
        )
    }


def test_a_missing_picture_is_named_with_its_page(tmp_path: Path) -> None:
    figures = _figures()
    docs = tmp_path / "docs"
    (docs / "results").mkdir(parents=True)
    (docs / "results" / "page.md").write_text(
        "![a study](../figures/results/no_such_study/curves.png)\n"
        "![the reach curve](../figures/results/reach/reach.png)\n"
        "![a drawing](../figures/gone.png)\n"
    )
    assert figures.missing_pictures(docs, ROOT) == {
        "figures/results/no_such_study/curves.png": {"results/page.md"},
        "figures/gone.png": {"results/page.md"},
    }
    # a study's picture is the study's own file
    assert figures.source_of("figures/results/reach/reach.png", docs, ROOT) == (
        ROOT / "results" / "reach" / "reach.png"
    )


def test_the_check_command_lists_the_pictures(capsys: pytest.CaptureFixture[str]) -> None:
    assert _figures().main(["check"]) == 0
    out = capsys.readouterr().out
    assert "ok      results/reach/reach.png  (results/reach.md)" in out
    assert "MISSING" not in out


@pytest.mark.slow  # trains a tiny quick-start run and plays its episodes
def test_the_script_trains_a_run_and_draws_the_inspect_pictures(tmp_path: Path) -> None:
    out = tmp_path / "out"
    command = [sys.executable, str(DOCS / "figures.py"), "inspect", "--out", str(out)]
    tiny = ["budget=1024", "eval.every=1024", "env.kwargs.length=3", "env.kwargs.max_steps=12"]
    for override in tiny:
        command += ["--set", override]
    command += ["--probe-episodes", "8"]
    subprocess.run(command, check=True, cwd=tmp_path, capture_output=True)
    for picture in _figures().INSPECT_PICTURES:
        assert (out / picture).read_bytes().startswith(b"\x89PNG")
