"""Defining properties of the Compressive Transformer (``compressive``)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from txrl.backbones.compressive.model import (
    CompressiveState,
    CompressiveTransformer,
    read_slots,
    relative_attention,
    ring_order,
)
from txrl.nn.attention import RelativeMultiHeadAttention
from txrl.nn.state import clone_state, state_from_numpy, state_nbytes, state_to_numpy
from txrl.nn.window import window_mask

from ..nn.conftest import small_backbone
from ..nn.reference import naive_relative_attention
from ..numeric import F32_REL, F64_REL, close


def build(**overrides) -> CompressiveTransformer:
    torch.manual_seed(0)
    backbone = small_backbone("compressive", **overrides)
    assert isinstance(backbone, CompressiveTransformer)
    return backbone.eval()


def steps_with_states(backbone, x, starts):
    """Act one step at a time -> outputs (T, B, D) and the state after every step."""
    state = backbone.initial_state(x.shape[1])
    outputs, states = [], []
    for t in range(x.shape[0]):
        y, state = backbone(x[t : t + 1], state, starts[t : t + 1])
        outputs.append(y)
        states.append(state)
    return torch.cat(outputs), states


@pytest.mark.parametrize("compression", ["pool", "conv"])
def test_after_c_evictions_the_compressed_memory_holds_f_c_of_exactly_them(
    compression: str, float64: None
) -> None:
    m, c = 3, 2
    backbone = build(
        memory_length=m, compression_rate=c, compressed_length=3, compression=compression
    )
    if compression == "conv":  # move away from the mean-pooling init
        with torch.no_grad():
            for block in backbone.blocks:
                assert block.compress.conv is not None
                block.compress.conv.weight.add_(0.1 * torch.randn_like(block.compress.conv.weight))
    t, b = m + 2 * c, 2
    x = torch.randn(t, b, 5)
    starts = torch.zeros(t, b, dtype=torch.bool)
    starts[0] = True
    with torch.no_grad():
        _, states = steps_with_states(backbone, x, starts)
        _, seq_state = backbone(x, backbone.initial_state(b), starts)
    # the layer inputs of step i: the newest FIFO entry after step i, (B, L, D)
    inputs = torch.stack([s.hidden[:, :, -1] for s in states])  # (T, B, L, D)

    def f_c(first: int, layer: int) -> torch.Tensor:
        group = inputs[first : first + c, :, layer]  # (c, B, D), evicted in this order
        if compression == "pool":
            return group.mean(0)
        conv = backbone.blocks[layer].compress.conv
        # kernel = stride = c over the sequence of evicted entries
        return F.conv1d(group.permute(1, 2, 0), conv.weight, conv.bias, stride=c)[..., 0]

    # before step M no entry has left the FIFO; after steps M..M+c-2 they are pending
    assert not states[m + c - 2].compressed_valid.any()
    assert states[m + c - 2].pending_valid.all()
    # after c evictions (steps 0..c-1 left after steps M..M+c-1): one compressed slot
    after_c = states[m + c - 1]
    assert after_c.compressed_valid.tolist() == [[False, False, True]] * b
    assert not after_c.pending_valid.any()
    for layer in range(2):
        assert close(after_c.compressed[:, layer, -1], f_c(0, layer), F64_REL)
    # c more evictions: the next slot holds f_c of steps c..2c-1, the older one moved up
    for final in (states[-1], seq_state):
        assert final.compressed_valid.tolist() == [[False, True, True]] * b
        for layer in range(2):
            assert close(final.compressed[:, layer, -2], f_c(0, layer), F64_REL)
            assert close(final.compressed[:, layer, -1], f_c(c, layer), F64_REL)


def layer_inputs(backbone, x, starts) -> torch.Tensor:
    """The input of every block at every step, acting step by step -> (T, B, L, D)."""
    seen: list[torch.Tensor] = []
    hooks = [
        block.register_forward_pre_hook(
            lambda _module, args: seen.append(args[0].detach().view(args[0].shape[0], 1, -1))
        )
        for block in backbone.blocks
    ]
    try:
        with torch.no_grad():
            steps_with_states(backbone, x, starts)
    finally:
        for hook in hooks:
            hook.remove()
    n_layers = len(backbone.blocks)
    # each hook call saw one step of one layer: (B, 1, D) in sequence mode, (B, D) acting
    per_step = [torch.cat(seen[i : i + n_layers], dim=1) for i in range(0, len(seen), n_layers)]
    return torch.stack(per_step)  # T x (B, L, D) -> (T, B, L, D)


def reference_memory(inputs: torch.Tensor, starts: torch.Tensor, m: int, c: int, mc: int, compress):
    """Plain-Python bookkeeping of one env and layer: FIFO, pending buffer, compressed memory."""
    fifo: list[torch.Tensor] = []
    pending: list[torch.Tensor] = []
    compressed: list[torch.Tensor] = []
    for step in range(inputs.shape[0]):
        if starts[step]:
            fifo, pending, compressed = [], [], []
        fifo.append(inputs[step])
        if len(fifo) > m:
            pending.append(fifo.pop(0))
        if len(pending) == c:
            compressed = [*compressed, compress(torch.stack(pending))][-mc:]
            pending = []
    return fifo, pending, compressed


@pytest.mark.parametrize(("m", "c", "mc"), [(2, 2, 2), (3, 3, 1), (1, 1, 3), (0, 2, 2)])
def test_memory_bookkeeping_matches_a_plain_reference(
    m: int, c: int, mc: int, float64: None
) -> None:
    backbone = build(memory_length=m, compression_rate=c, compressed_length=mc, compression="conv")
    t, b = 26, 3
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(t, b, 5, generator=gen)
    starts = torch.rand(t, b, generator=gen) < 0.1
    starts[0] = True
    starts[14, 1] = True
    with torch.no_grad():
        y_step, states = steps_with_states(backbone, x, starts)
        out = backbone.run(x, backbone.initial_state(b), starts)
        y_a, mid = backbone(x[:11], backbone.initial_state(b), starts[:11])
        y_b, chunked = backbone(x[11:], mid, starts[11:])
        traced = backbone.run(x, backbone.initial_state(b), starts, trace=True)
    # sequence, steps and chunks agree (compressions inside the sequence are seen as when acting)
    assert close(out.output, y_step, F64_REL)
    assert close(torch.cat((y_a, y_b)), y_step, F64_REL)
    assert close(traced.output, y_step, F64_REL)
    for seq_field, step_field, chunk_field in zip(out.state, states[-1], chunked, strict=True):
        assert close(seq_field, step_field, F64_REL)
        assert close(chunk_field, step_field, F64_REL)
    # the trace is the state before each step, its keys and values left out (the traced
    # steps run on rings, each of `steps_with_states` from slots oldest first: the same
    # values summed in another order)
    before = [backbone.without_caches(s) for s in [backbone.initial_state(b), *states[:-1]]]
    ordered = ordered_trace(backbone, traced.trace)
    for field, per_step in zip(ordered, zip(*before, strict=True), strict=True):
        assert close(field, torch.stack(per_step), F64_REL)

    inputs_of = layer_inputs(backbone, x, starts)  # (T, B, L, D)
    for step, state in enumerate(states):  # after every step, every env and layer
        for env in range(b):
            for layer in range(2):
                fifo, pending, compressed = reference_memory(
                    inputs_of[: step + 1, env, layer],
                    starts[: step + 1, env],
                    m,
                    c,
                    mc,
                    backbone.blocks[layer].compress,
                )
                check_memory(state, env, layer, fifo, pending, compressed)


def ordered_trace(backbone: CompressiveTransformer, trace: CompressiveState) -> CompressiveState:
    """A trace (T, B, ...) with each step's rings laid out oldest first (`ordered`)."""
    t, b = trace.valid.shape[:2]
    flat = backbone.ordered(CompressiveState(*(field.flatten(0, 1) for field in trace)))
    return CompressiveState(*(field.unflatten(0, (t, b)) for field in flat))


def check_memory(state: CompressiveState, env: int, layer: int, fifo, pending, compressed) -> None:
    m, mc, p = state.valid.shape[1], state.compressed_valid.shape[1], state.pending_valid.shape[1]
    assert int(state.valid[env].sum()) == len(fifo)
    if fifo:
        assert close(state.hidden[env, layer, m - len(fifo) :], torch.stack(fifo), F64_REL)
    assert int(state.pending_valid[env].sum()) == len(pending)
    if pending:
        assert close(state.pending[env, layer, p - len(pending) :], torch.stack(pending), F64_REL)
    assert int(state.compressed_valid[env].sum()) == len(compressed)
    if compressed:
        got = state.compressed[env, layer, mc - len(compressed) :]
        assert close(got, torch.stack(compressed), F64_REL)


def test_a_step_sees_its_fifo_and_compressed_memory_but_not_pending_or_dropped_entries() -> None:
    # one layer, M = 2, c = 2, Mc = 1: before step 11 the FIFO holds steps 9, 10, step 8 is
    # pending, the compressed slot holds f_c(steps 6, 7) and f_c(steps 4, 5) was dropped
    backbone = build(n_layers=1, memory_length=2, compression_rate=2, compressed_length=1)
    t = 12
    x = torch.randn(t, 1, 5)
    starts = torch.zeros(t, 1, dtype=torch.bool)
    starts[0] = True
    with torch.no_grad():
        y, _ = backbone(x, backbone.initial_state(1), starts)
        for step, seen in [
            (10, True),
            (9, True),
            (8, False),
            (7, True),
            (6, True),
            (5, False),
            (0, False),
        ]:
            changed = x.clone()
            changed[step] += 3.0
            y_changed, _ = backbone(changed, backbone.initial_state(1), starts)
            assert torch.equal(y[-1], y_changed[-1]) != seen, step


def test_reconstruction_loss_is_zero_for_identity_compression() -> None:
    # c = 1 with mean pooling: f_c(old_mem) = old_mem, nothing is lost
    backbone = build(compression_rate=1, compression="pool", memory_length=2)
    x = torch.randn(10, 3, 5)
    starts = torch.zeros(10, 3, dtype=torch.bool)
    starts[0] = True
    out = backbone.run(x, backbone.initial_state(3), starts)
    assert out.aux_losses["attention_reconstruction"].item() == pytest.approx(0.0, abs=1e-10)
    # and with c = 2 pooling loses something
    lossy = build(compression_rate=2, compression="pool", memory_length=2)
    out = lossy.run(x, lossy.initial_state(3), starts)
    assert out.aux_losses["attention_reconstruction"].item() > 1e-6


def test_reconstruction_loss_trains_only_the_compression_and_decreases() -> None:
    backbone = build(compression_rate=3, compression="conv", memory_length=2)
    backbone.train()
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(12, 3, 5, generator=gen)
    starts = torch.zeros(12, 3, dtype=torch.bool)
    starts[0] = True
    out = backbone.run(x, backbone.initial_state(3), starts)
    loss = out.aux_losses["attention_reconstruction"]
    loss.backward()
    compression = {n for n, _ in backbone.named_parameters() if ".compress." in n}
    assert compression
    for name, param in backbone.named_parameters():
        if name in compression:
            assert param.grad is not None and param.grad.abs().sum() > 0, name
        else:  # stop-gradient on the main network
            assert param.grad is None, name
    # and the task loss does not reach the compression function
    backbone.zero_grad(set_to_none=True)
    out = backbone.run(x, backbone.initial_state(3), starts)
    out.output.square().mean().backward()
    assert all(p.grad is None for n, p in backbone.named_parameters() if n in compression)

    params = [p for n, p in backbone.named_parameters() if n in compression]
    losses = []
    for _ in range(6):  # a few plain gradient steps on f_c alone
        loss = backbone.run(x, backbone.initial_state(3), starts).aux_losses[
            "attention_reconstruction"
        ]
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for param, grad in zip(params, grads, strict=True):
                param -= 0.3 * grad
        losses.append(loss.item())
    assert losses[0] > 0 and losses[-1] < 0.5 * losses[0]


def test_trace_mode_loss_and_bad_settings() -> None:
    backbone = build(memory_length=1, compression_rate=2)
    x = torch.randn(6, 2, 5)
    starts = torch.zeros(6, 2, dtype=torch.bool)
    out = backbone.run(x, backbone.initial_state(2), starts, trace=True, stats=True)
    assert out.trace.hidden.shape == (6, 2, 2, 1, 16)  # the full state per step
    assert out.aux_losses["attention_reconstruction"].item() > 0
    # entries of steps 0..4 leave after steps 1..5 and complete groups after steps 2 and 4
    assert out.stats["compressions_per_step"].item() == pytest.approx(2 / 6)
    with pytest.raises(ValueError, match="valid compressions: pool, conv"):
        small_backbone("compressive", compression="max")
    with pytest.raises(ValueError, match="compression_rate must be a positive int"):
        small_backbone("compressive", compression_rate=0)


def test_explicit_distance_attention_equals_transformer_xl_on_a_window() -> None:
    torch.manual_seed(0)
    attn = RelativeMultiHeadAttention(16, 2)
    b, t, m = 2, 5, 3
    h, memory = torch.randn(b, t, 16), torch.randn(b, m, 16)
    starts = torch.zeros(t, b, dtype=torch.bool)
    starts[2, 1] = True
    allowed = window_mask(torch.ones(b, m, dtype=torch.bool), starts, m)  # (B, T, M+T)
    keys, values = attn.project_memory(torch.cat((memory, h), dim=1))
    # query i sits at M + i, key j at j: distance M + i - j
    distance = (torch.arange(t)[:, None] + m - torch.arange(m + t)[None, :]).clamp(0, m)
    with torch.no_grad():
        got = relative_attention(
            attn, h, keys, values, allowed, distance.expand(b, t, m + t), m + 1
        )
        expected = naive_relative_attention(attn, h, memory, allowed)
    # float32 only (the sinusoids are float32): a tolerance relative to the outputs' magnitude
    assert close(got, expected, F32_REL)


def perturbed(**overrides) -> CompressiveTransformer:
    """A small backbone whose compression is no mean pooling and whose LayerNorms are no
    identity, so that every cached projection differs from its contents."""
    backbone = build(**overrides)
    gen = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for param in backbone.parameters():
            param.add_(0.2 * torch.randn(param.shape, generator=gen, dtype=param.dtype))
    backbone.on_parameters_changed()
    return backbone


def act(backbone, x, starts, state):
    """Acting steps (``Backbone.step`` in inference mode, as a rollout takes them) from a
    copy of ``state`` (a step advances its state in place) -> outputs (T, B, D), traces and
    the state after the last step, its slots as the steps left them (rings)."""
    outputs, traces = [], []
    state = clone_state(state)
    with torch.inference_mode():
        for t in range(x.shape[0]):
            out = backbone.step(x[t : t + 1], state, starts[t : t + 1], trace=True)
            assert out.aux_losses == {}  # the acting path, not a sequence pass
            outputs.append(out.output)
            traces.append(out.trace)
            state = out.state
    trace = type(traces[0])(*(torch.cat(f) for f in zip(*traces, strict=True)))
    return torch.cat(outputs), trace, state


def in_use(state: CompressiveState) -> torch.Tensor:
    """(B, 1, Mc + M, 1): the [compressed ; FIFO] slots of the caches that hold a step."""
    return torch.cat((state.compressed_valid, state.valid), dim=1)[:, None, :, None]


def assert_caches_project_contents(backbone, state: CompressiveState) -> None:
    """The keys and values of every slot in use are its contents' projections with the
    current weights, and those of the compressed slots not in use zero."""
    with torch.no_grad():
        expect = backbone.refresh_state(state)
    mc = state.compressed.shape[2]
    for got, want in ((state.keys, expect.keys), (state.values, expect.values)):
        assert close(got.where(in_use(state), 0.0), want.where(in_use(state), 0.0), F64_REL)
        unused = ~state.compressed_valid[:, None, :, None]  # (B, 1, Mc, 1)
        assert not got[:, :, :mc].where(unused, 0.0).any()
        assert not want[:, :, :mc].where(unused, 0.0).any()


@pytest.mark.parametrize(("m", "c", "mc"), [(3, 2, 2), (2, 3, 3), (0, 2, 2), (4, 1, 2)])
def test_cached_acting_equals_the_uncached_sequence_over_many_steps(
    m: int, c: int, mc: int, float64: None
) -> None:
    """Acting projects only each step's own input and the slot it may compress, over the
    keys and values its state caches; a sequence pass from the same memory without caches
    projects all of it from the contents. Over many steps, episode starts and compressions
    (the compressed memory filling, overflowing and cleared) they agree, and so do the
    states they leave."""
    backbone = perturbed(memory_length=m, compression_rate=c, compressed_length=mc)
    t, b = 70, 3
    gen = torch.Generator().manual_seed(8)
    x = torch.randn(t + 30, b, 5, generator=gen)
    starts = torch.rand(t + 30, b, generator=gen) < 0.04
    starts[0] = True
    starts[50, 1] = True
    # a memory carried in, left by a sequence pass
    with torch.no_grad():
        carried = backbone.run(x[:30], backbone.initial_state(b), starts[:30]).state
    x, starts = x[30:], starts[30:]
    y_act, trace, acted = act(backbone, x, starts, carried)
    with torch.no_grad():
        seq = backbone.run(x, backbone.without_caches(carried), starts)
        traced = backbone.run(x, backbone.without_caches(carried), starts, trace=True)
    assert close(y_act, seq.output, F64_REL)
    assert close(traced.output, seq.output, F64_REL)
    assert seq.state.keys.shape == acted.keys.shape
    acted = backbone.ordered(acted)  # the steps leave rings; a sequence pass, slots oldest first
    for name, a, s in zip(CompressiveState._fields, acted, seq.state, strict=True):
        if name in ("keys", "values"):  # a slot not in use may hold a stale projection
            a, s = a.where(in_use(acted), 0.0), s.where(in_use(acted), 0.0)
        assert close(a, s, F64_REL), name
    assert_caches_project_contents(backbone, acted)
    assert_caches_project_contents(backbone, seq.state)
    # the trace is the state before each step without caches, acting and in sequence alike
    assert trace.keys.numel() == trace.values.numel() == 0
    for a, s in zip(trace, traced.trace, strict=True):
        assert close(a, s, F64_REL)
    # what was exercised: compressed memories filled, overflowed (mc slots in use) and cleared
    in_use_count = trace.compressed_valid.sum(-1)  # (T, B)
    assert (in_use_count == mc).any() and (in_use_count[1:] < in_use_count[:-1]).any()


def test_refresh_state_follows_new_weights(float64: None) -> None:
    """A state's keys and values are data: an acting step takes them as they are, and after
    a weight change `refresh_state` projects them again with the new weights, so acting
    from the refreshed state equals a sequence pass from the contents."""
    backbone = perturbed(memory_length=3, compression_rate=2, compressed_length=3)
    b = 2
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(24, b, 5, generator=gen)
    starts = torch.zeros(24, b, dtype=torch.bool)
    starts[0] = True
    _, _, state = act(backbone, x[:16], starts[:16], backbone.initial_state(b))
    assert state.compressed_valid.all()
    with torch.no_grad():  # an optimizer step, as it writes the weights
        for param in backbone.parameters():
            param.add_(0.1 * torch.randn(param.shape, generator=gen, dtype=param.dtype))
    backbone.on_parameters_changed()
    later, later_starts = x[16:], starts[16:]
    with torch.no_grad():
        expect = backbone.run(later, backbone.without_caches(state), later_starts).output
        refreshed = backbone.refresh_state(state)
    assert_caches_project_contents(backbone, refreshed)
    y_fresh, _, _ = act(backbone, later, later_starts, refreshed)
    y_stale, _, _ = act(backbone, later, later_starts, state)
    assert close(y_fresh, expect, F64_REL)
    assert not close(y_stale, expect, 1e-3)  # the old weights' keys and values, as given


def test_without_caches_and_refresh_state_round_trip(float64: None) -> None:
    """`without_caches` keeps a third of the state's memory bytes (the contents, not their
    keys and values); `refresh_state` gives the keys and values back, and every path
    (acting, a sequence pass, gradients of a training pass) takes a state without them as
    it takes the state it came from."""
    backbone = perturbed(memory_length=3, compression_rate=2, compressed_length=2)
    b = 3
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(30, b, 5, generator=gen)
    starts = torch.rand(30, b, generator=gen) < 0.05
    starts[0] = True
    _, _, state = act(backbone, x[:20], starts[:20], backbone.initial_state(b))
    dropped = backbone.without_caches(state)
    assert dropped.keys.numel() == dropped.values.numel() == 0
    assert state_nbytes(dropped) < 0.4 * state_nbytes(state)
    with torch.no_grad():
        back = backbone.refresh_state(dropped)  # its slots oldest first
    assert backbone.is_ring(state) and not backbone.is_ring(back)
    for name, a, s in zip(CompressiveState._fields, back, backbone.ordered(state), strict=True):
        if name in ("keys", "values"):
            a, s = a.where(in_use(back), 0.0), s.where(in_use(back), 0.0)
        assert close(a, s, F64_REL), name
    later, later_starts = x[20:], starts[20:]
    y_act, _, _ = act(backbone, later, later_starts, state)
    for given in (dropped, back):
        assert close(act(backbone, later, later_starts, given)[0], y_act, F64_REL)
        with torch.no_grad():
            assert close(backbone.run(later, given, later_starts).output, y_act, F64_REL)

    # a training pass: the memory's keys and values get their gradient through the
    # projections, whether a minibatch refreshes a kept state with gradients on (the
    # rollout buffer) or the pass projects a state without caches itself
    def gradients(given) -> dict[str, torch.Tensor]:
        backbone.zero_grad(set_to_none=True)
        memory = given() if callable(given) else given
        out = backbone.run(later, memory, later_starts)
        assert not any(field.requires_grad for field in out.state)  # the memory is data
        (out.output.square().mean() + out.aux_losses["attention_reconstruction"]).backward()
        return {n: p.grad.clone() for n, p in backbone.named_parameters() if p.grad is not None}

    projected = gradients(dropped)
    refreshed = gradients(lambda: backbone.refresh_state(dropped))
    assert projected.keys() == refreshed.keys()
    for name, grad in projected.items():
        assert close(refreshed[name], grad, F64_REL), name
    # the keys of the memory take part: without gradient through them, W_kE's differs
    with torch.no_grad():
        frozen = backbone.refresh_state(dropped)
    key_value = "blocks.0.attention.key_value.weight"
    assert not close(gradients(frozen)[key_value], projected[key_value], 1e-6)


def test_read_slots_reads_each_envs_ring_oldest_first() -> None:
    gen = torch.Generator().manual_seed(2)
    parent = torch.randn(3, 2, 7, 4, generator=gen)
    position = torch.tensor([1, 0, 4])
    order = ring_order(position, 5)
    assert order.tolist() == [[1, 2, 3, 4, 0], [0, 1, 2, 3, 4], [4, 0, 1, 2, 3]]
    for memory in (
        parent[:, :, :5],  # a slice of a contiguous tensor
        parent[:1, :, :5].expand(3, -1, -1, -1),  # one env's memory for three
        parent[:, :, :5].transpose(0, 1).contiguous().transpose(0, 1),  # envs not outermost
        parent.transpose(2, 3).contiguous().transpose(2, 3)[:, :, :5],  # slots not dense
    ):
        before = memory.clone()
        out = read_slots(memory, order)
        for env in range(3):
            start = int(position[env])
            want = torch.cat((memory[env, :, start:], memory[env, :, :start]), dim=1)
            assert torch.equal(out[env], want)
        out.add_(1.0)  # a copy: the memory stays as it is
        assert torch.equal(memory, before)


def test_rings_wrapped_many_times_equal_the_shifted_memory(float64: None) -> None:
    """Acting steps write each step into the FIFO's oldest slot and each compression into
    the compressed memory's, in place; after the rings have wrapped many times (with
    episode starts between), their slots read oldest first (`ordered`) are the memory a
    sequence pass shifts step by step, and the outputs agree."""
    m, c, mc = 3, 2, 2
    backbone = perturbed(memory_length=m, compression_rate=c, compressed_length=mc)
    t, b = 160, 3
    gen = torch.Generator().manual_seed(21)
    x = torch.randn(t, b, 5, generator=gen)
    starts = torch.rand(t, b, generator=gen) < 0.03
    starts[0] = True
    state = backbone.initial_state(b)
    outputs, wrapped = [], torch.zeros(b, dtype=torch.long)
    with torch.inference_mode():
        for step in range(t):
            hidden = state.hidden
            out = backbone.step(x[step : step + 1], state, starts[step : step + 1])
            assert out.state.hidden is hidden  # advanced in place, no copy of the memory
            wrapped += (out.state.compressed_position < state.compressed_position).long()
            outputs.append(out.output)
            state = out.state
            if step in (40, 97, t - 1):
                with torch.no_grad():
                    seq = backbone.run(x[: step + 1], backbone.initial_state(b), starts[: step + 1])
                assert close(torch.cat(outputs), seq.output, F64_REL)
                acted = backbone.ordered(state)
                for name, a, s in zip(CompressiveState._fields, acted, seq.state, strict=True):
                    if name in ("keys", "values"):  # a slot not in use may hold a stale one
                        a, s = a.where(in_use(acted), 0.0), s.where(in_use(acted), 0.0)
                    assert close(a, s, F64_REL), (step, name)
    assert (wrapped >= 10).all()  # every env's compressed ring went round many times


def test_an_episode_start_empties_the_rings_wherever_they_stand(float64: None) -> None:
    """An episode start leaves the memory of its env as a sequence pass does, whatever the
    rings' positions: nothing carried in is attended to, the step itself only is in the
    FIFO, the compressed slots are out of use and read as zeros; other envs keep theirs."""
    m, c, mc = 4, 2, 3
    backbone = perturbed(memory_length=m, compression_rate=c, compressed_length=mc)
    t, b = 25, 2
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(t + 1, b, 5, generator=gen)
    starts = torch.zeros(t + 1, b, dtype=torch.bool)
    starts[0] = True
    starts[t, 0] = True  # env 0 starts anew at the last step
    _, _, state = act(backbone, x[:t], starts[:t], backbone.initial_state(b))
    assert bool(state.position.any() & state.compressed_position.any())
    y, _, after = act(backbone, x[t:], starts[t:], state)
    with torch.no_grad():
        seq = backbone.run(x, backbone.initial_state(b), starts)
        fresh = backbone.run(x[t:, :1], backbone.initial_state(1), starts[t:, :1])
    assert close(y, seq.output[t:], F64_REL)
    assert close(y[:, 0], fresh.output[:, 0], F64_REL)  # env 0 as from an empty memory
    ordered = backbone.ordered(after)
    assert ordered.valid[0].tolist() == [False] * (m - 1) + [True]
    assert not ordered.compressed_valid[0].any() and not ordered.compressed[0].any()
    assert ordered.compressed_valid[1].all()


def test_run_leaves_a_ring_state_as_it_is_and_a_saved_ring_state_resumes(float64: None) -> None:
    """`run` (one step or many, traced or not) never writes into the state it is given,
    and returns its slots oldest first; a ring state saved as arrays and restored (a
    checkpoint) acts on as the live one does."""
    backbone = perturbed(memory_length=3, compression_rate=2, compressed_length=2)
    b = 2
    gen = torch.Generator().manual_seed(9)
    x = torch.randn(30, b, 5, generator=gen)
    starts = torch.zeros(30, b, dtype=torch.bool)
    starts[0] = True
    _, _, state = act(backbone, x[:17], starts[:17], backbone.initial_state(b))
    assert bool(state.position.any())
    kept = clone_state(state)
    with torch.no_grad():
        for n, trace in ((1, False), (1, True), (5, True), (5, False)):
            out = backbone.run(x[17 : 17 + n], state, starts[17 : 17 + n], trace=trace)
            assert not (out.state.position.any() or out.state.compressed_position.any())
            for a, s in zip(state, kept, strict=True):
                assert torch.equal(a, s)
    restored = state_from_numpy(state, state_to_numpy(state), "cpu")
    y_live, _, _ = act(backbone, x[17:], starts[17:], state)
    y_restored, _, _ = act(backbone, x[17:], starts[17:], restored)
    assert torch.equal(y_restored, y_live)
