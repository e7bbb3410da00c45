"""Checkpoints written before txrl's modules moved (the run layer's, the learners') still load
and resume."""

from __future__ import annotations

import base64
import io
import json
import pickle
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from tests._runs import TINY, tiny, train_tiny
from txrl import cli
from txrl.moved_modules import MOVED_MODULES
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


#: Classes a saved model's data pickles, by the module that held each before every learner got
#: its folder (txrl/learners/<name>/) and the rollout buffer moved to the SB3 adapter.
OLD_HOMES = {
    "MemoryRolloutBuffer": "txrl.rl.buffer",
    "MemoryDictRolloutBuffer": "txrl.rl.buffer",
    "VMPOLossSettings": "txrl.rl.vmpo_loss",
}


def _saved_before_the_learners_moved(
    path: Path, algo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rewrite the model data of checkpoint ``path`` as the release before the move saved it:
    the rollout buffer's class (and V-MPO's loss config) pickled under their old modules."""
    from txrl.learners.vmpo.settings import VMPOLossSettings
    from txrl.run.algorithms import algorithm_class
    from txrl.sb3 import buffer

    model = algorithm_class(algo).load(path)
    moved = [buffer.MemoryRolloutBuffer, buffer.MemoryDictRolloutBuffer, VMPOLossSettings]
    with monkeypatch.context() as patch:
        for cls in moved:
            old = OLD_HOMES[cls.__name__]
            patch.setitem(sys.modules, old, sys.modules[cls.__module__])
            patch.setattr(cls, "__module__", old)
        saved = io.BytesIO()
        model.save(saved)
    with zipfile.ZipFile(saved) as archive:
        data = archive.read("data")
    pickled = b"".join(
        base64.b64decode(item[":serialized:"])
        for item in json.loads(data).values()
        if isinstance(item, dict) and ":serialized:" in item
    )
    assert b"txrl.rl.buffer" in pickled and b"txrl.sb3.buffer" not in pickled
    assert (b"txrl.rl.vmpo_loss" in pickled) == (algo == "vmpo")
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    members["data"] = data
    with zipfile.ZipFile(path, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)


@pytest.mark.parametrize("algo", ["ppo", "vmpo"])
def test_a_model_saved_before_the_learners_moved_loads_and_evaluates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, algo: str
) -> None:
    from txrl.run.algorithms import algorithm_class

    settings = TINY["ppo"]
    changes = {} if algo == "ppo" else {"algo": "vmpo", "vmpo": settings, "ppo": None}
    config = {k: v for k, v in tiny(**changes).items() if v is not None}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config))
    run_dir = tmp_path / "run"
    assert cli.main(["train", str(tmp_path / "run.yaml"), "--run-dir", str(run_dir)]) == 0
    final = run_dir / "checkpoints" / "final.zip"
    _saved_before_the_learners_moved(final, algo, monkeypatch)
    for old in MOVED_MODULES:  # as in a process that never imported an old path
        monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=r"txrl\.rl\.buffer moved to txrl\.sb3\.buffer"):
        model = algorithm_class(algo).load(final)  # SB3's own load, as a user calls it
    assert model.rollout_buffer_class.__module__ == "txrl.sb3.buffer"
    if algo == "vmpo":
        assert type(model.vmpo_config).__module__ == "txrl.learners.vmpo.settings"
    assert cli.main(["eval", str(run_dir), "--episodes", "2", "--json"]) == 0


def test_an_old_path_imports_the_module_that_holds_its_classes_now(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib

    from txrl.sb3 import buffer

    for old in ("txrl.rl", "txrl.rl.buffer"):
        monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match="import it from there"):
        old = importlib.import_module("txrl.rl.buffer")
    assert old is buffer and buffer.__spec__.name == "txrl.sb3.buffer"
    assert pickle.loads(pickle.dumps(buffer.MemoryRolloutBuffer)) is buffer.MemoryRolloutBuffer
    with pytest.raises(ModuleNotFoundError, match=r"txrl\.rl\.nothing"):
        importlib.import_module("txrl.rl.nothing")  # only the moved paths are kept
    assert importlib.import_module("txrl.sb3.policies").__spec__.name == "txrl.sb3.policies"
