"""The callbacks of a run (:mod:`txrl.run.callbacks`): progress over the run's whole budget,
as lines without a terminal and as a bar that a resume starts where the run was; the stop on
Ctrl-C; and the warning of an evaluation that falls far below the run's best
(:func:`txrl.run.evaluate.drop_from_best`, ``eval.warn_drop``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tests._runs import TINY, train_tiny
from txrl import cli
from txrl.config import TrainConfig
from txrl.errors import ConfigError
from txrl.run.evaluate import EvalResult, drop_from_best
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


def fake_eval(successes: int, episodes: int = 20) -> EvalResult:
    """An evaluation of ``episodes`` episodes of which ``successes`` succeeded."""
    won = [True] * successes + [False] * (episodes - successes)
    return EvalResult(
        returns=tuple(float(w) for w in won), lengths=(5,) * episodes, successes=tuple(won)
    )


def eval_log(rates: list[float], episodes: int = 20) -> list[dict[str, Any]]:
    """An eval log of these success rates, one evaluation every 100 steps."""
    return [
        {"timesteps": 100 * i, **fake_eval(round(r * episodes), episodes).summary()}
        for i, r in enumerate(rates)
    ]


def warned_at(rates: list[float], threshold: float | None = 0.2, episodes: int = 20) -> list[int]:
    """The steps at which a run with these evaluations warns, each decided as training does:
    from the log up to and including that evaluation."""
    log = eval_log(rates, episodes)
    return [
        e["timesteps"] for i, e in enumerate(log) if drop_from_best(log[: i + 1], threshold).warn
    ]


def test_an_evaluation_far_below_the_best_warns_once_per_fall() -> None:
    assert warned_at([0.5, 1.0, 0.4, 0.3, 0.35, 0.9]) == [200]  # the first of the fall only
    assert warned_at([0.5, 1.0, 0.4, 0.3, 1.0, 0.3]) == [200]  # a tie is no new best
    assert warned_at([0.5, 0.9, 0.4, 1.0, 0.5]) == [200, 400]  # a new best: a new fall warns
    assert warned_at([0.5, 0.7, 0.9, 1.0, 0.95, 0.85, 1.0]) == []  # within 0.2 of the best
    assert warned_at([0.5, 1.0, 0.4], threshold=None) == []  # eval.warn_drop: null
    # more than 0.2 below, but within the noise of 4 episodes: 1/4 against 3/4 overlap
    assert warned_at([0.0, 0.75, 0.25], episodes=4) == []
    assert warned_at([0.0, 1.0, 0.0], episodes=4) == [200]
    fall = drop_from_best(eval_log([0.5, 1.0, 0.4]), 0.2)
    assert fall.fell and fall.best is not None and fall.best["timesteps"] == 100
    assert fall.drop == pytest.approx(0.6)
    assert drop_from_best(eval_log([0.5, 1.0]), 0.2).drop == 0.0  # a new best
    assert drop_from_best(eval_log([0.5]), 0.2).best is None


def test_returns_without_intervals_fall_by_the_threshold_alone() -> None:
    """A mean return is the score where the env reports no success; an entry without an
    interval (an older log) is judged by the threshold alone."""
    log = [
        {"timesteps": t, "success_rate": None, "mean_return": r}
        for t, r in [(0, -0.5), (100, 0.49), (200, -0.3)]
    ]
    fall = drop_from_best(log, 0.2)
    assert fall.warn and fall.drop == pytest.approx(0.79)


def test_warn_drop_must_be_positive_or_null() -> None:
    with pytest.raises(ConfigError) as error:
        TrainConfig.from_dict({"eval": {"warn_drop": 0}})
    assert "eval.warn_drop must be a number > 0 or null, got 0" in str(error.value)
    assert TrainConfig.from_dict({"eval": {"warn_drop": None}}).eval.warn_drop is None


def _train_with_evaluations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, successes: list[int]
) -> Path:
    """A tiny run whose evaluations (at steps 0, 32, ..., 128) score ``successes`` of 20."""
    import txrl.run.run_dir as run_dir_module

    results = iter(successes)
    monkeypatch.setattr(run_dir_module, "evaluate", lambda *a, **k: fake_eval(next(results)))
    run_dir = train_tiny(tmp_path, eval={**TINY["eval"], "every": 32})
    assert next(results, None) is None, "the run made fewer evaluations than expected"
    return run_dir


def _tensorboard(run_dir: Path) -> tuple[list[tuple[int, float]], list[tuple[int, str]]]:
    """``eval/drop_from_best`` as (step, value) and ``eval/warning`` as (step, text)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (events,) = (run_dir / "tb").rglob("events.out.tfevents.*")
    accumulator = EventAccumulator(str(events), size_guidance={"scalars": 0, "tensors": 0})
    accumulator.Reload()
    drops = [(e.step, e.value) for e in accumulator.Scalars("eval/drop_from_best")]
    texts = []
    if "eval/warning/text_summary" in accumulator.Tags()["tensors"]:
        texts = [
            (e.step, e.tensor_proto.string_val[0].decode())
            for e in accumulator.Tensors("eval/warning/text_summary")
        ]
    return drops, texts


def test_a_run_that_learns_then_loses_it_warns_once_naming_the_best_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = _train_with_evaluations(tmp_path, monkeypatch, [10, 20, 8, 6, 19])
    warnings = [line for line in capsys.readouterr().err.splitlines() if "lost" in line]
    assert len(warnings) == 1, warnings
    (warning,) = warnings
    best = run_dir / CHECKPOINT_DIR / "best.zip"
    assert warning.startswith("warning: the evaluation at step 64 scored 0.400 (success rate)")
    assert "0.600 below the run's best, 1.000 at step 32" in warning
    assert f"{best} keeps the best model" in warning
    assert f"`txrl eval {run_dir} --best`" in warning
    drops, texts = _tensorboard(run_dir)
    assert drops == [
        (0, 0.0),
        (32, 0.0),
        (64, pytest.approx(0.6)),
        (96, pytest.approx(0.7)),
        (128, pytest.approx(0.05)),
    ]
    assert [step for step, _ in texts] == [64] and "txrl eval" in texts[0][1]


def test_a_run_that_holds_what_it_learned_does_not_warn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = _train_with_evaluations(tmp_path, monkeypatch, [10, 18, 20, 17, 19])
    assert "lost" not in capsys.readouterr().err
    drops, texts = _tensorboard(run_dir)
    assert len(drops) == 5 and texts == []
