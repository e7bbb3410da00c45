"""Every result the README and the docs quote can be traced to a file of the repository.

Two checks over README.md, ``docs/benchmarks.md`` and the results pages ``docs/results/``:

* every path they name under ``results/``, ``configs/``, ``bench/`` or ``docs/`` exists;
* every measured number they quote (a decimal such as ``0.59`` or ``-0.46``, or a step count
  such as ``750k`` or ``1.26M``) appears in a file that the same paragraph or table row
  cites: literally, or as the rounding of a more precise number there (``0.593`` backs
  ``0.59``; an ``eval.jsonl`` step of ``800768`` backs ``0.8M`` but not ``750k``). A table
  row may also lean on the citations of the paragraph just before its table. A cited study
  folder stands for its Markdown summaries; its data files (CSV, run logs) must be cited by
  their own path, or through a ``runs/`` folder. Integers
  (seeds, episode counts, equation numbers) and numbers in code are not checked.

A paragraph may cite a file as it was at a commit, ``git show REV:PATH``, for a printout
that the repository no longer holds at its head (this needs the repository's history).
``docs/results/published.md`` transcribes published figures from outside the repository
and is its own source.
"""

from __future__ import annotations

import functools
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

#: The pages whose numbers are checked against the files they cite.
CHECKED = ("README.md", "docs/benchmarks.md", "docs/results/*.md")
#: Transcribed from sources outside the repository (it cites them), so it is the file the
#: other pages cite for a published figure.
SOURCES_OUTSIDE = ("docs/results/published.md",)

#: A path as the pages write it: starts at one of these folders and runs to the first
#: character that cannot be in one of this repository's paths (a backtick, a space, ...).
PATH = re.compile(r"(?<![\w./:-])((?:results|configs|bench|docs)/[\w./*-]*[\w/*])")
#: A file at a commit: ``git show REV:PATH``.
GIT_PATH = re.compile(r"git show ([0-9a-f]{7,40}):([\w./-]+)")
#: A decimal or a step count; a sign only where it does not join a range (``0.18-0.42``).
NUMBER = re.compile(r"(?<![\w.])([-−]?)(\d+(?:\.\d+)?)([kM](?![A-Za-z]))?(?![\w.]*\d)")
#: Text files a cited folder contributes.
TEXT_SUFFIXES = {".md", ".csv", ".txt", ".json", ".jsonl", ".yaml", ".yml", ".py"}
#: Of those, the ones whose decimals may back a rounded figure; per-evaluation logs hold
#: so many decimals that a rounded figure would find a match by chance.
SUMMARY_SUFFIXES = {".md", ".csv", ".txt", ".json", ".py"}
UNITS = {"k": 1_000, "M": 1_000_000}


def named_paths(text: str) -> set[str]:
    """The paths ``text`` names; a ``*`` stays in (a glob), a ``<...>`` part ends the path.
    Link targets (``[text](target)``) are left to ``mkdocs build --strict``: in the docs they
    are relative to the page, not to the repository."""
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return {match.group(1) for match in PATH.finditer(text)}


def missing(text: str, root: Path) -> list[str]:
    """The paths named in ``text`` that ``root`` lacks (globs: those that match nothing)."""
    gone = []
    for path in sorted(named_paths(text)):
        found = any(root.glob(path.rstrip("/"))) if "*" in path else (root / path).exists()
        if not found:
            gone.append(path)
    return gone


@dataclass(frozen=True)
class Claim:
    """A paragraph or table row: its text and the files it cites."""

    text: str
    cited: tuple[str, ...]


def claims(markdown: str) -> list[Claim]:
    """The paragraphs and table rows of ``markdown``; fenced code, comments and headings
    left out."""
    markdown = re.sub(r"```.*?```", "", markdown, flags=re.DOTALL)
    markdown = re.sub(r"<!--.*?-->", "", markdown, flags=re.DOTALL)
    found: list[Claim] = []
    previous_paragraph = ""
    for block in re.split(r"\n\s*\n", markdown):
        # headings name what the text under them shows, and quote nothing of their own
        lines = [line for line in block.strip().splitlines() if not line.startswith("#")]
        block = "\n".join(lines)
        rows = [line for line in lines if line.lstrip().startswith("|")]
        if rows and len(rows) == len(lines):
            for row in rows:
                found.append(Claim(row, _citations(row + "\n" + previous_paragraph)))
        elif lines:
            previous_paragraph = block
            found.append(Claim(block, _citations(block)))
    return found


def _citations(text: str) -> tuple[str, ...]:
    git = [f"{rev}:{path}" for rev, path in GIT_PATH.findall(text)]
    plain = named_paths(GIT_PATH.sub("", text))
    return tuple(sorted(plain)) + tuple(git)


def quoted_numbers(text: str) -> list[str]:
    """The decimals and step counts of ``text``, outside code spans, links and paths."""
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    text = PATH.sub(" ", text)
    numbers = []
    for sign, digits, suffix in NUMBER.findall(text):
        if "." in digits or suffix:
            numbers.append(("-" if sign else "") + digits + suffix)
    return numbers


@functools.cache
def _file_text(root: Path, cited: str) -> tuple[tuple[str, str], ...]:
    """(suffix, text) of each text file ``cited`` names: a file; a study's folder, for its
    Markdown summaries (its ``README.md``, ``results.md``); a folder of run logs (a path
    through ``runs/`` or ``per_run/``), for every text file in it; a glob; or ``REV:PATH``
    (the file at that commit). Data files (CSV, logs) back a number only where they are
    cited by their own path, so a page cannot lean on thousands of logged numbers by chance."""
    if ":" in cited:
        rev, path = cited.split(":", 1)
        shown = subprocess.run(
            ["git", "show", f"{rev}:{path}"], cwd=root, capture_output=True, text=True
        )
        assert shown.returncode == 0, (
            f"{cited}: cannot read that file at that commit ({shown.stderr.strip()}); the "
            "check needs the repository's history (a full clone)"
        )
        return ((Path(path).suffix, shown.stdout),)
    paths = list(root.glob(cited.rstrip("/"))) if "*" in cited else [root / cited]
    files = []
    for path in paths:
        if path.is_file():
            files.append(path)
        elif path.is_dir() and {"runs", "per_run"} & set(path.relative_to(root).parts):
            files += [p for p in sorted(path.rglob("*")) if p.suffix in TEXT_SUFFIXES]
        elif path.is_dir():
            files += sorted(path.glob("*.md"))
    return tuple((p.suffix, p.read_text(errors="replace")) for p in files)


@functools.cache
def _corpus(root: Path, cited: tuple[str, ...]) -> tuple[str, list[float], list[float]]:
    """All text of the cited files; the decimals of their summaries; their step counts."""
    texts = [item for c in cited for item in _file_text(root, c)]
    everything = "\n".join(text for _, text in texts)
    summaries = "\n".join(text for suffix, text in texts if suffix in SUMMARY_SUFFIXES)
    decimals = [float(x.replace("−", "-")) for x in re.findall(r"[-−]?\d+\.\d+", summaries)]
    steps = [float(x.replace(",", "")) for x in re.findall(r"\d{1,3}(?:,\d{3})+|\d+", everything)]
    steps += [float(n) * UNITS[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)([kM])\b", everything)]
    return everything, decimals, [s for s in steps if s >= 1000]


def backed(number: str, root: Path, cited: tuple[str, ...]) -> bool:
    """Whether ``number`` appears in the cited files, literally or as a rounding."""
    text, decimals, steps = _corpus(root, cited)
    for written in {number, number.replace("-", "−")}:
        if re.search(rf"(?<![\d.]){re.escape(written)}(?![\d])", text):
            return True
    suffix = number[-1] if number[-1] in UNITS else ""
    digits = number.removesuffix(suffix)
    places = len(digits.split(".")[1]) if "." in digits else 0
    value = float(digits)
    if suffix:
        half = 0.5 * 10**-places * UNITS[suffix]
        return any(abs(s - value * UNITS[suffix]) <= half for s in steps)
    half = 0.5 * 10**-places + 1e-9
    return any(abs(d - value) <= half and (d < 0) == (value < 0) for d in decimals)


def unbacked(markdown: str, root: Path) -> list[str]:
    """One line per quoted number that none of its paragraph's cited files backs."""
    problems = []
    for claim in claims(markdown):
        numbers = quoted_numbers(claim.text)
        if not numbers:
            continue
        where = " ".join(claim.text.split())[:90]
        if not claim.cited:
            problems.append(f"{', '.join(numbers)} in '{where}...': it cites no file")
            continue
        for number in numbers:
            if not backed(number, root, claim.cited):
                problems.append(f"{number} in '{where}...' is in none of {', '.join(claim.cited)}")
    return problems


def _checked_pages() -> list[Path]:
    pages = [p for pattern in CHECKED for p in sorted(ROOT.glob(pattern))]
    return [p for p in pages if p.relative_to(ROOT).as_posix() not in SOURCES_OUTSIDE]


def test_every_path_the_readme_and_the_docs_name_exists() -> None:
    text = README.read_text()
    paths = named_paths(text)
    assert "configs/quickstart.yaml" in paths and any(p.startswith("results/") for p in paths)
    for page in [README, *sorted((ROOT / "docs").rglob("*.md"))]:
        assert missing(page.read_text(), ROOT) == [], page


def test_every_number_of_the_readme_and_the_results_pages_is_in_a_cited_file() -> None:
    pages = _checked_pages()
    assert README in pages and ROOT / "docs" / "benchmarks.md" in pages
    assert len(pages) >= 8  # the README, the benchmarks and the results pages
    problems = [
        f"{p.relative_to(ROOT)}: {line}" for p in pages for line in unbacked(p.read_text(), ROOT)
    ]
    assert problems == [], "\n".join(problems)


def test_a_missing_path_is_reported(tmp_path: Path) -> None:
    (tmp_path / "results" / "study").mkdir(parents=True)
    (tmp_path / "results" / "study" / "a.md").write_text("")
    text = "see `results/study/a.md`, `results/study/*.md` and `results/gone/`"
    assert missing(text, tmp_path) == ["results/gone/"]


def test_a_number_is_backed_only_by_the_files_its_paragraph_cites(tmp_path: Path) -> None:
    run = tmp_path / "results" / "study" / "runs" / "seed_3"
    run.mkdir(parents=True)
    (run / "eval.jsonl").write_text(
        '{"timesteps": 700416, "mean_return": 0.52101940625}\n'
        '{"timesteps": 800768, "mean_return": 0.5538}\n'
    )
    (tmp_path / "results" / "study" / "README.md").write_text("final 0.593 [0.499, 0.680]\n")
    (tmp_path / "results" / "other.md").write_text("-0.46 and 750k\n")
    (tmp_path / "results" / "study" / "data.csv").write_text("-0.46\n")  # not cited by path
    page = (
        "Passed 0.5 at 0.7M and 0.8M (`results/study/runs/`), ending at 0.59 [0.50, 0.68] "
        "(`results/study/`).\n\n"
        "| task | final |\n|---|---|\n| MineSweeper | 0.593 |\n\n"
        "It reached 0.5538 at 750k (`results/study/runs/seed_3/eval.jsonl`).\n\n"
        "CountRecall rose to -0.46 (`results/study/`).\n\n"
        "A table without a source.\n\n| task | final |\n|---|---|\n| CountRecall | 0.77 |\n\n"
        "An uncited 0.25.\n"
    )
    problems = unbacked(page, tmp_path)
    assert len(problems) == 4, problems
    assert problems[0].startswith("750k ") and "in none of results/study/runs/" in problems[0]
    assert problems[1].startswith("-0.46 ")  # results/other.md has it, but is not cited
    assert problems[2].startswith("0.77 ") and "cites no file" in problems[2]
    assert problems[3].startswith("0.25 ") and "cites no file" in problems[3]


def test_versions_code_and_ranges_are_read_as_written() -> None:
    text = "torch 2.13.0, `lin_5e-4`, `--set eval.stop_at=0.9`, 0.18-0.42, [-0.43, 0.29], S13Random, 1.0M"
    assert quoted_numbers(text) == ["0.18", "0.42", "-0.43", "0.29", "1.0M"]
