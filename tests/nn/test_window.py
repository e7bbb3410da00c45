"""The sliding-window helpers: the one-step fast paths agree with the general ones."""

import pytest
import torch

from txrl.nn import window


def general_mask(valid: torch.Tensor, starts: torch.Tensor, win: int) -> torch.Tensor:
    memory_ids, step_ids = window.episode_ids(valid, starts)
    m, t = valid.shape[1], starts.shape[0]
    keys = torch.cat((memory_ids, step_ids), dim=1)
    same = keys[:, None, :] == step_ids[:, :, None]
    distance = torch.arange(t)[:, None] + m - torch.arange(m + t)[None, :]
    return same & ((distance >= 0) & (distance <= win))[None]


@pytest.mark.parametrize("m", [0, 1, 5])
@pytest.mark.parametrize("win", [0, 2, 5, 8])
def test_one_step_paths_equal_the_general_ones(m: int, win: int) -> None:
    gen = torch.Generator().manual_seed(m * 10 + win)
    valid = torch.rand(4, m, generator=gen) < 0.6
    starts = torch.tensor([[True, False, True, False]])
    assert torch.equal(window.window_mask(valid, starts, win), general_mask(valid, starts, win))
    # next_valid of one step equals that of the same step inside a longer call
    two = torch.cat((starts, torch.zeros_like(starts)))
    keys_after_two = window.next_valid(window.next_valid(valid, starts), two[1:])
    assert torch.equal(window.next_valid(valid, two), keys_after_two)
