"""The callbacks of a run (:mod:`txrl.run.callbacks`): progress over the run's whole budget,
as lines without a terminal and as a bar that a resume starts where the run was."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tests._runs import train_tiny
from txrl import cli
from txrl.run.run_files import CHECKPOINT_DIR, FINAL_CHECKPOINT


def test_progress_lines_without_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime = {"progress_bar": True, "progress_every": 0.001, "torch_threads": 1}
    train_tiny(tmp_path, runtime=runtime)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("step ")]
    assert lines[0].startswith("step 0/128 (0%)")
    assert len(lines) >= 4
    assert lines[-1].startswith("step 128/128 (100%)") and "steps/s" in lines[-1]
    assert "eval at 64: success" in lines[-1]


def test_resumed_progress_bar_counts_the_whole_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = train_tiny(tmp_path)
    (run_dir / CHECKPOINT_DIR / FINAL_CHECKPOINT).unlink()
    (run_dir / CHECKPOINT_DIR / "step_000000096.zip").unlink()
    capsys.readouterr()
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    argv = ["train", "--resume", str(run_dir), "--set", "runtime.progress_bar=true"]
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert "128/128" in err and "64/64" not in err  # total: the run's, not the session's


def test_the_first_ctrl_c_asks_for_a_stop_and_the_second_stops_at_once() -> None:
    import signal

    from txrl.run.callbacks import StopOnInterrupt

    # raise_signal delivers to this thread at once (os.kill may pick another thread of the
    # process, and the handler then runs a little later); earlier tests in this process may
    # have left another handler or a blocked SIGINT behind, so both are set here and restored.
    before = signal.getsignal(signal.SIGINT)
    blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        stop = StopOnInterrupt()
        with stop.catching():
            signal.raise_signal(signal.SIGINT)
            assert stop.requested and not stop._on_step()
            with pytest.raises(KeyboardInterrupt):
                signal.raise_signal(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    assert StopOnInterrupt()._on_step()  # no request: training goes on


def test_with_a_save_the_stop_waits_for_the_next_rollout_start_and_its_checkpoint() -> None:
    """A stop asked for mid-rollout (here by :func:`txrl.run.callbacks.request_stop`, as a
    compare's worker does) lets the rollout finish; the next rollout start saves, and the
    step after it ends ``learn()``."""
    from txrl.run import callbacks
    from txrl.run.callbacks import StopOnInterrupt, request_stop

    saved: list[int] = []

    def save(model: Any) -> int:
        saved.append(64)  # a run's save_on_stop writes the checkpoint and returns its step
        return 64

    stop = StopOnInterrupt(save=save)
    stop.model = None  # type: ignore[assignment]  # (set by learn(); the save ignores it)
    try:
        assert stop._on_step()
        request_stop()
        assert stop._on_step() and stop._on_step()  # the rollout under way goes on
        stop._on_rollout_start()
        stop._on_rollout_start()  # once only
        assert saved == [64] and stop.saved_step == 64
        assert not stop._on_step()
    finally:
        callbacks._STOP_REQUESTED.clear()  # process-wide: leave none for later tests
    assert StopOnInterrupt(save=lambda model: 0)._on_step()
