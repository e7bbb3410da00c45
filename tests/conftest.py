"""Suite-wide settings: the global seed and the torch thread count of every test.

Two settings let the suite be run as a different machine would run it, to show that no
test depends on one lucky seed or one summation order:

- ``TXRL_TEST_SEED`` (or ``pytest --txrl-seed N``; the option wins): the base of the global
  seed. Before each test, ``random``, ``numpy`` and ``torch`` are seeded with a number
  derived from this base and the test's id, so every test gets its own stream and a
  different base gives every test a different one. Default 0, so plain runs repeat exactly.
  Tests that need a particular draw still seed their own generators.
- ``TXRL_TEST_THREADS``: ``torch.set_num_threads`` for the run, which changes how float
  reductions are split and so their rounding. Default 1: tests run two workers on two
  cores, and one thread each avoids oversubscription, which makes the small per-step
  tensor ops of acting far slower.

For example, ``TXRL_TEST_SEED=7 TXRL_TEST_THREADS=2 python -m pytest -n 2 -q``.

The suite writes only under pytest's temporary folders: ``SB3_LOGDIR`` points there, so an
SB3 algorithm of SB3's own (the memoryless baseline) cannot leave ``SB3-<date>`` folders in
the system temp dir (txrl's learners create none; ``tests/sb3/test_rollout_safety.py``).
"""

from __future__ import annotations

import os
import random
import zlib
from collections.abc import Iterator

import numpy as np
import pytest
import torch


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise pytest.UsageError(f"{name} must be an integer, got {raw!r}") from None


torch.set_num_threads(max(1, _env_int("TXRL_TEST_THREADS", 1)))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--txrl-seed",
        type=int,
        default=None,
        help="base of the per-test global seed (overrides TXRL_TEST_SEED; default 0)",
    )


def pytest_report_header(config: pytest.Config) -> str:
    return f"txrl: base seed {_base_seed(config)}, torch threads {torch.get_num_threads()}"


def _base_seed(config: pytest.Config) -> int:
    option = config.getoption("--txrl-seed")
    return option if option is not None else _env_int("TXRL_TEST_SEED", 0)


def per_test_seed(base: int, nodeid: str) -> int:
    """The global seed of test ``nodeid`` under base seed ``base`` (stable across processes)."""
    return zlib.crc32(f"{base}:{nodeid}".encode()) % 2**31


@pytest.fixture(autouse=True, scope="session")
def _sb3_log_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SB3_LOGDIR", str(tmp_path_factory.mktemp("sb3-logs")))
        yield


@pytest.fixture(autouse=True)
def _global_seed(request: pytest.FixtureRequest) -> Iterator[None]:
    seed = per_test_seed(_base_seed(request.config), request.node.nodeid)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    yield


@pytest.fixture
def float64() -> Iterator[None]:
    """float64 as torch's default dtype for one test: modules and random inputs built in it are
    double, so exactness checks compare far below float32 rounding (see ``tests/numeric.py``)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)
