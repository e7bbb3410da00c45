"""Compressive Transformer: backbone ``compressive``.

Rae, Potapenko, Jayakumar, Hillier and Lillicrap 2019, "Compressive Transformers for
Long-Range Sequence Modelling" (arXiv 1911.05507), section 3 ("Model"): the compressed
memory, the compression functions and the attention-reconstruction loss; over Transformer-XL's
segment memory (Dai et al. 2019, arXiv 1901.02860, section 3.2).

Legend: T steps, B envs, L layers, D model width, H heads, E head width, M FIFO slots
(``memory_length``), Mc compressed slots (``compressed_length``), c compression rate
(``compression_rate``), P = c - 1 pending slots, X = P + M + T entries of the eviction
stream, K = Mc + T + M + T keys.

Memory of layer l, per env (all of it stop-gradient):

* ``m``: a FIFO of the layer's inputs of the last M steps (as in Transformer-XL). After
  step t the input of step t enters and the oldest entry is evicted;
* ``cm``: the compressed memory, the last Mc outputs of the compression function
  ``f_c: R^{c x D} -> R^{1 x D}`` (the reference's ``R^{n_s x d} -> R^{floor(n_s/c) x d}``
  with one step per segment);
* a pending buffer of the evicted entries not yet compressed (fewer than c). When the c-th
  entry arrives, ``cm <- [cm ; f_c(pending)]`` (oldest compressed slot dropped beyond Mc).
  Keeping the pending entries in the state makes acting step by step and running a
  sequence compress the same entries at the same moments.

Compression functions (``compression``): ``pool``, mean pooling over the c entries
(kernel = stride = c); ``conv``, a 1-D convolution with kernel = stride = c, one per layer,
initialised to mean pooling.

Attention of layer l over ``[cm ; m ; h]`` (the paper's concatenation of the compressed and the FIFO memory), with a
pre-LayerNorm (TrXL-I style) block ``h + MHA(LN(.))``, ``+ MLP(LN(.))``. Positions:
Transformer-XL relative attention (Dai et al. 2019, section 3.3) with
the parameters of [`txrl.nn.attention.RelativeMultiHeadAttention`][txrl.nn.attention.RelativeMultiHeadAttention]; the distance of a
FIFO entry is its distance in steps (0..M), the compressed slot of recency rank r (0 the
newest) sits at distance ``M + 1 + r``, i.e. the index distance in ``[cm ; m ; h]`` of the
paper. In sequence mode, a compression made within the sequence is visible to the steps
after it, exactly as when acting.

Attention-reconstruction loss (the paper's better-performing auxiliary loss)::

    L^attn = || attn(h, old_mem) - attn(h, f_c(old_mem)) ||_2^2

with attn the layer's content-based attention (its query/key/value maps, no positions),
h the layer's inputs of the steps of the call, ``old_mem`` the entries compressed during
the call. Stop-gradient on the main network as in the paper: h, old_mem and the attention
parameters are detached, so the loss trains the compression function only, and the task
loss does not reach the compression function (compressed memories are stop-gradient
memory). Returned as ``aux_losses["attention_reconstruction"]``, averaged over layers, the
envs that compressed anything and the squared entries; zero when nothing was compressed.
With ``pool`` it has no parameters to train (a diagnostic then). An acting step (below)
returns no auxiliary loss: nothing trains on it.

Episode starts clear the FIFO, the compressed memory and the pending buffer.

Caches and cost: the state also holds each layer's content keys ``W_kE LN(e)`` and values
``W_v LN(e)`` of its memory entries e, ``[cm ; m]`` in that order, as Transformer-XL keeps
those of its memory (Dai et al. 2019, section 3.2: the memory is stop-gradient, so they
change with the weights only). An acting step (one step, gradients off, no recorder)
projects only its own input and the slot that f_c may make after it, attends over the
cached keys and values in place and moves the memory on by one slot: O(L (c D^2 + (M + Mc) D))
per env, where projecting the whole memory again costs O(L (M + Mc) D^2). A sequence pass
takes the carried memory's keys and values from the state, or projects them itself (with
gradient into the projections) from a state without them, and projects the steps and the
compressions made within the call. ``refresh_state`` projects them again with the current
weights (learners call it before each rollout, the rollout buffer on every minibatch's
segment states, with gradient); ``without_caches`` drops them.

Rings: the FIFO and the compressed memory, and their keys and values, are ring buffers
with a write position per env (`CompressiveState`), as TrXL's memory is
(`txrl.nn.memory.MemoryState`). `step`, an acting step, writes the step into the FIFO's
oldest slot and a compression into the compressed memory's oldest slot, in place, where
moving the memory on by shifting it would copy all of it (and its caches) at every step.
Attention depends on a slot's place only through its distance, which the step reads from
the positions (each key's distance, the rest of the score permutation-invariant), so it
attends over the slots as they lie. `run` leaves its input as it is and returns slots
oldest first (`ordered`); a sequence pass and `refresh_state` lay a ring state out so
first.

Inspection: inside an [`txrl.nn.attention.AttentionRecorder`][txrl.nn.attention.AttentionRecorder] each layer hands out its
softmax weights over ``[cm ; fresh ; m ; h]`` (`relative_attention`), the recorder's
explicit-softmax path beside the fused one; ``txrl inspect`` draws them over the raw window
and over the compressed slots (`txrl.inspect.layers.compressed_slots` names the steps
each slot summarises).

Trace: the state before each step without its keys and values (``without_caches``, its
slots as they lie; the protocol's default ``state_at`` returns it, and a sequence pass from
it projects them), i.e.
``L * (M + Mc + c - 1) * D`` floats plus ``M + Mc + c - 1`` flags per step and env: a window
rebuild would need the last ``M + c * Mc`` steps of layer inputs and the compression
function's outputs as they were. With ``trace=True`` a sequence is run one step at a time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar, NamedTuple, cast

import torch
import torch.nn.functional as F
from torch import nn

from txrl.backbones.compressive import CompressiveConfig
from txrl.nn import attention as nn_attention
from txrl.nn.attention import RecordedAttention, RelativeMultiHeadAttention, RingPlan, split_heads
from txrl.nn.blocks import PreNormBlock
from txrl.nn.memory import memory_in_use
from txrl.nn.pluggable_attention import active_recorder, key_distances
from txrl.nn.protocol import Backbone, BackboneOutput
from txrl.nn.state import clone_state, index_state
from txrl.nn.window import episode_ids, next_valid, slide, window_mask


class CompressiveState(NamedTuple):
    """Per-env memory, env on axis 0 of every field (also the per-step trace).

    The FIFO and the compressed slots (and their keys and values) are rings: FIFO slot
    ``(position + j) mod M`` holds the j-th oldest entry, compressed slot
    ``(compressed_position + i) mod Mc`` the i-th oldest, so an acting step writes one slot
    of each in place instead of shifting the memory (`CompressiveTransformer.step`). A
    compressed slot not in use may then hold a stale entry (masked everywhere it is read);
    `CompressiveTransformer.ordered` lays the slots out oldest first with those zero, the
    layout `CompressiveTransformer.run` returns and a trace holds."""

    hidden: torch.Tensor  # (B, L, M, D) FIFO of layer inputs of the last M steps
    valid: torch.Tensor  # (B, M) bool, slot holds a step of the current episode
    compressed: torch.Tensor  # (B, L, Mc, D) compressed memory, oldest first
    compressed_valid: torch.Tensor  # (B, Mc) bool
    pending: torch.Tensor  # (B, L, P, D) evicted entries awaiting compression, oldest first
    pending_valid: torch.Tensor  # (B, P) bool
    # caches, derived from the weights and the slots above: the content keys W_kE LN(.) and
    # values W_v LN(.) of [compressed ; hidden], the order a step attends to them in; zero
    # in the compressed slots not in use. (B, L, 0, D) when dropped (`without_caches`)
    keys: torch.Tensor  # (B, L, Mc + M, D)
    values: torch.Tensor  # (B, L, Mc + M, D)
    # rings: the FIFO's oldest slot (the next step's) and the compressed memory's oldest
    # slot (the next compression's); 0 where the slots lie oldest first (`ordered`)
    position: torch.Tensor  # (B,) long
    compressed_position: torch.Tensor  # (B,) long


class Compression(nn.Module):
    """f_c: c entries -> 1, mean pooling or a 1-D convolution with kernel = stride = c."""

    def __init__(self, kind: str, d_model: int, rate: int) -> None:
        super().__init__()
        self.kind = kind
        self.rate = rate
        self.conv: nn.Conv1d | None = None
        if kind == "conv":
            self.conv = nn.Conv1d(d_model, d_model, kernel_size=rate, stride=rate)
            assert self.conv.bias is not None  # built with a bias (Conv1d's default)
            with torch.no_grad():  # start as mean pooling
                self.conv.weight.copy_(torch.eye(d_model)[:, :, None].expand(-1, -1, rate) / rate)
                self.conv.bias.zero_()

    def forward(self, groups: torch.Tensor) -> torch.Tensor:
        """``groups`` (..., c, D), oldest first -> (..., D)."""
        if self.conv is None:
            return groups.mean(dim=-2)
        # sum_k W[:, :, k] x_k + b, the convolution at one output position
        bias = self.conv.bias
        assert bias is not None  # built with a bias (Conv1d's default)
        return torch.einsum("...cd,odc->...o", groups, self.conv.weight) + bias


def relative_attention(
    attn: RelativeMultiHeadAttention,
    z: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    allowed: torch.Tensor,
    distance: torch.Tensor,
    n_distances: int,
) -> torch.Tensor:
    """Eq. (9) of Transformer-XL with an explicit distance per (query, key) pair.

    ``z`` (B, T, D) normalised queries, ``keys``/``values`` (B, K, D), ``allowed`` (B, T, K),
    ``distance`` (B, T, K) long in [0, n_distances). Uses the parameters of ``attn``; the
    positional scores of the n distances are computed once and gathered per pair
    ([`txrl.nn.attention.relative_attention`][txrl.nn.attention.relative_attention]). Inside an
    [`txrl.nn.attention.AttentionRecorder`][txrl.nn.attention.AttentionRecorder] the weights (B, H, T, K) over
    ``[cm ; fresh ; m ; h]`` go to the recorder.
    """
    recorder = active_recorder()
    out, weights = nn_attention.relative_attention(
        attn, z, keys, values, allowed, distance, n_distances, with_weights=recorder is not None
    )
    if recorder is not None:
        assert weights is not None
        recorder.calls.append(RecordedAttention(attn, weights.detach(), allowed))
    return out


class CompressiveBlock(PreNormBlock):
    """Pre-LayerNorm block over [cm ; m ; h] plus this layer's compression function."""

    attention: RelativeMultiHeadAttention

    def __init__(self, config: CompressiveConfig) -> None:
        attention = RelativeMultiHeadAttention(config.d_model, config.n_heads, config.dropout)
        super().__init__(config, attention, output_relu=False)
        self.compress = Compression(config.compression, config.d_model, config.compression_rate)

    def project(self, entries: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Content keys and values ``W_kE LN(e)``, ``W_v LN(e)`` of memory entries (..., D)."""
        return self.attention.project_memory(self.norm_attention(entries))

    def content_attention(
        self, queries: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        """attn(h, mem) of the reconstruction loss, with the attention parameters detached.

        ``queries`` (B, T, D), ``memory`` (B, N, D), ``mask`` (B, N) -> (B, H, T, E). Rows
        with no allowed memory give an arbitrary finite value (the caller weights them 0).
        """
        attn, norm = self.attention, self.norm_attention
        hd, e = attn.n_heads, attn.head_dim
        weight, bias = norm.weight.detach(), norm.bias.detach()
        zq = F.layer_norm(queries, norm.normalized_shape, weight, bias, norm.eps)
        zm = F.layer_norm(memory, norm.normalized_shape, weight, bias, norm.eps)
        q = split_heads(F.linear(zq, attn.query.weight.detach()), hd)  # (B, H, T, E)
        kv = F.linear(zm, attn.key_value.weight.detach())  # (B, N, 2D)
        k, v = (split_heads(part, hd) for part in kv.chunk(2, dim=-1))  # (B, H, N, E)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(e)  # (B, H, T, N)
        scores = scores.masked_fill(~mask[:, None, None, :], -1e9)
        return scores.softmax(dim=-1) @ v  # (B, H, T, E)


class CompressiveTransformer(Backbone):
    """Compressive Transformer behind the backbone protocol (see the module docstring)."""

    graph_capturable = True
    #: state fields added after runs saved their memory, whose initial value is what such
    #: a memory holds (`txrl.sb3.algorithm.with_cache_placeholders`): the rings' positions,
    #: 0 for slots oldest first
    added_state_fields: ClassVar[tuple[str, ...]] = ("position", "compressed_position")

    def __init__(self, config: CompressiveConfig) -> None:
        super().__init__()
        self.config = config
        self.input_dim = config.input_dim
        self.output_dim = config.d_model
        self.memory_length = config.memory_length
        self.embed = nn.Linear(config.input_dim, config.d_model)
        self.blocks = nn.ModuleList(CompressiveBlock(config) for _ in range(config.n_layers))

    def initial_state(
        self, batch_size: int, device: torch.device | str | None = None
    ) -> CompressiveState:
        c = self.config
        placement = self.state_placement(device)
        device = placement["device"]
        p = c.compression_rate - 1

        def zeros(slots: int) -> torch.Tensor:
            return torch.zeros(batch_size, c.n_layers, slots, c.d_model, **placement)

        def empty(slots: int) -> torch.Tensor:
            return torch.zeros(batch_size, slots, dtype=torch.bool, device=device)

        return CompressiveState(
            hidden=zeros(c.memory_length),
            valid=empty(c.memory_length),
            compressed=zeros(c.compressed_length),
            compressed_valid=empty(c.compressed_length),
            pending=zeros(p),
            pending_valid=empty(p),
            # no slot in use: what a step's bookkeeping leaves in unused slots
            keys=zeros(c.compressed_length + c.memory_length),
            values=zeros(c.compressed_length + c.memory_length),
            position=torch.zeros(batch_size, dtype=torch.long, device=device),
            compressed_position=torch.zeros(batch_size, dtype=torch.long, device=device),
        )

    # ------------------------------------------------------------------ caches

    def refresh_state(self, state: CompressiveState) -> CompressiveState:
        """Project the keys and values of the compressed and the FIFO memory again with the
        current weights (with gradients on, the projections get their gradient through
        memory, as in a sequence pass from a state without caches); zero in the compressed
        slots not in use, as a step leaves them. A state whose slots lie as rings is laid
        out oldest first first (`ordered`, its contents only: they carry no gradient), so
        that a sequence pass from it reads the keys and values as they are projected."""
        if self.is_ring(state):
            state = self.ordered(self.without_caches(state))
        # (B, Mc + M, 1): 0 for a compressed slot not in use
        in_use = F.pad(state.compressed_valid, (0, state.valid.shape[1]), value=True)
        in_use = in_use.to(state.compressed.dtype)[:, :, None]
        keys, values = [], []
        for layer, block in enumerate(cast("Sequence[CompressiveBlock]", self.blocks)):
            entries = torch.cat((state.compressed[:, layer], state.hidden[:, layer]), dim=1)
            k, v = block.project(entries)  # (B, Mc + M, D) each
            keys.append(k * in_use)
            values.append(v * in_use)
        return state._replace(keys=by_layer(keys), values=by_layer(values))

    def without_caches(self, state: CompressiveState) -> CompressiveState:
        """``state`` with no keys and values, (B, L, 0, D) each (two thirds of its bytes):
        a sequence pass, an acting step and `refresh_state` project them again."""
        empty = state.hidden[:, :, :0]  # (B, L, 0, D), no storage of its own
        return state._replace(keys=empty, values=empty)

    @staticmethod
    def has_caches(state: CompressiveState) -> bool:
        """Whether ``state`` holds its keys and values (not `without_caches`)."""
        return state.keys.shape[2] == state.compressed.shape[2] + state.hidden.shape[2]

    @staticmethod
    def is_ring(state: CompressiveState) -> bool:
        """Whether ``state``'s slots do not lie oldest first (read on the host: one sync)."""
        return bool(torch.cat((state.position, state.compressed_position)).any())

    def ordered(self, state: CompressiveState) -> CompressiveState:
        """A copy of ``state`` with its rings laid out oldest first (both positions 0) and
        the compressed slots not in use zero (in the caches too), as a sequence pass and
        `initial_state` leave them; shares no slot tensor with ``state``, so an acting step
        may then advance ``state`` in place."""
        mc = state.compressed.shape[2]
        fifo = ring_order(state.position, state.hidden.shape[2])  # (B, M) slot of each entry
        compressed = ring_order(state.compressed_position, mc)  # (B, Mc)
        compressed_valid = state.compressed_valid.gather(1, compressed)
        unused = ~compressed_valid[:, None, :, None]  # (B, 1, Mc, 1)
        keys, values = state.keys, state.values
        if self.has_caches(state):
            both = torch.cat((compressed, mc + fifo), dim=1)  # (B, Mc + M)
            keys, values = (read_slots(cache, both) for cache in (keys, values))
            for cache in (keys, values):
                cache[:, :, :mc].masked_fill_(unused, 0.0)
        return state._replace(
            hidden=read_slots(state.hidden, fifo),
            valid=state.valid.gather(1, fifo),
            compressed=read_slots(state.compressed, compressed).masked_fill_(unused, 0.0),
            compressed_valid=compressed_valid,
            keys=keys,
            values=values,
            position=torch.zeros_like(state.position),
            compressed_position=torch.zeros_like(state.compressed_position),
        )

    # ------------------------------------------------------------------ the protocol

    def run(
        self,
        x: torch.Tensor,
        state: CompressiveState,
        episode_starts: torch.Tensor,
        *,
        trace: bool = False,
        stats: bool = False,
        next_state: bool = True,
    ) -> BackboneOutput:
        self.check_inputs(x, state, episode_starts)
        acting = self._acts(x[:1], stats)
        if not trace:
            if acting and x.shape[0] == 1:  # on a copy: `run` leaves its input as it is
                y, acted = self._act(x, clone_state(state), episode_starts)
                return BackboneOutput(y, self.ordered(acted) if next_state else None, None, {}, {})
            y, new_state, loss_sum, count, out_stats = self._segment(
                x, state, episode_starts, stats, next_state
            )
            aux = {"attention_reconstruction": loss_sum / count.clamp_min(1)}
            return BackboneOutput(y, new_state, None, aux, out_stats)
        # the trace is the state before each step (its caches left out, its slots as they
        # lie): run the steps one at a time
        if acting:
            state = clone_state(state)  # the acting steps advance it in place
        outputs, before = [], []
        loss_total: torch.Tensor = x.new_zeros(())
        count_total = torch.zeros((), dtype=torch.long, device=x.device)
        step_stats: list[dict[str, torch.Tensor]] = []
        for t in range(x.shape[0]):
            one_x, one_starts = x[t : t + 1], episode_starts[t : t + 1]
            if acting:
                out = self.step(one_x, state, one_starts, trace=True)
                assert out.trace is not None and out.state is not None  # asked for both
                y, state = out.output, out.state
                before.append(index_state(out.trace, 0))
            else:
                before.append(self.without_caches(state))
                y, after, loss_sum, count, one_stats = self._segment(
                    one_x, state, one_starts, stats
                )
                assert after is not None  # each step's state feeds the next
                state = after
                step_stats.append(one_stats)
                loss_total = loss_total + loss_sum
                count_total = count_total + count
            outputs.append(y)
        out_stats = {
            name: torch.stack([s[name] for s in step_stats]).mean()
            for name in (step_stats[0] if step_stats else ())
        }
        step_trace = CompressiveState(*(torch.stack(f) for f in zip(*before, strict=True)))
        aux = {} if acting else {"attention_reconstruction": loss_total / count_total.clamp_min(1)}
        final = self.ordered(state) if next_state else None
        return BackboneOutput(torch.cat(outputs), final, step_trace, aux, out_stats)

    def step(
        self,
        x: torch.Tensor,
        state: CompressiveState,
        episode_starts: torch.Tensor,
        *,
        trace: bool = False,
    ) -> BackboneOutput:
        """One acting step whose caller hands ``state`` over: an acting step (`_act`)
        writes the step into ``state``'s rings in place and returns it, copying nothing of
        the memory's size but the trace when asked for (the state before the step, its
        caches left out, its rings as they lie: a copy); anything else is `run`."""
        self.check_inputs(x, state, episode_starts)
        if x.shape[0] != 1 or not self._acts(x, stats=False):
            return self.run(x, state, episode_starts, trace=trace)
        if state.hidden.is_inference() and not torch.is_inference_mode_enabled():
            state = clone_state(state)  # torch forbids writing inference tensors outside it
        step_trace = None
        if trace:  # a copy: the step advances ``state`` in place
            before = self.without_caches(state)
            step_trace = CompressiveState(*(field[None].clone() for field in before))
        y, after = self._act(x, state, episode_starts)
        return BackboneOutput(y, after, step_trace, {}, {})

    # ------------------------------------------------------------------ acting

    def _acts(self, x: torch.Tensor, stats: bool) -> bool:
        """Whether a call is an acting step (`_act`): one step, gradients off, no
        diagnostics, no dropout, and no attention recorder (which takes a sequence pass's
        weights over ``[cm ; fresh ; m ; h]``)."""
        return (
            x.shape[0] == 1
            and not torch.is_grad_enabled()
            and not stats
            and not (self.training and self.config.dropout > 0.0)
            and active_recorder() is None
        )

    def _act(
        self, x: torch.Tensor, state: CompressiveState, episode_starts: torch.Tensor
    ) -> tuple[torch.Tensor, CompressiveState]:
        """One acting step: what `_segment` computes for T = 1, over the state's cached
        keys and values of ``[cm ; m]`` (projected first when it has none), so the step
        projects only its own input and the slot a compression may make: O(L (c D^2 +
        (M + Mc) D)) per env. x (1, B, I) -> output (1, B, D) and the state after the step,
        ``state`` itself with the step written into its rings in place (one FIFO slot, and
        one compressed slot where it compresses, of the contents and the caches: O(L D) per
        env written; the flags and the pending buffer are new tensors).

        For one step no compression made within the call is visible, and the keys
        ``[cm ; m ; h]`` lie at distances M + Mc, ..., 0 (the compressed slot of recency rank
        r at M + 1 + r, the FIFO's j-th oldest entry at M - j, the step at 0), which
        [`txrl.nn.attention.RelativeMultiHeadAttention.attend_one`][txrl.nn.attention.RelativeMultiHeadAttention.attend_one]
        reads per slot from the rings' positions, over the slots as they lie. The
        reconstruction loss is left out: nothing trains on an acting step.
        """
        cfg = self.config
        m, mc, c = cfg.memory_length, cfg.compressed_length, cfg.compression_rate
        p = c - 1
        if not self.has_caches(state):
            state = self.refresh_state(state)
        start = episode_starts[0]  # (B,)
        b, device = start.shape[0], start.device
        carry = ~start[:, None]  # (B, 1) the memory belongs to the step's episode
        carried = state.compressed_valid & carry  # (B, Mc)
        itself = torch.ones((b, 1), dtype=torch.bool, device=device)
        allowed = torch.cat((carried, state.valid & carry, itself), dim=1)[:, None]  # (B, 1, K)
        # each key's place in the distances M + Mc .. 0: the i-th oldest compressed slot at
        # i, the j-th oldest FIFO entry at Mc + j, the step last
        key_index = torch.cat(
            (
                ring_rank(state.compressed_position, mc),
                mc + ring_rank(state.position, m),
                torch.full((b, 1), mc + m, dtype=torch.long, device=device),
            ),
            dim=1,
        )[:, None]  # (B, 1, K)
        mask = torch.zeros(allowed.shape, dtype=state.keys.dtype, device=device)
        plan = RingPlan(key_index, mask.masked_fill_(~allowed, float("-inf")), None)
        # the entry leaving the FIFO after the step (its oldest, at ``position``; the step
        # itself when M = 0) moves on to the pending buffer if it is of the step's episode;
        # the c-th pending entry triggers a compression of the pending entries and it
        lanes = (torch.arange(b, device=device)[:, None], torch.arange(cfg.n_layers, device=device))
        oldest = state.position[:, None]  # (B, 1)
        pending_before = (state.pending_valid & carry).sum(dim=1)  # (B,)
        evict = state.valid.gather(1, oldest)[:, 0] & ~start if m else torch.ones_like(start)
        trigger = evict & (pending_before + 1 == c)  # (B,)
        n_kept = (carried.sum(dim=1) + trigger).clamp(max=mc)  # (B,)
        compressed_position = (state.compressed_position + trigger).remainder(mc)  # (B,)
        compressed_valid = ring_rank(compressed_position, mc) >= mc - n_kept[:, None]
        n_pending = (pending_before + evict) % c  # (B,)
        pending_valid = torch.arange(p, device=device)[None, :] >= p - n_pending[:, None]

        h = self.embed(x[0])  # (B, I) -> (B, D)
        at_oldest = (*lanes, oldest)  # an index tuple (a star inside [] needs Python 3.11)
        leaving = state.hidden[at_oldest] if m else None  # (B, L, D)
        inputs, new_keys, new_values, made, made_keys, made_values = [], [], [], [], [], []
        for layer, block in enumerate(cast("Sequence[CompressiveBlock]", self.blocks)):
            inputs.append(h)
            z = block.attention_input(h)
            key, value = block.attention.project_memory(z)  # (B, D) each
            memory = (state.keys[:, layer], state.values[:, layer])  # (B, Mc + M, D) each
            attended = block.attention.attend_one(z, key, value, memory, plan)
            # f_c of the pending entries and the leaving one: kept where it triggers
            gone = h if leaving is None else leaving[:, layer]
            groups = torch.cat((state.pending[:, layer], gone[:, None]), dim=1)  # (B, c, D)
            made.append(block.compress(groups))
            made_k, made_v = block.project(made[-1])
            new_keys.append(key)
            new_values.append(value)
            made_keys.append(made_k)
            made_values.append(made_v)
            h = block(h, attended)

        # the step over the FIFO's oldest slot; where it compresses, the compression over
        # the compressed memory's oldest slot (elsewhere that slot keeps what it holds)
        steps = torch.stack(inputs, dim=1)  # (B, L, D)
        slot = state.compressed_position[:, None]  # (B, 1)
        written = trigger[:, None, None]
        for field, step_entry, compressed_entry in (
            (state.hidden, steps, None),
            (state.compressed, None, by_layer(made)),
            (state.keys, by_layer(new_keys), by_layer(made_keys)),
            (state.values, by_layer(new_values), by_layer(made_values)),
        ):  # entries (B, L, D)
            if step_entry is not None and m:
                offset = field.shape[2] - m  # the FIFO's slots come last
                at_step = (*lanes, offset + oldest)
                field[at_step] = step_entry
            if compressed_entry is not None:
                at_slot = (*lanes, slot)
                field[at_slot] = torch.where(written, compressed_entry, field[at_slot])
        valid = state.valid & carry
        leaving = steps if leaving is None else leaving  # (B, L, D)
        new_state = state._replace(
            valid=valid.scatter(1, oldest, True) if m else valid,
            compressed_valid=compressed_valid,
            pending=slide(state.pending, leaving[:, :, None], dim=2),
            pending_valid=pending_valid,
            position=(state.position + 1).remainder(max(m, 1)),
            compressed_position=compressed_position,
        )
        return h[None], new_state

    # ------------------------------------------------------------------ sequences

    def _segment(
        self,
        x: torch.Tensor,
        state: CompressiveState,
        episode_starts: torch.Tensor,
        stats: bool,
        next_state: bool = True,
    ) -> tuple[
        torch.Tensor, CompressiveState | None, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]
    ]:
        """One call in sequence mode -> output, new state (None unless ``next_state``: it
        skips the memory's concatenations), reconstruction loss sum and env count."""
        cfg = self.config
        t, b = episode_starts.shape
        m, mc, c = cfg.memory_length, cfg.compressed_length, cfg.compression_rate
        p = c - 1
        device = x.device
        if self.is_ring(state):  # as an acting step left it
            state = self.ordered(state)
        if not self.has_caches(state):
            state = self.refresh_state(state)  # with gradients on, into the projections
        # ---- which evictions happen after which step, and which complete a group of c
        # the eviction stream [pending ; FIFO ; current steps]: (B, X) episode ids (-1 invalid,
        # 0 carried over)
        memory_episode, step_episode = episode_ids(
            torch.cat((state.pending_valid, state.valid), dim=1), episode_starts
        )  # (B, P+M), (B, T)
        stream_episode = torch.cat((memory_episode, step_episode), dim=1)
        x_len = stream_episode.shape[1]
        evicted_at = p + torch.arange(t, device=device)  # stream entry leaving after step i
        # only an entry of the step's own episode moves on to the pending buffer
        evict = stream_episode[:, evicted_at] == step_episode  # (B, T)
        evicted = torch.cat(
            (
                state.pending_valid,
                evict,
                torch.zeros(b, x_len - p - t, dtype=torch.bool, device=device),
            ),
            dim=1,
        )  # (B, X): entries in the pending buffer or compressed once the sequence is over
        earlier = torch.arange(x_len, device=device)[None, :] < evicted_at[:, None]  # (T, X)
        same = stream_episode[:, None, :] == step_episode[:, :, None]  # (B, T, X)
        count = (evicted[:, None, :] & same & earlier[None]).sum(-1)  # (B, T) earlier evictions
        # the c-th pending entry triggers a compression of the last c evicted entries
        trigger = evict & ((count + 1) % c == 0)  # (B, T)
        made = trigger.long().cumsum(dim=1)  # (B, T) compressions up to and including step i
        made_before = made - trigger.long()  # (B, T) compressions before step i

        # ---- what each step may attend to, and at which distance
        # carried compressed slot i (rank Mc-1-i) while fewer than Mc newer slots exist
        slot = torch.arange(mc, device=device)
        carried_ok = (
            state.compressed_valid[:, None, :]
            & (step_episode == 0)[:, :, None]
            & (slot[None, None, :] >= made_before[:, :, None])
        )  # (B, T, Mc)
        carried_distance = m + 1 + (mc - 1 - slot)[None, None, :] + made_before[:, :, None]
        # compression made after step j, seen by later steps i of its episode
        steps = torch.arange(t, device=device)
        newer = made_before[:, :, None] - made[:, None, :]  # (B, T, T) compressions after j's
        fresh_ok = (
            trigger[:, None, :]
            & (steps[None, :] < steps[:, None])[None]
            & (step_episode[:, None, :] == step_episode[:, :, None])
            & (newer < mc)
        )  # (B, T, T)
        fresh_distance = m + 1 + newer
        window_ok = window_mask(state.valid, episode_starts, m)  # (B, T, M+T)
        window_distance = key_distances(t, m + t, device)  # (T, M+T)
        allowed = torch.cat((carried_ok, fresh_ok, window_ok), dim=2)  # (B, T, K)
        n_distances = m + mc + 1
        distance = torch.cat(
            (
                carried_distance.expand(b, t, mc),
                fresh_distance,
                window_distance[None].expand(b, t, m + t),
            ),
            dim=2,
        ).clamp(0, n_distances - 1)  # (B, T, K)

        # ---- the compressed memory after the sequence: the last Mc compressions of its last episode
        last_episode = step_episode[:, -1:]  # (B, 1)
        keep = torch.cat(
            (
                state.compressed_valid & (last_episode == 0),
                trigger & (step_episode == last_episode),
            ),
            dim=1,
        )  # (B, Mc + T)
        rank = keep.flip(1).long().cumsum(dim=1).flip(1)  # 1 for the newest kept entry
        target = torch.where(keep & (rank <= mc), mc - rank, mc)  # slot, or mc: dropped
        n_kept = keep.long().sum(dim=1, keepdim=True).clamp(max=mc)  # (B, 1)
        compressed_valid = slot[None, :] >= mc - n_kept  # (B, Mc)
        # pending after the sequence: the entries evicted since the last compression
        n_pending = (evicted & (stream_episode == last_episode)).long().sum(dim=1) % c  # (B,)
        pending_valid = torch.arange(p, device=device)[None, :] >= p - n_pending[:, None]

        h = self.embed(x).transpose(0, 1)  # (T, B, I) -> (B, T, D)
        inputs, compressed, pending = [], [], []
        keys: list[torch.Tensor] = []
        values: list[torch.Tensor] = []
        loss_sum = h.new_zeros(())
        has_compressed = trigger.any(dim=1)  # (B,)

        def place(carried: torch.Tensor, fresh: torch.Tensor) -> torch.Tensor:
            """The compressed slots (B, Mc, D) after the call, from those carried in and the
            call's compressions (B, T, D); zero where none is kept."""
            candidates = torch.cat((carried, fresh), dim=1).detach()  # (B, Mc + T, D)
            placed = candidates.new_zeros(b, mc + 1, cfg.d_model).scatter(
                1, target[..., None].expand(-1, -1, cfg.d_model), candidates
            )
            return placed[:, :mc]

        for layer, block in enumerate(cast("Sequence[CompressiveBlock]", self.blocks)):
            inputs.append(h.detach())
            stream = torch.cat(
                (state.pending[:, layer], state.hidden[:, layer], h.detach()), dim=1
            )  # (B, X, D)
            # group ending at the entry evicted after step i: stream[i : i + c]
            groups = stream.unfold(1, c, 1)[:, :t].transpose(2, 3)  # (B, T, c, D)
            fresh_grad = block.compress(groups)  # (B, T, D), gradient into f_c only
            fresh = fresh_grad.detach()
            # keys and values of [cm ; fresh ; m ; h]: the carried memory's cached (projected
            # above when the state had none), the others projected here
            cached_k, cached_v = state.keys[:, layer], state.values[:, layer]  # (B, Mc + M, D)
            fresh_k, fresh_v = block.project(fresh)  # (B, T, D) each
            z = block.attention_input(h)
            step_k, step_v = block.attention.project_memory(z)  # (B, T, D) each
            attended = relative_attention(
                block.attention,
                z,
                torch.cat((cached_k[:, :mc], fresh_k, cached_k[:, mc:], step_k), dim=1),
                torch.cat((cached_v[:, :mc], fresh_v, cached_v[:, mc:], step_v), dim=1),
                allowed,
                distance,
                n_distances,
            )
            h_in = h
            h = block(h, attended)

            # L^attn = || attn(h, old_mem) - attn(h, f_c(old_mem)) ||^2 over this call's compressions
            queries = h_in.detach()
            old = block.content_attention(
                queries, groups.flatten(1, 2), trigger.repeat_interleave(c, dim=1)
            )
            new = block.content_attention(queries, fresh_grad, trigger)
            per_env = (old - new).square().mean(dim=(1, 2, 3))  # (B,)
            loss_sum = loss_sum + torch.where(has_compressed, per_env, 0.0).sum() / len(self.blocks)

            if next_state:
                compressed.append(place(state.compressed[:, layer], fresh))
                pending.append(stream[:, t : t + p])  # (B, P, D) the last P evicted entries
                for cache, cached, fresh_part, steps_part in (
                    (keys, cached_k, fresh_k, step_k),
                    (values, cached_v, fresh_v, step_v),
                ):
                    # stop-gradient: a refreshed state's keys may carry gradient
                    fifo = slide(cached[:, mc:].detach(), steps_part.detach(), dim=1)  # (B, M, D)
                    cache.append(torch.cat((place(cached[:, :mc], fresh_part), fifo), dim=1))

        new_state = (
            CompressiveState(
                hidden=slide(state.hidden, torch.stack(inputs, dim=1), dim=2),  # (B, L, M, D)
                valid=next_valid(state.valid, episode_starts),
                compressed=torch.stack(compressed, dim=1),  # (B, L, Mc, D)
                compressed_valid=compressed_valid,
                pending=torch.stack(pending, dim=1),  # (B, L, P, D)
                pending_valid=pending_valid,
                keys=torch.stack(keys, dim=1),  # (B, L, Mc + M, D)
                values=torch.stack(values, dim=1),
                position=torch.zeros_like(state.position),
                compressed_position=torch.zeros_like(state.compressed_position),
            )
            if next_state
            else None
        )
        out_stats: dict[str, torch.Tensor] = {}
        if stats:
            out_stats["memory_in_use"] = memory_in_use(state.valid)
            out_stats["compressed_in_use"] = state.compressed_valid.float().mean()
            out_stats["compressions_per_step"] = trigger.float().mean()
        count = has_compressed.long().sum()
        return h.transpose(0, 1), new_state, loss_sum, count, out_stats


def by_layer(tensors: list[torch.Tensor]) -> torch.Tensor:
    """Each layer's (B, ..., D) -> (B, L, ..., D); a view for one layer (no copy)."""
    return tensors[0].unsqueeze(1) if len(tensors) == 1 else torch.stack(tensors, dim=1)


def ring_rank(position: torch.Tensor, n: int) -> torch.Tensor:
    """How old each slot of rings of n slots (B, n) is, 0 the oldest, from their oldest
    slots ``position`` (B,): ``(slot - position) mod n``."""
    slots = torch.arange(n, device=position.device)
    return (slots[None, :] - position[:, None]).remainder(max(n, 1))


def ring_order(position: torch.Tensor, n: int) -> torch.Tensor:
    """The slots of rings of n slots from their oldest slots ``position`` (B,) on, oldest
    first (B, n): ``(position + i) mod n``."""
    slots = torch.arange(n, device=position.device)
    return (position[:, None] + slots[None, :]).remainder(max(n, 1))


def read_slots(memory: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """``out[b, l, i] = memory[b, l, order[b, i]]``, a new tensor (B, L, N, D) from
    ``memory`` (B, L, ., D) and ``order`` (B, N) long: one ``index_select`` of D-value rows
    (a ``gather`` with the index broadcast over D is several times slower on a CPU)."""
    b, depth, slots, d = memory.shape
    lanes = torch.arange(b * depth, device=order.device).view(b, depth, 1) * slots
    rows = (lanes + order[:, None, :]).flatten()  # (B * L * N,) rows of (B * L * slots, D)
    return memory.reshape(-1, d).index_select(0, rows).view(b, depth, order.shape[1], d)


def build_compressive(config: CompressiveConfig) -> CompressiveTransformer:
    return CompressiveTransformer(config)
