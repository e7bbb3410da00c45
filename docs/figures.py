"""The pictures of the documentation site: drawn from ``results/`` and from a quick-start run,
never edited by hand.

Two kinds, both generated:

* **Results pictures** (learning curves, final scores, the reach curve): each study draws
  its own into ``results/<study>/`` (``txrl compare ... --aggregate-only``, the study's
  scripts). A page shows one by linking ``figures/results/<path under results/>``;
  :func:`on_files`, a mkdocs hook, serves every such link from the study's file at build
  time, so the site always shows the study as committed and ``docs/`` holds no copy.
* **``txrl inspect`` pictures** (an attention map, a gate trace, a probe plot):
  ``python docs/figures.py inspect`` trains ``configs/quickstart.yaml`` (about a minute on a
  CPU), runs ``txrl inspect`` and ``txrl inspect --probe cue`` on it, and writes the pictures
  the pages show into ``docs/figures/inspect/`` (``--run RUN_DIR`` draws from an existing
  run instead of training one). Run it again whenever ``txrl inspect``'s drawing changes.

``python docs/figures.py check`` lists every picture the pages show and fails on a missing
one; ``tests/test_docs_pictures.py`` does the same in the suite.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: Where a page links a study's picture; the rest of the path is the file's under results/.
RESULTS_FIGURES = "figures/results/"
#: Where ``python docs/figures.py inspect`` writes the pictures of ``txrl inspect``.
INSPECT_FIGURES = DOCS / "figures" / "inspect"
#: The pictures the inspect page shows, by name in ``INSPECT_FIGURES``.
INSPECT_PICTURES = ("attention.png", "traces.png", "probe.png")
#: The run those pictures are drawn from.
QUICKSTART = ROOT / "configs" / "quickstart.yaml"
#: An image in Markdown: ``![alt](path)``.
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")


def shown_pictures(docs: Path = DOCS) -> dict[str, set[str]]:
    """Every picture a page of ``docs`` shows, as its path in the site's sources (relative to
    ``docs``, ``..`` resolved), with the pages that show it."""
    shown: dict[str, set[str]] = {}
    for page in sorted(docs.rglob("*.md")):
        for link in IMAGE.findall(page.read_text()):
            if "://" in link:
                continue
            path = (page.parent / link).resolve().relative_to(docs.resolve()).as_posix()
            shown.setdefault(path, set()).add(page.relative_to(docs).as_posix())
    return shown


def source_of(picture: str, docs: Path = DOCS, root: Path = ROOT) -> Path:
    """The file a shown picture is served from: the study's file under ``results/`` for a
    ``figures/results/`` link, else the file in ``docs``."""
    if picture.startswith(RESULTS_FIGURES):
        return root / "results" / picture.removeprefix(RESULTS_FIGURES)
    return docs / picture


def missing_pictures(docs: Path = DOCS, root: Path = ROOT) -> dict[str, set[str]]:
    """The shown pictures whose file is missing, with the pages that show them."""
    return {
        picture: pages
        for picture, pages in shown_pictures(docs).items()
        if not source_of(picture, docs, root).is_file()
    }


def on_files(files: Any, config: Any) -> Any:
    """mkdocs hook: serve each ``figures/results/...`` picture a page shows from its study's
    file; a missing one stops the build, naming the file and the pages."""
    from mkdocs.exceptions import PluginError
    from mkdocs.structure.files import File

    docs = Path(config["docs_dir"])
    gone = missing_pictures(docs)
    if gone:
        lines = [f"{source_of(p, docs)} (shown by {', '.join(sorted(s))})" for p, s in gone.items()]
        raise PluginError("pictures the pages show are missing: " + "; ".join(lines))
    for picture in shown_pictures(docs):
        if picture.startswith(RESULTS_FIGURES):
            files.append(File.generated(config, picture, abs_src_path=str(source_of(picture))))
    return files


def _train_quickstart(run_dir: Path, overrides: Sequence[str]) -> None:
    """``txrl train configs/quickstart.yaml`` into ``run_dir`` (with ``--set`` overrides)."""
    command = [sys.executable, "-m", "txrl", "train", str(QUICKSTART), "--run-dir", str(run_dir)]
    command += ["--set", "runtime.progress_bar=false"]
    for override in overrides:
        command += ["--set", override]
    subprocess.run(command, check=True)


def draw_inspect_pictures(run: Path, out: Path, *, probe_episodes: int | None = None) -> None:
    """Run ``txrl inspect`` and ``txrl inspect --probe cue`` on ``run`` and write
    :data:`INSPECT_PICTURES` into ``out``: the attention map and the gate trace of the
    episode whose cue says *down* (or of the first episode, where none does), and the probe
    plot."""
    from txrl.files import atomic_write
    from txrl.inspect import inspect_run, probe_run

    with tempfile.TemporaryDirectory() as scratch:
        maps, probe = Path(scratch) / "inspect", Path(scratch) / "probe"
        inspect_run(run, episodes=4, out_dir=maps)
        probe_run(run, "cue", episodes=probe_episodes, out_dir=probe)
        summary = json.loads((maps / "summary.json").read_text())
        cues = {row["episode"]: row.get("cue") for row in summary["cue_mass_at_decision"]}
        episode = next((i for i, cue in sorted(cues.items()) if cue == "down"), 0)
        chosen = {
            "attention.png": maps / f"episode_{episode}_attention.png",
            "traces.png": maps / f"episode_{episode}_traces.png",
            "probe.png": probe / "probe.png",
        }
        for name, path in chosen.items():
            atomic_write(out / name, path.read_bytes())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    inspect = commands.add_parser("inspect", help="draw the txrl inspect pictures")
    inspect.add_argument("--run", type=Path, help="draw from this run (default: train one)")
    inspect.add_argument("--out", type=Path, default=INSPECT_FIGURES)
    inspect.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a key of the quick-start config for the run trained here",
    )
    inspect.add_argument("--probe-episodes", type=int, help="episodes the probe plays")
    commands.add_parser("check", help="list the pictures the pages show; fail on a missing one")
    args = parser.parse_args(argv)
    if args.command == "check":
        gone = missing_pictures()
        for picture, pages in sorted(shown_pictures().items()):
            state = "MISSING" if picture in gone else "ok"
            print(f"{state:8}{source_of(picture).relative_to(ROOT)}  ({', '.join(sorted(pages))})")
        return 1 if gone else 0
    if args.run is not None:
        draw_inspect_pictures(args.run, args.out, probe_episodes=args.probe_episodes)
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        run = Path(scratch) / "quickstart"
        _train_quickstart(run, args.set)
        draw_inspect_pictures(run, args.out, probe_episodes=args.probe_episodes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
