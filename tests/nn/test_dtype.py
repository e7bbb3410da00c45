"""Every backbone follows its module's dtype: built in float32, ``.double()``, and its empty
memory, acting steps and sequence pass are all float64."""

from __future__ import annotations

import pytest
import torch

from txrl.backbones import backbone_names
from txrl.nn import PairedBackbone

from ..numeric import F64_REL, close
from .conftest import small_backbone
from .test_protocol import random_inputs


@pytest.mark.parametrize("name", [*backbone_names(), "paired"])
def test_a_double_backbone_acts_in_double(name: str) -> None:
    torch.manual_seed(0)
    if name == "paired":
        backbone = PairedBackbone(small_backbone("gtrxl"), small_backbone("lstm"))
    else:
        backbone = small_backbone(name)
    backbone.eval().double()  # built with float32 as the default dtype
    assert torch.get_default_dtype() == torch.float32
    x, starts = random_inputs(11, 3, seed=7)
    x = x.double()
    state = backbone.initial_state(3)
    assert all(f.dtype in (torch.float64, torch.bool, torch.long) for f in state), [
        f.dtype for f in state
    ]
    with torch.no_grad():
        y_seq, _ = backbone(x, backbone.initial_state(3), starts)
        outputs = []
        for t in range(x.shape[0]):
            out = backbone.step(x[t : t + 1], state, starts[t : t + 1])
            outputs.append(out.output)
            state = out.state
    y_step = torch.cat(outputs)
    assert y_step.dtype == y_seq.dtype == torch.float64
    assert close(y_step, y_seq, F64_REL)
