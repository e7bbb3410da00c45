"""The files of a run directory, read and written without torch: their names, the eval log,
the finished record, the TensorBoard cut-back of a resume, the lock and the default place.

`txrl.run.run_dir` trains in a run directory with these; ``txrl compare`` and the
results scripts read finished runs with them alone. The layout is described in
`txrl.run.run_dir`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from txrl.config import CONFIG_FILE, TrainConfig
from txrl.errors import RunError
from txrl.files import atomic_write

CHECKPOINT_DIR = "checkpoints"
FINAL_CHECKPOINT = "final.zip"
BEST_CHECKPOINT = "best.zip"
EVAL_LOG = "eval.jsonl"
RESUME_LOG = "resumes.jsonl"
TB_DIR = "tb"
FINISHED_RECORD = "finished.json"
#: Members of a checkpoint file that txrl adds to SB3's model archive.
RESUME_MEMBER = "txrl/resume.pkl"
CONFIG_MEMBER = "txrl/config.yaml"
#: Members every checkpoint has: SB3's archive (``data``, ``policy.pth``) and txrl's.
CHECKPOINT_MEMBERS = ("data", "policy.pth", RESUME_MEMBER, CONFIG_MEMBER)
# A fresh run never overwrites these; a directory with only config.yaml never started.
RUN_FILES = (EVAL_LOG, TB_DIR, CHECKPOINT_DIR)


@dataclass
class EvalLog:
    """``eval.jsonl``: appended and fsynced per evaluation; cut back to a checkpoint on resume."""

    path: Path

    def read(self) -> list[dict[str, Any]]:
        return read_eval_log(self.path)

    def append(self, entry: dict[str, Any]) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def truncate(self, timesteps: int) -> None:
        kept = [e for e in self.read() if e["timesteps"] <= timesteps]
        atomic_write(self.path, "".join(json.dumps(e) + "\n" for e in kept).encode())


def read_eval_log(path: Path) -> list[dict[str, Any]]:
    """The entries of an eval log; a line cut short by a crash is skipped."""
    if not path.exists():
        return []
    entries = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            entry = json.loads(line)
            if isinstance(entry, dict) and "timesteps" in entry:
                entries.append(entry)
    return entries


def write_finished_record(
    run_dir: str | Path,
    *,
    timesteps: int,
    budget: int,
    stopped_at_target: bool,
    wall_time_s: float | None,
    **note: Any,
) -> None:
    """Write ``finished.json``: the step a finished run ended at, its budget, whether
    ``eval.stop_at`` ended it early, its clock, and any further ``note`` (atomically)."""
    record = {
        "timesteps": timesteps,
        "budget": budget,
        "stopped_at_target": stopped_at_target,
        "wall_time_s": wall_time_s,
        **note,
    }
    atomic_write(Path(run_dir) / FINISHED_RECORD, (json.dumps(record) + "\n").encode())


def read_finished_record(run_dir: str | Path) -> dict[str, Any] | None:
    """The ``finished.json`` of ``run_dir`` (an empty dict where it cannot be read), or None
    where there is none."""
    path = Path(run_dir) / FINISHED_RECORD
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return record if isinstance(record, dict) else {}


def finished_run(run_dir: str | Path) -> bool:
    """Whether ``run_dir`` holds a finished run: its final checkpoint, or (a record of the run
    copied without its checkpoints, as ``results/`` keeps them) its ``finished.json``."""
    return is_finished(Path(run_dir)) or (Path(run_dir) / FINISHED_RECORD).exists()


def is_finished(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds its final checkpoint."""
    return (Path(run_dir) / CHECKPOINT_DIR / FINAL_CHECKPOINT).exists()


def truncate_tensorboard(tb_dir: Path, step: int) -> None:
    """Drop every event after ``step`` from the TensorBoard files of ``tb_dir`` (atomically).

    A resumed run redoes the steps after its checkpoint; without this TensorBoard would hold
    them twice (and out of order). Events without a step (file headers) are kept.
    """
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
    from tensorboard.compat.proto import event_pb2
    from tensorboard.summary.writer.record_writer import RecordWriter

    for path in sorted(tb_dir.glob("events.out.tfevents.*")):
        kept, dropped = [], 0
        for record in RawEventFileLoader(str(path)).Load():  # stops at a record cut short
            event = event_pb2.Event.FromString(record)
            if event.HasField("summary") and event.step > step:
                dropped += 1
            else:
                kept.append(record)
        if dropped:
            buffer = io.BytesIO()
            writer = RecordWriter(buffer)
            for record in kept:
                writer.write(record)
            atomic_write(path, buffer.getvalue())


def tensorboard_last_step(tb_dir: Path) -> int | None:
    """The highest step of any event in the TensorBoard files of ``tb_dir`` (None: none)."""
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
    from tensorboard.compat.proto import event_pb2

    last = None
    for path in sorted(tb_dir.glob("events.out.tfevents.*")):
        for record in RawEventFileLoader(str(path)).Load():  # stops at a record cut short
            event = event_pb2.Event.FromString(record)
            if event.HasField("summary"):
                last = event.step if last is None else max(last, event.step)
    return last


def checkpoint_intact(path: Path) -> bool:
    """Whether ``path`` is a whole checkpoint: a zip archive with every member of
    `CHECKPOINT_MEMBERS`, each passing its CRC check, read without torch. (The first
    half of a checkpoint may still open as a zip: the model's ``policy.pth`` inside it is
    one.) [`txrl.run.checkpoint.read_checkpoint`][txrl.run.checkpoint.read_checkpoint] reads it and names what is wrong."""
    try:
        with zipfile.ZipFile(path) as archive:
            whole = set(CHECKPOINT_MEMBERS) <= set(archive.namelist())
            return whole and archive.testzip() is None
    except (OSError, zipfile.BadZipFile, EOFError, ValueError):
        return False


def clear_dir(directory: Path) -> None:
    if directory.exists():
        for p in sorted(directory.rglob("*"), reverse=True):
            p.rmdir() if p.is_dir() else p.unlink()


LOCK_FILE = ".lock"


@contextlib.contextmanager
def run_lock(run_dir: Path) -> Any:
    """Hold ``run_dir`` for this process while it trains (an exclusive ``flock`` on
    ``run_dir/.lock``, released when the block ends or the process dies).

    Two processes training one run directory (a compare started twice, a resume while the
    run still goes) would interleave their checkpoints and logs; the second one is refused
    instead, with the first one's pid. A directory that does not exist yet is created (a new
    run); on systems without ``fcntl`` (Windows) nothing is locked.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / LOCK_FILE, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise RunError(
                f"{run_dir} is being trained by another process (pid {holder}); wait for it to "
                "end (or stop it) before resuming, or train in another --run-dir"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def default_run_dir(config: TrainConfig) -> Path:
    return Path("runs") / f"{config.name or 'run'}-{time.strftime('%Y%m%d-%H%M%S')}"


__all__ = [
    "BEST_CHECKPOINT",
    "CHECKPOINT_DIR",
    "CHECKPOINT_MEMBERS",
    "CONFIG_FILE",
    "CONFIG_MEMBER",
    "EVAL_LOG",
    "FINAL_CHECKPOINT",
    "FINISHED_RECORD",
    "LOCK_FILE",
    "RESUME_LOG",
    "RESUME_MEMBER",
    "RUN_FILES",
    "TB_DIR",
    "EvalLog",
    "checkpoint_intact",
    "clear_dir",
    "default_run_dir",
    "finished_run",
    "is_finished",
    "read_eval_log",
    "read_finished_record",
    "run_lock",
    "tensorboard_last_step",
    "truncate_tensorboard",
    "write_finished_record",
]
