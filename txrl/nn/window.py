"""Sliding-window memory mechanics shared by every backbone whose memory is "the last M steps".

Legend: B envs, T steps, M slots. A window memory keeps, per env, M per-step entries (oldest
first) and a ``valid`` mask; a rollout's trace keeps one entry per step. These helpers build
the attention mask of a sequence, give each step's episode time, say which entries stay valid
after it, and rebuild the window before any step of a rollout.
"""

from __future__ import annotations

import torch


def episode_ids(
    valid: torch.Tensor, episode_starts: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Episode ids of memory slots and steps, so "same episode" is an equality test.

    ``valid`` (B, M) bool, ``episode_starts`` (T, B) bool -> memory ids (B, M) (0 when valid,
    -1 otherwise) and step ids (B, T) (each start opens a new episode).
    """
    step_episode = episode_starts.transpose(0, 1).long().cumsum(dim=1)  # (B, T)
    memory_episode = torch.where(valid, 0, -1)  # (B, M)
    return memory_episode, step_episode


def window_mask(valid: torch.Tensor, episode_starts: torch.Tensor, window: int) -> torch.Tensor:
    """Which keys each step may attend to: the last ``window`` steps of its own episode and itself.

    Keys are the M memory slots followed by the T steps. ``valid`` (B, M), ``episode_starts``
    (T, B) -> (B, T, M+T) bool. Step i sits at key position M + i.
    """
    m, t = valid.shape[1], episode_starts.shape[0]
    if t == 1:
        # one acting step: the valid slots within the window unless an episode starts, and itself
        memory_ok = valid & ~episode_starts[0, :, None]  # (B, M)
        if window < m:
            memory_ok = memory_ok & (torch.arange(m, device=valid.device) >= m - window)
        itself = torch.ones((valid.shape[0], 1), dtype=torch.bool, device=valid.device)  # (B, 1)
        return torch.cat((memory_ok, itself), dim=1)[:, None, :]  # (B, 1, M+1)
    memory_episode, step_episode = episode_ids(valid, episode_starts)
    key_episode = torch.cat((memory_episode, step_episode), dim=1)  # (B, K)
    same_episode = key_episode[:, None, :] == step_episode[:, :, None]  # (B, T, K)
    distance = (
        torch.arange(t, device=valid.device)[:, None]
        + m
        - torch.arange(m + t, device=valid.device)[None, :]
    )
    return same_episode & ((distance >= 0) & (distance <= window))[None]


def episode_time(step: torch.Tensor, episode_starts: torch.Tensor) -> torch.Tensor:
    """Index of each step within its episode.

    ``step`` (B,) long: the episode time of the step after the carried-in memory (steps of the
    current episode seen so far); ``episode_starts`` (T, B). Returns (B, T) long.
    """
    t = episode_starts.shape[0]
    index = torch.arange(t, device=step.device)  # (T,)
    starts = episode_starts.transpose(0, 1)  # (B, T)
    last_start = torch.where(starts, index, -1).cummax(dim=1).values  # (B, T)
    return torch.where(last_start >= 0, index - last_start, step[:, None] + index)


def time_after(step: torch.Tensor, episode_starts: torch.Tensor) -> torch.Tensor:
    """Episode time of the step after the sequence (`episode_time`'s, one past the last step's).

    ``step`` (B,) long, ``episode_starts`` (T, B) -> (B,) long.
    """
    if episode_starts.shape[0] == 1:  # one step: 0 at a start, else the carried-in time
        return step.masked_fill(episode_starts.view(-1), 0).add_(1)
    return episode_time(step, episode_starts)[:, -1] + 1


def valid_after(
    valid: torch.Tensor, episode_starts: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Which memory slots and which of the T steps are valid seen from the step after the
    sequence: those of the last step's episode.

    ``valid`` (B, M), ``episode_starts`` (T, B) -> the slots (B, M), in the order they are given
    (a slot's validity does not depend on where it lies), and the steps (B, T).
    """
    if episode_starts.shape[0] == 1:
        # one step: the slots unless it started anew, and the step just taken
        itself = torch.ones((valid.shape[0], 1), dtype=torch.bool, device=valid.device)
        return valid & ~episode_starts.view(-1, 1), itself
    memory_episode, step_episode = episode_ids(valid, episode_starts)
    last = step_episode[:, -1:]  # (B, 1)
    return memory_episode == last, step_episode == last


def next_valid(valid: torch.Tensor, episode_starts: torch.Tensor) -> torch.Tensor:
    """Validity of the last M of the M+T positions, seen from the step after the sequence -> (B, M)."""
    m = valid.shape[1]
    if m == 0:
        return valid
    joined = torch.cat(valid_after(valid, episode_starts), dim=1)  # (B, M+T)
    return joined[:, joined.shape[1] - m :]


def slide(memory: torch.Tensor, steps: torch.Tensor, dim: int) -> torch.Tensor:
    """The last M entries of ``cat(memory, steps)`` along ``dim`` (M = memory.shape[dim], may be 0)."""
    joined = torch.cat((memory, steps), dim=dim)
    return joined.narrow(dim, joined.shape[dim] - memory.shape[dim], memory.shape[dim])


def window_at(
    initial: torch.Tensor,
    steps: torch.Tensor,
    initial_valid: torch.Tensor,
    episode_starts: torch.Tensor,
    t: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The window in force before step ``t[b]`` of a rollout (before any reset at that step).

    ``initial`` (B, M, ...) entries at the rollout's start, ``steps`` (T, B, ...) one entry per
    step, ``initial_valid`` (B, M), ``episode_starts`` (T, B), ``t`` (B,) long in [0, T).
    Returns the entries (B, M, ...), detached, and their validity (B, M).
    """
    b, m = initial_valid.shape
    stream = torch.cat((initial, steps.transpose(0, 1)), dim=1)  # (B, M+T, ...)
    slots = t[:, None] + torch.arange(m, device=t.device)[None, :]  # (B, M) positions in the stream
    index = slots.view(b, m, *([1] * (stream.dim() - 2))).expand(b, m, *stream.shape[2:])
    entries = stream.gather(1, index).detach()
    memory_episode, step_episode = episode_ids(initial_valid, episode_starts)
    stream_episode = torch.cat((memory_episode, step_episode), dim=1)  # (B, M+T)
    # the state before step t belongs to the episode of step t-1 (episode 0 before step 0)
    before = torch.cat((torch.zeros_like(step_episode[:, :1]), step_episode), dim=1)  # (B, T+1)
    valid = stream_episode.gather(1, slots) == before.gather(1, t[:, None])
    return entries, valid
