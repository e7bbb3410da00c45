"""The library type-checks: ``mypy`` (in the test extra) with pyproject.toml's settings exits 0."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow  # mypy over the whole library in a subprocess
def test_mypy_passes_on_the_library() -> None:
    # files, Python version and per-module settings come from [tool.mypy] of pyproject.toml;
    # the incremental cache (.mypy_cache) keeps reruns to a few seconds
    done = subprocess.run(
        [sys.executable, "-m", "mypy"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"mypy found errors:\n{done.stdout}{done.stderr}"
    assert "Success" in done.stdout, done.stdout
