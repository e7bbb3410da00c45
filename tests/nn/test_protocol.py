"""The backbone protocol, checked for every registered backbone and every gate."""

from __future__ import annotations

import copy

import pytest
import torch

from txrl.backbones import backbone_names, make_backbone
from txrl.backbones.trxl import GATE_NAMES
from txrl.nn import PairedBackbone
from txrl.nn.state import index_state

from ..numeric import DEVICES, F64_REL, close
from .conftest import SMALL, small_backbone

TRXL_FAMILY = ["gtrxl", "trxl_i", "trxl"]

# every backbone with its default settings, plus GTrXL with each gate, plus a pair (an
# actor's GTrXL beside a critic's LSTM: a critic with a memory of its own)
CASES = (
    [(name, None) for name in backbone_names()]
    + [("gtrxl", gate) for gate in GATE_NAMES]
    + [("paired", None)]
)


def build(name: str, gate: str | None, **overrides):
    torch.manual_seed(0)
    if gate is not None:
        overrides["gate"] = gate
    if name == "paired":
        backbone = PairedBackbone(small_backbone("gtrxl"), small_backbone("lstm"))
    else:
        backbone = small_backbone(name, **overrides)
    backbone.eval()
    return backbone


def random_inputs(
    t: int, b: int, seed: int = 0, device: str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(t, b, SMALL["input_dim"], generator=gen)
    starts = torch.rand(t, b, generator=gen) < 0.15
    starts[0] = True
    return x.to(device), starts.to(device)


def step_by_step(backbone, x, starts, state):
    outputs = []
    for t in range(x.shape[0]):
        y, state = backbone(x[t : t + 1], state, starts[t : t + 1])
        outputs.append(y)
    return torch.cat(outputs), state


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("name", "gate"), CASES)
def test_step_by_step_equals_sequence(
    name: str, gate: str | None, device: str, float64: None
) -> None:
    backbone = build(name, gate).to(device)
    x, starts = random_inputs(23, 4, device=device)
    with torch.no_grad():
        y_seq, s_seq = backbone(x, backbone.initial_state(4), starts)
        y_step, s_step = step_by_step(backbone, x, starts, backbone.initial_state(4))
        # and in two uneven chunks, carrying the state across the cut
        y_a, s_mid = backbone(x[:9], backbone.initial_state(4), starts[:9])
        y_b, s_chunk = backbone(x[9:], s_mid, starts[9:])
    assert close(y_step, y_seq, F64_REL)
    assert close(torch.cat((y_a, y_b)), y_seq, F64_REL)
    for a, b, c in zip(s_seq, s_step, s_chunk, strict=True):
        assert close(b, a, F64_REL)
        assert close(c, a, F64_REL)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("name", "gate"), CASES)
def test_acting_steps_equal_sequence_and_continue_it(
    name: str, gate: str | None, device: str, float64: None
) -> None:
    # Backbone.step is the acting path; TrXL's writes each step into its ring buffer in
    # place, wrapping around several times here (23 steps, M = 4). Acting must compute what
    # the sequence computes, its traces must rebuild the same memory, and a sequence call
    # must carry on from a state left mid-ring.
    backbone = build(name, gate).to(device)
    x, starts = random_inputs(23, 4, seed=3, device=device)
    with torch.no_grad():
        y_seq, s_seq = backbone(x, backbone.initial_state(4), starts)
        state, outputs, traces = backbone.initial_state(4), [], []
        for t in range(x.shape[0]):
            out = backbone.step(x[t : t + 1], state, starts[t : t + 1], trace=True)
            outputs.append(out.output)
            traces.append(out.trace)
            state = out.state
        no_start = torch.zeros_like(starts[:5])
        y_next, _ = backbone(x[:5], state, no_start)
        y_next_ref, _ = backbone(x[:5], s_seq, no_start)
    assert close(torch.cat(outputs), y_seq, F64_REL)
    assert close(y_next, y_next_ref, F64_REL)
    ordered = getattr(backbone, "ordered", lambda s: s)(state)
    for a, b in zip(s_seq, ordered, strict=True):
        assert close(b, a, F64_REL)
    with torch.no_grad():
        seq_trace = backbone.run(x, backbone.initial_state(4), starts, trace=True).trace
    for a, b in zip(
        seq_trace, type(seq_trace)(*map(torch.cat, zip(*traces, strict=True))), strict=True
    ):
        assert close(b, a, F64_REL)


@pytest.mark.parametrize("name", TRXL_FAMILY)
def test_acting_step_writes_one_slot_in_place(name: str) -> None:
    backbone = build(name, None)
    x, starts = random_inputs(6, 2, seed=4)
    with torch.no_grad():
        state = backbone.initial_state(2)
        for t in range(6):
            before = [field.clone() for field in state]
            out = backbone.step(x[t : t + 1], state, starts[t : t + 1])
            assert all(a is b for a, b in zip(out.state, state, strict=True)), "advanced in place"
            changed = (out.state.hidden != before[0]).any(dim=(1, 3))  # (B, M) slots rewritten
            assert changed.sum(dim=1).le(1).all()
            state = out.state
    assert state.position.tolist() == [6 % SMALL["memory_length"]] * 2


@pytest.mark.parametrize(("name", "gate"), CASES)
def test_episode_isolation(name: str, gate: str | None) -> None:
    backbone = build(name, gate)
    x, starts = random_inputs(16, 3, seed=1)
    starts[:] = False
    starts[0] = True
    starts[9] = True  # a new episode at step 9 in every env
    changed = x.clone()
    changed[:9] += torch.randn_like(changed[:9]) * 3.0
    with torch.no_grad():
        y, _ = backbone(x, backbone.initial_state(3), starts)
        y_changed, _ = backbone(changed, backbone.initial_state(3), starts)
    assert torch.equal(y[9:], y_changed[9:])
    assert not torch.allclose(y[:9], y_changed[:9])


@pytest.mark.parametrize("name", TRXL_FAMILY)
def test_receptive_field_is_layers_times_memory(name: str) -> None:
    n_layers, memory = 2, 3
    backbone = build(name, None, n_layers=n_layers, memory_length=memory)
    t = 12
    x, starts = random_inputs(t, 1, seed=2)
    starts[:] = False
    last = t - 1
    with torch.no_grad():
        y, _ = backbone(x, backbone.initial_state(1), starts)
        beyond = x.clone()
        beyond[last - n_layers * memory - 1] += 5.0  # N*M + 1 steps back: out of reach
        y_beyond, _ = backbone(beyond, backbone.initial_state(1), starts)
        within = x.clone()
        within[last - memory] += 5.0  # M steps back: in reach of the first layer's memory
        y_within, _ = backbone(within, backbone.initial_state(1), starts)
        edge = x.clone()
        edge[last - n_layers * memory] += 5.0  # exactly N*M back: reached through all layers
        y_edge, _ = backbone(edge, backbone.initial_state(1), starts)
    assert torch.equal(y[last], y_beyond[last])
    assert not torch.allclose(y[last], y_within[last])
    assert not torch.allclose(y[last], y_edge[last])


@pytest.mark.parametrize(("name", "gate"), CASES)
def test_gradients_finite_and_none_into_memory(name: str, gate: str | None) -> None:
    backbone = build(name, gate)
    backbone.train()
    x1, starts1 = random_inputs(8, 2, seed=3)
    x1.requires_grad_(True)
    _, state = backbone(x1, backbone.initial_state(2), starts1)  # earlier segment, with grad on
    assert all(not f.requires_grad for f in state), "the carried state must be stop-gradient"
    x2, starts2 = random_inputs(6, 2, seed=4)
    starts2[0] = False  # keep attending to the carried memory
    x2.requires_grad_(True)
    y, _ = backbone(x2, state, starts2)
    y.square().mean().backward()
    assert x1.grad is None, "gradient reached the earlier segment through the memory"
    assert x2.grad is not None and torch.isfinite(x2.grad).all()
    for pname, p in backbone.named_parameters():
        assert p.grad is None or torch.isfinite(p.grad).all(), pname
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in backbone.parameters())


@pytest.mark.parametrize(("name", "gate"), CASES)
def test_state_at_rebuilds_the_acting_state(name: str, gate: str | None, float64: None) -> None:
    """The trace of a rollout rebuilds, for any step t, the state the env acted from."""
    backbone = build(name, gate)
    b, t = 3, 14
    x, starts = random_inputs(t, b, seed=5)
    with torch.no_grad():
        warm_x, warm_starts = random_inputs(5, b, seed=6)
        _, initial = backbone(warm_x, backbone.initial_state(b), warm_starts)  # memory carried in
        state, states_before, traces = initial, [], []
        for step in range(t):
            states_before.append(state)
            out = backbone.run(x[step : step + 1], state, starts[step : step + 1], trace=True)
            traces.append(out.trace)
            state = out.state
        trace = type(traces[0])(*(torch.cat(f) for f in zip(*traces, strict=True)))
        when = torch.tensor([0, 7, 13])
        rebuilt = backbone.state_at(initial, trace, starts, when)
        # continuing from the rebuilt states gives the acting outputs
        for i, step in enumerate(when.tolist()):
            expect = states_before[step]
            got = index_state(rebuilt, slice(i, i + 1))
            y_expect, _ = backbone(
                x[step:, i : i + 1], index_state(expect, slice(i, i + 1)), starts[step:, i : i + 1]
            )
            y_got, _ = backbone(x[step:, i : i + 1], got, starts[step:, i : i + 1])
            assert close(y_got, y_expect, F64_REL)


def test_trxl_trace_is_small() -> None:
    backbone = build("gtrxl", None, memory_length=32)
    out = backbone.run(
        torch.randn(1, 2, SMALL["input_dim"]),
        backbone.initial_state(2),
        torch.ones(1, 2, dtype=torch.bool),
        trace=True,
    )
    # per step and env: L * D floats, independent of the memory length
    assert out.trace.hidden.shape == (1, 2, SMALL["n_layers"], SMALL["d_model"])


def test_trxl_step_attends_to_at_most_memory_plus_self() -> None:
    backbone = build("gtrxl", None, memory_length=3)
    x, starts = random_inputs(10, 1, seed=7)
    starts[:] = False
    out = backbone.run(x, backbone.initial_state(1), starts, stats=True)
    assert (
        out.stats["layer0/attention_entropy"].item() <= torch.log(torch.tensor(4.0)).item() + 1e-5
    )
    assert 0.0 <= out.stats["layer1/gate_attention"].item() <= 1.0


@pytest.mark.slow  # torch.compile
@pytest.mark.parametrize("name", ["gtrxl", "trxl"])
def test_compiled_acting_step_equals_the_sequence(name: str) -> None:
    # compile_step runs the ring step's layer loop through torch.compile (one float32 graph):
    # it must still compute what the training pass computes, at two batch sizes (the second
    # compiles once more, for any size); a copy (V-MPO's target network) compiles its own
    backbone = build(name, None, compile_step=True)
    for b, seed in ((4, 3), (3, 5)):
        x, starts = random_inputs(23, b, seed=seed)
        with torch.inference_mode():
            y_seq, s_seq = backbone(x, backbone.initial_state(b), starts)
            state, outputs = backbone.initial_state(b), []
            for t in range(x.shape[0]):
                out = backbone.step(x[t : t + 1], state, starts[t : t + 1])
                outputs.append(out.output)
                state = out.state
        assert close(torch.cat(outputs), y_seq, 1e-5)
        for a, c in zip(s_seq, backbone.ordered(state), strict=True):
            assert close(c.float(), a.float(), 1e-5)
    # small inputs made outside inference mode (as a learner's bootstrap step makes its
    # flags) reuse the step compiled for those made inside it
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    starts, x_now = torch.zeros(1, 3, dtype=torch.bool), x[:1].clone()
    assert not (starts.is_inference() or x_now.is_inference())
    with torch.inference_mode():
        backbone.step(x_now, state, starts)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs
    assert "_compiled_step_fn" in backbone.__dict__, "the compiled loop ran"
    assert "_compiled_step_fn" not in copy.deepcopy(backbone).__dict__


def test_a_step_that_cannot_be_compiled_names_the_setting() -> None:
    # e.g. no C++ compiler on the machine: torch's error, with the setting that asked for it
    backbone = build("gtrxl", None, compile_step=True)

    def fails(*args):
        raise torch._dynamo.exc.BackendCompilerFailed(
            "inductor", RuntimeError("No working C++ compiler found"), None
        )

    backbone.__dict__["_compiled_step_fn"] = fails
    x, starts = random_inputs(1, 2)
    with (
        torch.inference_mode(),
        pytest.raises(
            RuntimeError, match=r"compile_step: torch.compile could not(.|\n)*a C\+\+ compiler"
        ),
    ):
        backbone.step(x, backbone.initial_state(2), starts)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"d_model": 10, "n_heads": 4}, "divisible by n_heads"),
        ({"memory_length": -1}, "memory_length must be an int >= 0"),
        ({"gate": "lstm"}, "valid gates"),
        ({"n_layers": 0}, "n_layers must be a positive int"),
        ({"heads": 2}, "has no setting 'heads'; valid settings: input_dim, d_model"),
        ({"compile_step": "yes"}, "compile_step must be true or false, got 'yes'"),
    ],
)
def test_bad_settings_are_named(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_backbone("gtrxl", input_dim=3, **kwargs)


def test_unknown_backbone_lists_valid_names() -> None:
    with pytest.raises(ValueError, match=r"valid backbones: .*gtrxl"):
        make_backbone("gtrxxl", input_dim=3)


def test_wrong_shapes_are_named() -> None:
    backbone = build("gtrxl", None)
    state = backbone.initial_state(2)
    with pytest.raises(ValueError, match=r"x must have shape \(T, B, input_dim=5\)"):
        backbone(torch.zeros(3, 2, 4), state, torch.zeros(3, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="episode_starts must have shape"):
        backbone(torch.zeros(3, 2, 5), state, torch.zeros(3, dtype=torch.bool))
    with pytest.raises(ValueError, match="bool tensor"):
        backbone(torch.zeros(3, 2, 5), state, torch.zeros(3, 2))
    with pytest.raises(ValueError, match="state holds 2 envs"):
        backbone(torch.zeros(3, 4, 5), state, torch.zeros(3, 4, dtype=torch.bool))


@pytest.mark.parametrize("name", ["trxl_i", "trxl"])
def test_fixed_order_backbones_reject_gates(name: str) -> None:
    with pytest.raises(ValueError, match="gtrxl"):
        make_backbone(name, input_dim=3, gate="gru")


def test_a_state_made_under_inference_mode_can_be_stepped_without_it() -> None:
    backbone = build("gtrxl", None)
    x, starts = random_inputs(4, 2, seed=5)
    with torch.inference_mode():
        state = backbone.step(x[:1], backbone.initial_state(2), starts[:1]).state
    with torch.no_grad():
        expect, _ = backbone(x[1:2], state, starts[1:2])
        got = backbone.step(x[1:2], state, starts[1:2]).output
    assert (expect - got).abs().max().item() <= 1e-5


@pytest.mark.parametrize(("name", "gate"), CASES)
@pytest.mark.parametrize("trace", [False, True])
def test_run_without_next_state_gives_the_same_outputs(
    name: str, gate: str | None, trace: bool
) -> None:
    # a training pass asks for no next state: everything else it returns must not change
    backbone = build(name, gate)
    x, starts = random_inputs(9, 3, seed=11)
    carried = backbone.run(x[:4], backbone.initial_state(3), starts[:4]).state  # memory in use
    full = backbone.run(x[4:], carried, starts[4:], trace=trace, stats=True)
    lean = backbone.run(x[4:], carried, starts[4:], trace=trace, stats=True, next_state=False)
    assert full.state is not None
    assert lean.state is None
    assert torch.equal(lean.output, full.output)
    assert lean.aux_losses.keys() == full.aux_losses.keys()
    for key, loss in full.aux_losses.items():
        assert torch.equal(lean.aux_losses[key], loss), key
    assert lean.stats.keys() == full.stats.keys()
    if trace:
        for a, b in zip(lean.trace, full.trace, strict=True):
            assert torch.equal(a, b)
    else:
        assert lean.trace is None
