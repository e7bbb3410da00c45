"""Files a user keeps (checkpoints, logs, configs, pictures), written atomically.

A file is written to a temporary file beside it, flushed to the disk and moved into place
with ``os.replace``, so that a reader, or a crash (even ``kill -9``), sees the old file or
the new one, whole, never a torn one. Plain Python: the run layer, the plots and the
scripts of ``results/`` use it without importing torch.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, whole.

    The data goes to a temporary file beside ``path`` first; when anything fails (a full
    disk, a read-only directory, Ctrl-C) the temporary file is removed and the error raised,
    an `OSError` naming ``path`` itself (the file that could not be written).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}"
    try:
        _write_synced(tmp, data)
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(e, OSError) and e.errno is not None:
            raise OSError(e.errno, e.strerror, str(path)) from e
        raise
    fsync_dir(path.parent)


def _write_synced(path: Path, data: bytes) -> None:
    """Write ``data`` to a new file ``path`` and flush it to the disk."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def fsync_dir(directory: Path) -> None:
    """Flush ``directory``'s entries to the disk, so that a rename in it survives a crash."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
