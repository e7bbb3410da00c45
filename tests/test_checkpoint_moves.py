"""Checkpoints written before the run layer's modules moved still load and resume."""

from __future__ import annotations

import pickle
import sys
import zipfile
from pathlib import Path

import pytest

from tests._runs import train_tiny
from txrl import cli
from txrl.run import checkpoint


def _as_written_before_the_move(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rewrite ``path``'s resume state as the release that kept it in ``txrl.checkpoint``
    pickled it (the class found under that module's name)."""
    state = checkpoint.read_resume_state(path)
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "txrl.checkpoint", checkpoint)
        patch.setattr(checkpoint.ResumeState, "__module__", "txrl.checkpoint")
        old = pickle.dumps(state)
    assert b"txrl.checkpoint" in old and b"txrl.run.checkpoint" not in old
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    members[checkpoint.RESUME_MEMBER] = old
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def test_a_checkpoint_of_the_old_module_layout_loads_and_evaluates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = train_tiny(tmp_path)
    final = run_dir / "checkpoints" / "final.zip"
    _as_written_before_the_move(final, monkeypatch)
    assert "txrl.checkpoint" not in sys.modules
    state = checkpoint.read_resume_state(final)
    assert isinstance(state, checkpoint.ResumeState)
    assert cli.main(["eval", str(run_dir), "--episodes", "2", "--json"]) == 0
