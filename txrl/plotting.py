"""The matplotlib setup shared by ``txrl compare`` and ``txrl inspect``.

Figures are made with matplotlib's object-oriented API (`matplotlib.figure.Figure`),
never pyplot: no global figure state, no display backend to pick, so plotting works the same
in a worker process, on a headless machine and in a notebook. A PNG is rendered by the Agg
canvas into memory and written atomically (`txrl.files.atomic_write`), so a run
killed while saving leaves the previous picture, not half a file. matplotlib is the ``plots``
extra: importing this module does not import it.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any


def figure_class(needed_by: str) -> Any:
    """matplotlib's ``Figure``; without matplotlib an ImportError saying what ``needed_by``
    (e.g. ``"txrl compare draws its plots"``) needs and how to install it."""
    try:
        from matplotlib.figure import Figure  # the OO API: no pyplot, no display backend
    except ImportError as e:
        raise ImportError(f"{needed_by} with matplotlib: pip install 'txrl[plots]'") from e
    return Figure


def png_bytes(fig: Any, *, dpi: int, tight: bool = False) -> bytes:
    """``fig`` rendered as PNG (``tight``: cropped to what is drawn, matplotlib's
    ``bbox_inches="tight"``)."""
    data = io.BytesIO()
    fig.savefig(data, format="png", dpi=dpi, **({"bbox_inches": "tight"} if tight else {}))
    return data.getvalue()


def save_png(fig: Any, path: str | Path, *, dpi: int, tight: bool = False) -> None:
    """Write ``fig`` to ``path`` as PNG, atomically (readers see the old file or the new one)."""
    from txrl.files import atomic_write

    atomic_write(Path(path), png_bytes(fig, dpi=dpi, tight=tight))
