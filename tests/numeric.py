"""Comparisons whose tolerance follows from the numbers compared, not from one machine.

Exactness checks (step by step equals the whole sequence, fast path equals the naive one)
run in float64 (the ``float64`` fixture of ``tests/conftest.py``), where rounding is ~1e-16
of the values, so ``F64_REL`` leaves a margin of many orders of magnitude and still fails on
any real difference. Where a path is float32 only, ``F32_REL`` is ~800 float32 ulps of the
largest value compared: far above the rounding of a different summation order or thread
count, far below any error of substance.
"""

from __future__ import annotations

import torch

F64_REL = 1e-9
F32_REL = 1e-4

#: every device torch sees here: the CPU, plus a CUDA GPU where there is one (CI has none)
DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


def relative_error(
    actual: torch.Tensor, expected: torch.Tensor, scale: float | None = None
) -> float:
    """max |actual - expected| divided by ``scale``: by default the largest magnitude among the
    values compared; give the magnitude of the inputs where the expected value is zero."""
    actual, expected = actual.detach().double(), expected.detach().double()
    if not expected.numel():
        return 0.0
    error = (actual - expected).abs().max().item()
    if scale is None:
        scale = max(actual.abs().max().item(), expected.abs().max().item())
    return error / scale if scale > 0 else error


def close(
    actual: torch.Tensor, expected: torch.Tensor, rel: float, scale: float | None = None
) -> bool:
    """Whether ``actual`` equals ``expected`` within ``rel`` of their magnitude (or ``scale``)."""
    return relative_error(actual, expected, scale) <= rel
