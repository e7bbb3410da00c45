"""The scripts under ``results/`` that draw or summarise the committed studies still run
against the library, and still give what the committed files say they gave.

Each script is loaded from its file and its main function run in this process on a committed
study (or a copy of one in a temporary folder), so a change in ``txrl`` that breaks a script
breaks a test here.
"""

from __future__ import annotations

import csv
import filecmp
import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path
from types import ModuleType

import gymnasium as gym
import numpy as np
import pytest
import yaml
from stable_baselines3.common.env_util import make_vec_env

import txrl.envs  # noqa: F401 - registers the tasks
from txrl import MemoryPPO

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
DIAGNOSTICS = "minigrid_memory_s9/archive/diagnostics"
#: A small committed study: two runs of ``txrl compare`` with their summaries.
SMALL_STUDY = RESULTS / "minigrid_memory_s9" / "archive" / "screen_memory64"
S9 = "txrl/MiniGrid-MemoryS9-v0"
MOVES = ["left", "right", "forward"]


def load(script: str) -> ModuleType:
    """The script ``results/<script>`` as a module; its folder goes on ``sys.path`` first, as
    when it is run as ``python results/<script>`` (the diagnostics import each other)."""
    path = RESULTS / script
    name = "results_script_" + re.sub(r"\W", "_", script.removesuffix(".py"))
    if name in sys.modules:
        return sys.modules[name]
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def test_every_script_under_results_is_loaded_by_a_test_here() -> None:
    """A script added to ``results/`` gets a test in this file that loads it."""
    text = Path(__file__).read_text().replace("{DIAGNOSTICS}", DIAGNOSTICS)
    loaded = set(re.findall(r'load\(f?"([\w./-]+\.py)"\)', text))
    scripts = {p.relative_to(RESULTS).as_posix() for p in RESULTS.rglob("*.py")}
    assert len(scripts) >= 12 and sorted(scripts - loaded) == []


# ---------------------------------------------------------------------------- collect_study.py
# and plot_runs.py


def _copy_study(tmp_path: Path) -> Path:
    """A ``txrl compare --out`` folder: the small study, plus what a run leaves that is not
    to be kept (a checkpoint, TensorBoard events)."""
    study = tmp_path / "study"
    shutil.copytree(SMALL_STUDY, study, ignore=shutil.ignore_patterns("per_run"))
    for run in study.glob("runs/*/seed_*"):
        (run / "model.zip").write_bytes(b"checkpoint")
        (run / "tb").mkdir()
        (run / "tb" / "events.out.tfevents.0").write_bytes(b"events")
    return study


def test_collect_study_copies_the_study_and_draws_its_runs(tmp_path: Path) -> None:
    collect = load("collect_study.py")
    study, dest = _copy_study(tmp_path), tmp_path / "results" / "copy"
    collect.main([str(study), str(dest)])

    for name in collect.SUMMARY_FILES:
        assert (dest / name).exists() == (study / name).exists(), name
        if (study / name).exists():
            assert filecmp.cmp(study / name, dest / name, shallow=False), name
    runs = sorted(p.relative_to(study) for p in study.glob("runs/*/seed_*"))
    assert runs and sorted(p.relative_to(dest) for p in dest.glob("runs/*/seed_*")) == runs
    for run in runs:
        kept = sorted(p.name for p in (dest / run).iterdir())
        assert kept == sorted(n for n in collect.RUN_FILES if (study / run / n).exists())
        assert "model.zip" not in kept and "tb" not in kept
    # per_run/: plot_runs.py's table of the copies, as committed beside the study
    assert (dest / "per_run" / "curves.png").stat().st_size > 0
    assert (dest / "per_run" / "summary.md").read_text() == (
        SMALL_STUDY / "per_run" / "summary.md"
    ).read_text()


def test_collect_study_adds_later_runs_beside_the_collected_ones(tmp_path: Path) -> None:
    """Seeds run later into a fresh --out folder join the committed ones: the tables and
    per_run summary are drawn again from every run, not copied from the later folder."""
    collect = load("collect_study.py")
    study, dest = _copy_study(tmp_path), tmp_path / "results" / "copy"
    _first, later = sorted(study.glob("runs/*/seed_*"))
    held_back = tmp_path / "held_back"
    shutil.move(later, held_back)
    (study / "runs.csv").write_text("a table of the first run only\n")
    collect.main([str(study), str(dest)])
    assert len(list(dest.glob("runs/*/seed_*"))) == 1

    fresh = tmp_path / "fresh"  # the later seed, run into a folder of its own
    (fresh / later.relative_to(study)).parent.mkdir(parents=True)
    shutil.move(held_back, fresh / later.relative_to(study))
    shutil.copy(study / "compare.yaml", fresh / "compare.yaml")
    (fresh / "runs.csv").write_text("a table of the later run only\n")
    collect.main([str(fresh), str(dest)])

    assert (dest / "runs.csv").read_text() == (SMALL_STUDY / "runs.csv").read_text()
    assert (dest / "per_run" / "summary.md").read_text() == (
        SMALL_STUDY / "per_run" / "summary.md"
    ).read_text()


@pytest.mark.slow  # trains one tiny run, paused, then to its end in a fresh folder
def test_collect_study_carries_an_unfinished_run_to_a_fresh_folder(tmp_path: Path) -> None:
    """--resume-points keeps the newest checkpoint of a paused run in the record (and none
    once it finishes); --restore puts it into a new --out folder, where compare resumes it
    from that step, as on a machine whose runs/ did not survive."""
    from txrl.compare import compare, parse_only
    from txrl.config import load_compare_config

    collect = load("collect_study.py")
    config = load_compare_config(ROOT / "configs" / "compare_tiny.yaml")
    one_run = parse_only(["memory=lstm", "seed=0"])
    first, record, fresh = tmp_path / "first", tmp_path / "record", tmp_path / "fresh"
    compare(config, first, workers=1, only=one_run, until=40, echo=lambda _: None)
    collect.main([str(first), str(record), "--resume-points"])
    kept = record / "runs" / "lstm" / "seed_0" / "checkpoints"
    assert [p.name for p in kept.iterdir()] == ["step_000000064.zip"]
    shutil.rmtree(first)

    collect.main(["--restore", str(record), str(fresh)])
    run_dir = fresh / "runs" / "lstm" / "seed_0"
    assert [p.name for p in (run_dir / "checkpoints").iterdir()] == ["step_000000064.zip"]
    collect.main(["--restore", str(record), str(fresh)])  # a second restore changes nothing
    lines: list[str] = []
    compare(config, fresh, workers=1, only=one_run, echo=lines.append)
    assert "0 finished (skipped), 1 to resume" in lines[0]
    steps = [json.loads(line)["timesteps"] for line in (run_dir / "eval.jsonl").open()]
    assert steps[-1] == 128 and steps == sorted(steps) and 64 in steps

    collect.main([str(fresh), str(record)])
    assert not kept.exists() and (kept.parent / "finished.json").exists()
    resumes = (kept.parent / "resumes.jsonl").read_text().splitlines()
    assert [json.loads(line)["from"] for line in resumes] == [64]  # the record says so


def test_collect_study_marks_only_runs_that_reached_their_budget(tmp_path: Path) -> None:
    collect = load("collect_study.py")
    record = tmp_path / "record"
    shutil.copytree(SMALL_STUDY, record)
    for mark in record.glob("runs/*/seed_*/finished.json"):
        mark.unlink()
    cut, whole = sorted(record.glob("runs/*/seed_*"))
    log = cut / "eval.jsonl"
    log.write_text(log.read_text().splitlines(keepends=True)[0])  # stopped after one

    assert collect.mark_finished(record) == [whole]
    written = json.loads((whole / "finished.json").read_text())
    last = json.loads((whole / "eval.jsonl").read_text().splitlines()[-1])
    assert written["timesteps"] == last["timesteps"] and "collect_study.py" in written["from"]
    assert not (cut / "finished.json").exists()
    assert collect.mark_finished(record) == []  # a marked run is left as it is


def test_collect_study_without_a_destination_says_what_is_missing(tmp_path: Path) -> None:
    collect = load("collect_study.py")
    with pytest.raises(SystemExit):
        collect.main([str(tmp_path)])


def test_plot_runs_reproduces_the_committed_summary(tmp_path: Path) -> None:
    plot = load("plot_runs.py")
    logs = RESULTS / "minigrid_memory_s9" / "archive" / "logs"
    runs = sorted(logs.glob("s9-*")) + sorted(logs.glob("tune3-*"))
    plot.main([*map(str, runs), "--out", str(tmp_path)])
    assert (tmp_path / "summary.md").read_text() == (logs / "summary.md").read_text()
    assert (tmp_path / "curves.png").stat().st_size > 0
    with pytest.raises(FileNotFoundError, match=r"no eval\.jsonl"):
        plot.read_evals(tmp_path)


# ---------------------------------------------------------------------------- tb_scalars.py


def test_tb_scalars_exports_resumed_runs_thinned(tmp_path: Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    tb_scalars = load("tb_scalars.py")
    run = tmp_path / "variant" / "seed_0"
    for part, steps in enumerate((range(0, 6), range(4, 10))):  # a resumed run: two files
        writer = SummaryWriter(str(run / "tb" / f"part_{part}"))
        for step in steps:
            writer.add_scalar("train/loss", 100 * part + step, step)
        writer.close()
    out = tmp_path / "scalars.csv"
    tb_scalars.main([str(run), "--out", str(out), "--tags", "train/loss", "--every", "4"])
    rows = list(csv.DictReader(out.open()))
    assert [(r["run"], r["tag"]) for r in rows] == [("seed_0", "train/loss")] * 4
    # steps 0, 4, 8 and the last; from step 4 on the later file's values
    assert [(int(r["step"]), float(r["value"])) for r in rows] == [
        (0, 0.0),
        (4, 104.0),
        (8, 108.0),
        (9, 109.0),
    ]
    tb_scalars.main([str(run), "--out", str(out), "--tags", "train/loss", "--qualify"])
    assert next(csv.DictReader(out.open()))["run"] == "variant/seed_0"
    with pytest.raises(KeyError, match="no scalars logged under rollout/ep_rew_mean"):
        tb_scalars.read_scalars(run, ["rollout/ep_rew_mean"])
    with pytest.raises(FileNotFoundError, match="no tb/ event files"):
        tb_scalars.read_scalars(tmp_path, ["train/loss"])
    with pytest.raises(SystemExit):
        tb_scalars.main([str(run), "--out", str(out), "--tags", "train/loss", "--every", "0"])


# ---------------------------------------------------------------------------- gates/


#: The memories of results/gates/minigrid/README.md's table, by their labels in compare.yaml.
GATE_NAMES = {
    "Highway gate": "highway",
    "LSTM (txrl)": "lstm",
    "GRU (txrl RNN)": "gru_rnn",
    "TrXL-I": "trxl_i",
    "Input gate": "input",
    "GRU gate (b_g = 2)": "gru",
    "Output gate": "output",
    "SigTanh gate": "sigtanh",
    "TrXL (no gate)": "trxl",
}


def _markdown_rows(text: str, header_start: str) -> list[list[str]]:
    """The cells of the rows of the first Markdown table whose header starts so."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_stability_gives_the_table_the_minigrid_readme_cites(
    capsys: pytest.CaptureFixture[str],
) -> None:
    stability = load("gates/stability.py")
    study = RESULTS / "gates" / "minigrid"
    stability.main([str(study)])
    printed = capsys.readouterr().out
    per_run = _markdown_rows(printed, "| memory | seed |")
    per_memory = {r[0]: r for r in _markdown_rows(printed, "| memory | seeds reaching")}
    readme = _markdown_rows((study / "README.md").read_text(), "| memory | final success")
    assert sorted(GATE_NAMES) == sorted(r[0] for r in readme)
    for row in readme:
        label = GATE_NAMES[row[0]]
        firsts = [r[2] for r in per_run if r[0] == label]  # seeds in the config's order
        finals = [r[5] for r in per_run if r[0] == label]
        assert ", ".join(firsts) == row[4], row[0]
        assert ", ".join(finals) == row[1], row[0]
        below, lowest = per_memory[label][2].split(" ")[0], per_memory[label][3]
        assert row[5].replace("**", "") == f"{below} ({lowest})", row[0]


def test_stability_counts_evaluations_after_the_first_at_threshold() -> None:
    stability = load("gates/stability.py")
    values = [(25_000, 0.2), (50_000, 0.95), (75_000, 0.5), (100_000, 0.91)]
    assert stability.after_first(values, 0.9) == (50_000, [0.5, 0.91])
    assert stability.run_row(values, 0.9) == ("50k", "0.50", "1/2", "0.91")
    assert stability.run_row(values[:1], 0.9) == ("never", "–", "–", "0.20")


@pytest.mark.slow  # 2000 bootstrap resamples per interval, as the committed file was made
def test_all_tasks_reproduces_the_committed_four_task_ranking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    all_tasks = load("gates/all_tasks.py")
    gates = RESULTS / "gates"
    out = tmp_path / "all_tasks_4.md"
    all_tasks.main(
        [
            f"tmaze_long={gates}",
            f"minigrid_s9={gates / 'minigrid'}",
            str(gates / "popgym"),
            "--out",
            str(out),
        ]
    )
    assert out.read_bytes() == (gates / "all_tasks_4.md").read_bytes()
    assert capsys.readouterr().out.strip() == out.read_text().strip()


def test_all_tasks_needs_three_memories_on_every_task(tmp_path: Path) -> None:
    all_tasks = load("gates/all_tasks.py")
    study = tmp_path / "two"
    study.mkdir()
    shutil.copy(RESULTS / "gates" / "compare.yaml", study / "compare.yaml")
    with (RESULTS / "gates" / "runs.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    with (study / "runs.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(r for r in rows if r["variant"] in ("gru", "trxl"))
    with pytest.raises(SystemExit, match="need >= 3 memories finished on every task"):
        all_tasks.main([f"t={study}", "--out", str(tmp_path / "out.md"), "--reps", "10"])
    assert not (tmp_path / "out.md").exists()


# ---------------------------------------------------------------------------- vmpo_defaults/


def test_vmpo_defaults_probe_prints_one_line_an_evaluation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    probe = load("vmpo_defaults/probe.py")
    small = {"d_model": 16, "n_layers": 1, "n_heads": 2, "memory_length": 8}
    overrides = {
        "env": {"length": 2},
        "budget": 128,
        "every": 64,
        "n_steps": 8,
        "segment_length": 8,
    }
    probe.main([json.dumps(overrides | {"batch_size": 32, "policy_kwargs": small})])
    lines = capsys.readouterr().out.strip().splitlines()
    assert [int(line.split()[0]) for line in lines] == [64, 128]
    for line in lines:
        match = re.fullmatch(r"\d+ ([\d.]+) (\{.*\}) \d+ steps/s", line)
        assert match is not None, line
        assert 0.0 <= float(match.group(1)) <= 1.0
        assert set(eval(match.group(2))) == {"train/eta", "train/alpha", "train/kl"}


# ---------------------------------------------------------------------------- S9 diagnostics


@pytest.fixture(scope="module")
def s9_model() -> MemoryPPO:
    """An untrained MemoryPPO of the diagnostics' shape (one GTrXL layer) on S9's 3 moves."""
    env = make_vec_env(lambda: gym.make(S9, actions=MOVES), n_envs=1, seed=0)
    small = {"d_model": 16, "n_layers": 1, "n_heads": 2, "memory_length": 8, "gate": "gru"}
    return MemoryPPO(
        "MlpGTrXLPolicy", env, n_steps=8, batch_size=8, segment_length=8, policy_kwargs=small
    )


def test_cue_gap_prints_a_line_per_forward_probability(
    capsys: pytest.CaptureFixture[str],
) -> None:
    cue_gap = load(f"{DIAGNOSTICS}/cue_gap.py")
    cue_gap.main(episodes=4)
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "P(forward) 0.33",
        "P(forward) 0.50",
        "P(forward) 0.70",
        "P(forward) 0.90",
    ]


def test_start_in_view_starts_with_the_object_in_view() -> None:
    start_in_view = load(f"{DIAGNOSTICS}/start_in_view.py")
    cue_gap = load(f"{DIAGNOSTICS}/cue_gap.py")
    env = start_in_view.make()
    for seed in range(3):
        obs, _ = env.reset(seed=seed)
        grid = env.unwrapped
        assert tuple(grid.agent_pos) == (1, grid.height // 2)
        assert cue_gap.cue_wrapper(env)._cue_in_view(grid.gen_obs())
        assert obs.shape == env.observation_space.shape


def test_start_in_view_screen_prints_its_run_as_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    screen = load(f"{DIAGNOSTICS}/start_in_view_screen.py")
    screen.main(
        [
            "--seed",
            "3",
            "--n-envs",
            "2",
            "--batch",
            "128",
            "--epochs",
            "1",
            "--d-model",
            "16",
            "--budget",
            "256",
            "--every",
            "256",
            "--tag",
            "tiny",
        ]
    )
    line = json.loads(capsys.readouterr().out)
    assert line["tag"] == "tiny" and line["seed"] == 3
    assert [steps for steps, _ in line["curve"]] == [256]
    assert 0.0 <= line["curve"][0][1] <= 1.0
    assert line["solved_at"] in (None, 256)


def test_success_by_start_cell_plays_from_the_cell_asked(s9_model: MemoryPPO) -> None:
    by_cell = load(f"{DIAGNOSTICS}/success_by_start_cell.py")
    env = gym.make(S9, actions=MOVES, max_steps=12)
    rate = by_cell.success_from(s9_model, env, start_x=3, episodes=2)
    assert rate in (0.0, 0.5, 1.0)
    assert env.unwrapped.step_count <= 12


def test_decision_probe_reads_a_separable_label_and_not_noise() -> None:
    decision_probe = load(f"{DIAGNOSTICS}/decision_probe.py")
    rng = np.random.default_rng(0)
    labels = np.arange(100) % 2 == 0
    features = rng.normal(size=(100, 4))
    features[:, 0] += 4 * labels
    assert decision_probe.probe_accuracy(features, labels) > 0.9
    noise = rng.normal(size=(100, 4))
    assert decision_probe.probe_accuracy(noise, labels) < 0.75


def test_attention_probe_plays_an_episode_and_counts_moves(s9_model: MemoryPPO) -> None:
    attention_probe = load(f"{DIAGNOSTICS}/attention_probe.py")
    counts = attention_probe.move_counts("LLFR")
    assert counts[:3].tolist() == [2, 1, 1]  # L, R, F
    assert counts[3:].sum() == 3 and counts[3 + 0] == 1  # LL, LF, FR
    env = gym.make(S9, actions=MOVES, max_steps=12)
    episode = attention_probe.play(
        s9_model.policy.eval(), env, seed=0, rng=np.random.default_rng(0)
    )
    steps = len(episode["actions"])
    assert 1 <= steps <= 12 and len(episode["images"]) == len(episode["visible"]) == steps
    assert episode["visible"][0]  # it starts at x = 1, the object in view
    features, weights, out = attention_probe.attention_of(s9_model.policy, episode["images"])
    assert features.shape[0] == out.shape[0] == steps
    assert weights.shape == (2, steps, steps)  # (H, T, T): heads, queries, the episode's keys


# ---------------------------------------------------------------------------- reach/curve.py
# and reach/transfer.py


def _reach_run(
    folder: Path,
    span: int,
    memory: str,
    seed: int,
    budget: int,
    evals: list[tuple[int, float]],
    min_length: int | None = None,
) -> None:
    study = f"span_{span}" if min_length is None else f"tmaze_{span}"
    run_dir = folder / study / "runs" / memory / f"seed_{seed}"
    run_dir.mkdir(parents=True)
    kwargs = {"length": span} if min_length is None else {"length": span, "min_length": min_length}
    (run_dir / "config.yaml").write_text(
        yaml.safe_dump({"budget": budget, "env": {"kwargs": kwargs}})
    )
    lines = [
        json.dumps({"timesteps": t, "success_rate": s, "wall_time_s": 60.0 * (i + 1)})
        for i, (t, s) in enumerate(evals)
    ]
    (run_dir / "eval.jsonl").write_text("\n".join(lines) + "\n")


def test_reach_curve_reads_each_run_and_writes_its_table_and_plot(tmp_path: Path) -> None:
    curve = load("reach/curve.py")
    studies = tmp_path / "reach"
    _reach_run(studies, 100, "gtrxl", 0, 1000, [(0, 0.5), (400, 0.95), (600, 1.0)])
    _reach_run(studies, 100, "lstm", 0, 1000, [(0, 0.5), (1000, 0.44)])
    _reach_run(studies, 1000, "gtrxl", 0, 5000, [(0, 0.0), (2000, 0.53)])
    _reach_run(studies, 1000, "gtrxl", 1, 5000, [(0, 0.0), (800, 1.0)], min_length=100)
    out = tmp_path / "out"
    assert curve.main([str(studies), "--out", str(out)]) == 0
    runs = {(r.span, r.memory): r for r in curve.read_runs(studies)}
    assert runs[(100, "gtrxl")].steps_to_threshold == 400
    assert runs[(100, "gtrxl")].finished and runs[(100, "lstm")].finished
    assert runs[(100, "lstm")].steps_to_threshold is None and runs[(100, "lstm")].best == 0.5
    assert not runs[(1000, "gtrxl")].finished
    # a recipe's run, trained on corridors from 100 cells, is a line apart from the span's own
    recipe = runs[(1000, "gtrxl, trained from 100 cells")]
    assert recipe.seed == 1 and recipe.steps_to_threshold == 800 and recipe.finished
    table = (out / "reach.md").read_text()
    assert "| 100 | gtrxl | 0 | 1.00 | 1.00 | 400 |" in table
    assert "| 1000 | gtrxl | 0 | 0.53 (unfinished) |" in table
    assert "never" in table
    assert "| 1000 | gtrxl, trained from 100 cells | 1 | 1.00 | 1.00 | 800 |" in table
    assert (out / "reach.png").stat().st_size > 0
    assert len((out / "reach.csv").read_text().splitlines()) == 5


def test_transfer_plays_a_checkpoint_at_other_spans(tmp_path: Path) -> None:
    """``results/reach/transfer.py`` plays the run's agent at each span asked for."""
    from tests._runs import train_tiny

    transfer = load("reach/transfer.py")
    run_dir = train_tiny(tmp_path)
    out = tmp_path / "transfer.json"
    checkpoint = run_dir / "checkpoints" / "final.zip"
    assert (
        transfer.main([str(checkpoint), "--spans", "3,5", "--episodes", "4", "--out", str(out)])
        == 0
    )
    rows = json.loads(out.read_text())["rows"]
    assert [r["span"] for r in rows] == [3, 5]
    assert all(r["episodes"] == 4 and 0.0 <= r["success_rate"] <= 1.0 for r in rows)
    assert rows[1]["mean_length"] >= 6  # a corridor of 5 cells takes at least 6 steps


def test_reach_curve_draws_the_backbones_study_and_its_cost_beside_it(tmp_path: Path) -> None:
    """A backbone of ``backbones/span_*`` is a line of its own, trained from short corridors;
    the screen is not drawn; with a cost table, a second row of panels draws each
    backbone's training wall-clock and RAM per env against the span."""
    curve = load("reach/curve.py")
    studies = tmp_path / "reach"
    _reach_run(studies, 1000, "gtrxl", 400, 5000, [(0, 0.5), (800, 1.0)], min_length=100)
    for study, seed, success in (("span_1000", 730, 0.56), ("screen_1000", 720, 1.0)):
        run_dir = studies / "backbones" / study / "runs" / "linear" / f"seed_{seed}"
        run_dir.mkdir(parents=True)
        kwargs = {"length": 1000, "min_length": 100}
        (run_dir / "config.yaml").write_text(
            yaml.safe_dump({"budget": 5000, "env": {"kwargs": kwargs}})
        )
        entry = {"timesteps": 5000, "success_rate": success, "wall_time_s": 60.0}
        (run_dir / "eval.jsonl").write_text(json.dumps(entry) + "\n")
    cost = tmp_path / "cost.txt"
    cost.write_text(
        "a header line\n"
        "  backbone  span train_s/100k RAM_MiB/env\n"
        "     gtrxl  1000     41.1        1.28\n"
        "     gtrxl  3000     77.8        3.79\n"
        "    linear  1000     16.0        0.28\n"
        "\n"
        "a closing line\n"
    )
    costs = curve.read_costs(cost)
    assert [(c.backbone, c.span) for c in costs] == [("gtrxl", 1000), ("gtrxl", 3000),
                                                     ("linear", 1000)]  # fmt: skip
    assert costs[1].train_s_per_100k == 77.8 and costs[2].ram_mib_per_env == 0.28
    runs = curve.read_runs(studies)
    assert {(r.memory, r.seed) for r in runs} == {
        ("gtrxl, trained from 100 cells", 400),
        ("linear, trained from 100 cells", 730),  # the screen's seed 720 is not read
    }
    out = tmp_path / "out"
    assert curve.main([str(studies), "--out", str(out), "--cost", str(cost)]) == 0
    assert (out / "reach.png").stat().st_size > 0
    fig = curve.plot(runs, tmp_path / "reach.png", costs)
    success_ax, _, time_ax, ram_ax = fig.axes
    assert [line.get_label() for line in time_ax.lines] == ["gtrxl", "linear"]
    assert list(ram_ax.lines[0].get_ydata()) == [1.28, 3.79]
    assert list(time_ax.lines[0].get_ydata()) == pytest.approx([41.1 / 60, 77.8 / 60])
    # one colour per backbone in every panel
    colour = {line.get_label(): line.get_color() for line in success_ax.lines}
    assert time_ax.lines[1].get_color() == colour["linear, trained from 100 cells"]
    # without a cost table, or with --no-cost, the first row alone
    assert len(curve.plot(runs, tmp_path / "reach.png").axes) == 2
    assert curve.main([str(studies), "--out", str(out), "--no-cost"]) == 0


def test_the_committed_cost_table_holds_every_backbone_at_every_span() -> None:
    """``bench/results/reach_cost_backbones_cpu.txt`` reads back as ``curve.py`` reads it."""
    curve = load("reach/curve.py")
    costs = curve.read_costs(curve.COST_TABLE)
    backbones = {"gtrxl", "compressive", "adaptive_span", "linear", "performer", "sparse_fixed"}
    assert {(c.backbone, c.span) for c in costs} == {
        (b, s) for b in backbones for s in (1000, 3000, 10000)
    }
    assert all(c.train_s_per_100k > 0 and c.ram_mib_per_env > 0 for c in costs)


#: the judged grids' backbones whose settings the second screen changed, and its variant
ADOPTED = {"adaptive_span": "adaptive_span_free"}


def test_the_backbones_judged_grids_take_the_screens_settings_scaled_with_the_span() -> None:
    """``reach/backbones/span_*`` train each backbone of the screen at the screen's settings,
    its memory sizes multiplied as the corridor is, on seeds apart from the screen's; where
    the second screen found a setting that learns (``ADOPTED``), at that setting."""
    from txrl.config import load_compare_config

    folder = RESULTS / "reach" / "backbones"
    screen_config = load_compare_config(folder / "screen_1000" / "compare.yaml")
    screen = {v.name: v.config for v in screen_config.variants()}
    second = load_compare_config(folder / "screen_1000_round2" / "compare.yaml")
    assert screen_config.seeds == second.seeds == (720,)
    adopted = {v.name: v.config for v in second.variants() if v.name in ADOPTED.values()}
    screen.update({backbone: adopted[name] for backbone, name in ADOPTED.items()})
    sizes = ("memory_length", "compressed_length")
    for span in (1000, 3000, 10000):
        judged = load_compare_config(folder / f"span_{span}" / "compare.yaml")
        assert judged.seeds == (730, 731, 732)
        variants = {v.name: v.config for v in judged.variants()}
        assert set(screen) <= set(variants)
        for name, config in screen.items():
            mine = variants[name]
            assert mine.env.kwargs == {**config.env.kwargs, "length": span}
            assert mine.learner_settings == config.learner_settings
            given, expected = mine.policy.backbone_settings(), config.policy.backbone_settings()
            for key in sizes:
                if key in expected:
                    expected[key] = expected[key] * span // 1000
            assert given == expected, name
            assert (mine.policy.backbone, mine.policy.gate) == (
                config.policy.backbone, config.policy.gate
            )  # fmt: skip


def test_the_10000_cell_recipe_is_the_judged_grids_compressive_run_at_half_the_budget() -> None:
    """``configs/tmaze_10000.yaml`` is judged by the compressive runs of ``span_10000``: the
    two must train the same agent, budget aside, and with a constant step size (no ``lin_``
    schedule) the budget cannot change a run's first 3M steps."""
    from txrl.config import load_compare_config, load_train_config

    recipe = load_train_config(ROOT / "configs" / "tmaze_10000.yaml")
    judged = load_compare_config(RESULTS / "reach" / "backbones" / "span_10000" / "compare.yaml")
    grid = next(v.config for v in judged.variants() if v.name == "compressive")
    assert (recipe.budget, grid.budget) == (3_000_000, 6_000_000)
    assert isinstance(recipe.learner_settings.learning_rate, float)
    same = {"budget", "name", "seed"}
    mine = {k: v for k, v in recipe.to_dict().items() if k not in same}
    theirs = {k: v for k, v in grid.to_dict().items() if k not in same}
    assert mine == theirs


# ---------------------------------------------------------------------------- stability/
# (tests/test_stability_study.py runs it on run directories made for it)


def test_stability_summary_measures_a_drop_from_the_best_before_it() -> None:
    summarize = load("stability/summarize.py")
    drop = summarize.largest_drop([(0, 0.2), (100, 1.0), (200, 0.4), (300, 0.9)])
    assert (drop.peak_step, drop.low_step, round(drop.size, 3)) == (100, 200, 0.6)


def test_deck_probe_reproduces_the_committed_table(tmp_path: Path) -> None:
    """The table the stability README cites, drawn again from its judgements; the training
    mix's shares are those of the env's own deck draw."""
    probe = load("stability/deck_probe.py")
    folder = tmp_path / "deck_probe"
    shutil.copytree(RESULTS / "stability" / "deck_probe", folder)
    (folder / "deck_probe.md").unlink()
    probe.main([str(folder)])
    committed = RESULTS / "stability" / "deck_probe" / "deck_probe.md"
    assert (folder / "deck_probe.md").read_bytes() == committed.read_bytes()

    from envs._validation import log_uniform_int

    rng = np.random.default_rng(0)
    drawn = np.array([log_uniform_int(rng, 1, 16) for _ in range(40_000)])
    for k in (1, 8, 13, 16):
        assert abs((drawn == k).mean() - probe.deck_share(k, 1, 16)) < 0.006, k


# ---------------------------------------------------------------------------- popgym_recall


def test_popgym_recall_summary_reproduces_the_committed_table(tmp_path: Path) -> None:
    summary = load("popgym_recall/summary.py")
    out = tmp_path / "summary.md"
    summary.main(["--out", str(out)])
    assert out.read_bytes() == (RESULTS / "popgym_recall" / "summary.md").read_bytes()


def test_popgym_recall_summary_labels_an_unfinished_run_and_a_missing_judge(
    tmp_path: Path,
) -> None:
    summary = load("popgym_recall/summary.py")
    task = tmp_path / "repeat_first_medium"
    run = task / "runs" / "gtrxl" / "seed_7"
    run.mkdir(parents=True)
    shutil.copy(RESULTS / "popgym_recall" / "repeat_first_medium" / "compare.yaml", task)
    (run / "eval.jsonl").write_text(
        '{"timesteps": 0, "mean_return": -0.5, "wall_time_s": 1.0}\n'
        '{"timesteps": 300000, "mean_return": 0.25, "wall_time_s": 600.0}\n'
    )
    (task / "training_scalars.csv").write_text(
        "run,tag,step,value\ngtrxl/seed_7,rollout/ep_rew_mean,1000,-0.4\n"
        "gtrxl/seed_7,rollout/ep_rew_mean,2000,0.1\ngtrxl/seed_7,train/x,2000,9.0\n"
    )
    out = tmp_path / "summary.md"
    summary.main(["--root", str(tmp_path), "--out", str(out)])
    row = out.read_text().splitlines()[-1]
    assert (
        "| RepeatFirstMedium | gtrxl | 7 | 0.250 (32 episodes), unfinished at 0.30M | 0.100 |"
        in row
    )
    assert "| 10 min |" in row and "1.000 / 1.000 (GRU)" in row


def test_popgym_recall_summary_gives_a_mixed_length_study_its_best_greedy_evaluation(
    tmp_path: Path,
) -> None:
    """Trained on 1-16 decks, a run's training returns are not RepeatFirstHard's: its MMER
    column is the best greedy evaluation on the task, and says so."""
    summary = load("popgym_recall/summary.py")
    task = tmp_path / "repeat_first_hard_decks"
    run = task / "runs" / "gtrxl" / "seed_530"
    run.mkdir(parents=True)
    shutil.copy(RESULTS / "popgym_recall" / "repeat_first_hard_decks" / "compare.yaml", task)
    (run / "eval.jsonl").write_text(
        '{"timesteps": 0, "mean_return": -0.5, "wall_time_s": 1.0}\n'
        '{"timesteps": 100000, "mean_return": 0.75, "wall_time_s": 60.0}\n'
        '{"timesteps": 200000, "mean_return": 0.5, "wall_time_s": 120.0}\n'
    )
    (task / "training_scalars.csv").write_text(
        "run,tag,step,value\ngtrxl/seed_530,rollout/ep_rew_mean,1000,0.9\n"
    )
    out = tmp_path / "summary.md"
    summary.main(["--root", str(tmp_path), "--out", str(out)])
    row = out.read_text().splitlines()[-1]
    assert "| RepeatFirstHard, trained on 1-16 decks | gtrxl | 530 |" in row
    assert "| 0.750 (greedy) |" in row and "0.940 / 0.969 (IndRNN)" in row


def test_count_answers_scores_every_answer_of_whole_episodes(tmp_path: Path) -> None:
    """``results/popgym_recall/count_answers.py`` reads each right count off the observations;
    the script checks each against the env's reward, so a misread count fails here."""
    from tests._runs import train_tiny

    answers = load("popgym_recall/count_answers.py")
    run_dir = train_tiny(
        tmp_path, env={"id": "txrl/popgym-CountRecallEasy-v0", "n_envs": 2}, budget=64
    )
    data = answers.play(run_dir, 3)
    assert len(data["step"]) == 3 * 51  # three whole episodes of 51 answers
    assert sorted(set(data["step"].tolist())) == list(range(51))
    assert ((data["count"] >= 0) & (data["count"] <= data["step"] + 1)).all()
    # the card just dealt is part of the count when it has the queried colour
    assert (data["count"][data["queried_now"]] >= 1).all()
    out = tmp_path / "answers.md"
    answers.main([str(run_dir), "--episodes", "2", "--out", str(out)])
    assert "102 answers" in out.read_text()


def test_collect_study_keeps_the_declared_study_file(tmp_path: Path) -> None:
    collect = load("collect_study.py")
    study, dest = _copy_study(tmp_path), tmp_path / "results" / "copy"
    dest.mkdir(parents=True)
    declared = "# why each setting is what it is\n" + (study / "compare.yaml").read_text()
    (dest / "compare.yaml").write_text(declared)
    collect.main([str(study), str(dest)])
    assert (dest / "compare.yaml").read_text() == declared

    (dest / "compare.yaml").write_text(declared.replace("seeds:", "seeds:\n- 999999", 1))
    with pytest.raises(SystemExit, match="other settings than the declared"):
        collect.main([str(study), str(dest)])


def test_baselines_summary_gives_the_committed_summary(tmp_path: Path) -> None:
    summary = load("baselines/summary.py")
    out = tmp_path / "summary.md"
    summary.main(["--out", str(out)])
    assert out.read_bytes() == (RESULTS / "baselines" / "summary.md").read_bytes()


def test_baselines_summary_says_where_each_run_stands_and_the_transformers_lead(
    tmp_path: Path,
) -> None:
    summary = load("baselines/summary.py")
    study = tmp_path / "compare_tmaze_1000"
    study.mkdir()
    shutil.copy(RESULTS / "baselines" / "compare_tmaze_1000" / "compare.yaml", study)
    runs = study / "runs"
    judged = runs / "lstm" / "seed_401"
    judged.mkdir(parents=True)
    (judged / "eval_100_episodes.json").write_text(
        json.dumps({"success_rate": 0.25, "success_ci95": [0.17, 0.34], "mean_return": 0.1})
    )
    finished = runs / "gru" / "seed_400"
    finished.mkdir(parents=True)
    (finished / "finished.json").write_text("{}")
    running = runs / "ffm" / "seed_400"
    running.mkdir(parents=True)
    (running / "eval.jsonl").write_text(
        '{"timesteps": 300000, "episodes": 32, "success_rate": 0.5, "mean_return": 0.4}\n'
    )
    text = summary.summarise(tmp_path)
    rows = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith("| ")}
    lstm = rows["| lstm"].split(" | ")
    assert lstm[1] == "LSTM 256, BPTT 1,024, step size 0.0005, entropy 0.001"
    assert lstm[2:5] == ["not run", "0.25 [0.17, 0.34]", "not run"]
    assert lstm[5] == "+0.75 |"  # the GTrXL's committed 1.00 on seed 401, less 0.25
    assert rows["| gru"].split(" | ")[2] == "finished, not judged"
    ffm = rows["| ffm"].split(" | ")
    assert "trace horizon 4,096" in ffm[1]
    assert ffm[2] == "unfinished: 0.50 at 0.30M (32 episodes)"
    assert rows["| recurrent_ppo"].split(" | ")[1].startswith("RecurrentPPO LSTM 256, BPTT 1,024")
    assert "compare_tmaze_3000" not in text  # only the folders present are summarised
