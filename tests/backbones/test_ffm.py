"""``ffm``, Fast and Forgetful Memory: the scan over a sequence computes the paper's recurrence
step by step, episode starts clear the memory, long sequences neither overflow nor cut the
gradient, and bad settings are named."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from txrl.backbones.ffm import FFMConfig
from txrl.backbones.ffm.model import FFMBackbone, FFMState

from ..numeric import F32_REL, F64_REL, close


def backbone(**settings: object) -> FFMBackbone:
    torch.manual_seed(0)
    config: dict[str, Any] = {
        "input_dim": 5, "d_model": 16, "n_layers": 2, "memory_size": 8, "context_size": 3
    }  # fmt: skip
    config.update(settings)
    return FFMBackbone(FFMConfig(**config)).eval()


def inputs(steps: int, envs: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(steps, envs, 5, generator=gen)
    starts = torch.zeros(steps, envs, dtype=torch.bool)
    starts[0] = True
    return x, starts


def paper_recurrence(model: FFMBackbone, x: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
    """The cell's equations one step at a time, written from the paper with the model's
    weights: x~ = l1(o) sigma(l2(o)); S = gamma S + x~ 1^T (S = 0 first at an episode start);
    y = LN(l3(Re S || Im S)) sigma(l4(o)) + l5(o) (1 - sigma(l4(o)))."""
    steps, envs, _ = x.shape
    outputs = []
    memories = [
        torch.zeros(envs, cell.memory_size, cell.context_size, dtype=torch.complex128)
        for cell in model.cells
    ]
    for t in range(steps):
        o = x[t]
        for layer, cell in enumerate(model.cells):
            m, d = cell.memory_size, cell.d_model
            gamma = torch.exp(
                torch.complex(-cell.decay[:, None], torch.zeros(m, 1))
                + torch.complex(torch.zeros(1, cell.context_size), cell.frequency[None, :])
            )  # (m, c) = exp(-alpha) exp(i omega)^T
            l1, l5, l2, l4 = cell.project(o).split([m, d, m, d], dim=-1)
            x_tilde = l1 * torch.sigmoid(l2)
            cleared = torch.where(starts[t][:, None, None], 0, memories[layer])
            memories[layer] = gamma * cleared + x_tilde[:, :, None]
            # Re[S] || Im[S], flattened as the model lays them out: (B, m, c, 2) -> (B, 2mc)
            flat = torch.stack((memories[layer].real, memories[layer].imag), -1).flatten(1)
            z = cell.read_out(flat)
            gate = torch.sigmoid(l4)
            o = torch.nn.functional.layer_norm(z, (d,)) * gate + l5 * (1 - gate)
        outputs.append(o)
    return torch.stack(outputs)


def test_the_scan_computes_the_papers_recurrence_with_resets(float64: None) -> None:
    model = backbone()
    x, starts = inputs(45, 3)
    starts[17, 0] = starts[18, 1] = starts[44, 2] = True  # resets mid-sequence, one at the end
    with torch.no_grad():
        y, _ = model(x, model.initial_state(3), starts)
        expected = paper_recurrence(model, x, starts)
    assert close(y, expected, F64_REL)


def test_a_sequence_in_chunks_equals_one_call_and_the_state_carries(float64: None) -> None:
    model = backbone()
    x, starts = inputs(50, 2, seed=1)
    starts[23, 1] = True
    with torch.no_grad():
        whole = model.run(x, model.initial_state(2), starts)
        first = model.run(x[:31], model.initial_state(2), starts[:31])
        second = model.run(x[31:], first.state, starts[31:])
    assert close(torch.cat((first.output, second.output)), whole.output, F64_REL)
    for a, b in zip(second.state, whole.state, strict=True):
        assert close(a, b, F64_REL)


def test_an_episode_start_clears_the_memory(float64: None) -> None:
    model = backbone()
    x, starts = inputs(20, 2, seed=2)
    starts[8] = True
    warm = model.initial_state(2)
    warm = FFMState(torch.randn_like(warm.real), torch.randn_like(warm.imag))
    changed = x.clone()
    changed[:8] += 3.0
    with torch.no_grad():
        y = model(x, warm, starts)[0]
        y_changed = model(changed, model.initial_state(2), starts)[0]
    assert torch.equal(y[8:], y_changed[8:])
    assert not torch.allclose(y[:8], y_changed[:8])


def test_the_trace_is_the_state_before_each_step(float64: None) -> None:
    model = backbone()
    x, starts = inputs(9, 2, seed=3)
    starts[4, 0] = True
    with torch.no_grad():
        out = model.run(x, model.initial_state(2), starts, trace=True)
        state, before = model.initial_state(2), []
        for t in range(9):
            before.append(state)
            state = model.run(x[t : t + 1], state, starts[t : t + 1]).state
    assert out.trace.real.shape == (9, 2, 2, 8, 3)
    for field, name in enumerate(FFMState._fields):
        expected = torch.stack([s[field] for s in before])
        assert close(getattr(out.trace, name), expected, F64_REL)


def test_a_long_sequence_neither_overflows_nor_drifts_in_float32() -> None:
    # the closed form computed as gamma^-j cumulated overflows float32 once alpha t > 88:
    # at 4,096 steps every trace faster than alpha = 0.022; the scan multiplies by powers
    # |gamma^d| <= 1 only
    model = backbone(n_layers=1)
    x, starts = inputs(4096, 2, seed=4)
    with torch.no_grad():
        y = model(x, model.initial_state(2), starts)[0]
        reference = model.double()(x.double(), model.initial_state(2), starts)[0]
    assert torch.isfinite(y).all()
    assert close(y, reference, F32_REL)


def test_the_gradient_reaches_the_first_step_of_a_long_segment_and_stops_at_a_reset() -> None:
    model = backbone(n_layers=1)
    x, starts = inputs(256, 2, seed=5)
    starts[100, 1] = True  # env 1 starts an episode at step 100
    x.requires_grad_(True)
    y, _ = model(x, model.initial_state(2), starts)
    y[-1].square().sum().backward()
    assert x.grad is not None
    assert x.grad[0, 0].abs().sum() > 0  # 255 steps back, within the episode
    assert torch.equal(x.grad[:100, 1], torch.zeros_like(x.grad[:100, 1]))  # before the reset
    assert x.grad[100, 1].abs().sum() > 0


def test_under_bfloat16_autocast_the_memory_sums_in_float32() -> None:
    model = backbone()
    x, starts = inputs(64, 2, seed=6)
    with torch.no_grad():
        expected = model(x, model.initial_state(2), starts)[0]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model.run(x, model.initial_state(2), starts)
    assert out.state.real.dtype == torch.float32
    # bfloat16 rounds each product at 2^-8; the outputs are layer-normed, of order 1
    assert (out.output.float() - expected).abs().max() < 0.1


@pytest.mark.parametrize("raw", [-30.0, 0.0, 30.0])
def test_no_trace_grows_whatever_its_parameter(raw: float) -> None:
    model = backbone(n_layers=1)
    cell = model.cells[0]
    with torch.no_grad():
        cell.decay_raw.fill_(raw)
    assert (cell.decay > 0).all()  # |gamma| = exp(-alpha) < 1, up to float rounding
    assert (cell.gamma_power(1).abs() <= 1).all()


def test_the_initial_rates_and_periods_follow_the_settings() -> None:
    model = backbone(n_layers=1, memory_size=4, context_size=2, max_period=100.0)
    cell = model.cells[0]
    alpha = cell.decay.detach()
    assert torch.exp(-alpha[0] * 100) == pytest.approx(0.01, rel=1e-4)  # kept after 100 steps
    assert alpha[-1].item() == pytest.approx(torch.log(torch.tensor(2.0)).item(), rel=1e-5)
    periods = 2 * torch.pi / cell.frequency.detach()
    assert periods.tolist() == pytest.approx([1.0, 100.0])


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"memory_size": 0}, "memory_size must be a positive int, got 0"),
        ({"context_size": 2.0}, "context_size must be a positive int, got 2.0"),
        ({"min_period": 0}, "min_period must be a positive number of steps, got 0"),
        ({"min_period": 8, "max_period": 4}, r"max_period \(4\) must be >= min_period \(8\)"),
        ({"forgotten_at": 0.7}, r"forgotten_at must be a fraction in \(0, 0.5\)"),
    ],
)
def test_bad_settings_are_named(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FFMConfig(input_dim=3, **settings)  # type: ignore[arg-type]  # bad on purpose
