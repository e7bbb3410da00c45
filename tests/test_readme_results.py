"""Every file or folder the README names under ``results/``, ``configs/`` or ``bench/`` is in
the repository, so a claim in the README can be traced to what it was measured from."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

#: Results still running when the README was written: a placeholder comment marks where
#: their numbers go, and while it is there the folder they will land in may be missing.
PENDING = {
    "<!-- HELDOUT_S9 -->": "results/minigrid_memory_s9/heldout",
    "<!-- HELDOUT_TMAZE -->": "results/tmaze_long/heldout",
}

#: A path as the README writes it: starts at one of the three folders, runs to the first
#: character that cannot be in one of this repository's paths (a backtick, a space, ...).
PATH = re.compile(r"(?<![\w./-])((?:results|configs|bench)/[\w./*-]*[\w/*])")


def named_paths(text: str) -> set[str]:
    """The paths ``text`` names; a ``*`` stays in (a glob), a ``<...>`` part ends the path."""
    return {match.group(1) for match in PATH.finditer(text)}


def missing(text: str, root: Path) -> list[str]:
    """The paths named in ``text`` that ``root`` lacks (globs: those that match nothing),
    leaving out those under a folder whose placeholder is still in ``text``."""
    pending = tuple(folder for marker, folder in PENDING.items() if marker in text)
    gone = []
    for path in sorted(named_paths(text)):
        if path.rstrip("/").startswith(pending):
            continue
        found = any(root.glob(path.rstrip("/"))) if "*" in path else (root / path).exists()
        if not found:
            gone.append(path)
    return gone


def test_every_path_the_readme_names_exists() -> None:
    text = README.read_text()
    paths = named_paths(text)
    assert "results/tmaze_long/" in paths and "configs/quickstart.yaml" in paths  # it reads them
    assert missing(text, ROOT) == []


def test_a_missing_path_is_reported_and_a_placeholder_covers_only_its_folder(
    tmp_path: Path,
) -> None:
    (tmp_path / "results" / "study").mkdir(parents=True)
    (tmp_path / "results" / "study" / "a.md").write_text("")
    text = (
        "see `results/study/a.md`, `results/study/*.md` and `results/gone/` "
        "(from `results/study/`), `results/minigrid_memory_s9/heldout/`\n<!-- HELDOUT_S9 -->\n"
        "`results/tmaze_long/heldout/`"
    )
    assert missing(text, tmp_path) == ["results/gone/", "results/tmaze_long/heldout/"]
    filled = text.replace("<!-- HELDOUT_S9 -->", "0.97 [0.93, 0.99]")
    assert "results/minigrid_memory_s9/heldout/" in missing(filled, tmp_path)
