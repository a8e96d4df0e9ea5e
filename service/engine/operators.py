"""Per-operator FLOPs, bytes and time of one forward step, per GPU, vectorised over batch sizes.

Every row is for one tensor-parallel rank (tp splits heads, FFN/expert columns and the
vocabulary) summed over all layers along the step's critical path: pipeline stages run one after
the other for a step, so pp does not shorten the step; it adds stage sends (pp·v − 1 with v
interleaved virtual stages) and leaves each stage idle (pp−1)/pp of the step, the bubble of one
batch, which interleaving does not shorten (``Parallelism.pipeline_bubble_fraction``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import cast

import numpy as np
import numpy.typing as npt

from service.engine.accelerator_stack import AcceleratorStack
from service.engine.efficiency import EfficiencyParams
from service.engine.kernels import (
    FloatArray,
    GemmRates,
    Hardware,
    KernelCost,
    as_array,
    attention_cost,
    bound_of,
    collective_cost,
    gemm_cost,
    hardware_attention_flops_s,
    is_scalar,
    maximum,
    minimum,
    spread,
    sqrt,
    values,
    where,
    zero_cost,
    zeros_like,
)
from service.engine.mamba import (
    Mamba2Rank,
    conv_state_bytes_per_element,
    ssm_state_bytes_per_element,
)
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.engine.shapes import ModelShape

# Row kinds: GEMMs (weights), attention and the SSM scan (per-sequence cached state),
# memory-only kernels (gathers, conv1d), interconnect.
GEMM, ATTENTION, MEMORY, COMMUNICATION = "gemm", "attention", "memory", "communication"
# Bytes per element of the residual stream between kernels: engines keep it in bf16/fp16 at
# every weight precision (fp8 GEMMs quantise their inputs inside or right before the kernel).
RESIDUAL_STREAM_BYTES = 2.0


@dataclass(frozen=True, slots=True)
class AttentionGroup:
    """Sequences in a step that share a shape: ``new_tokens`` each, after ``past_tokens`` cached."""

    sequences: FloatArray
    new_tokens: FloatArray
    past_tokens: FloatArray

    @classmethod
    def of(
        cls, sequences: npt.ArrayLike, new_tokens: npt.ArrayLike, past_tokens: npt.ArrayLike
    ) -> AttentionGroup:
        """Build a group from scalars or arrays (broadcast together); floats stay floats."""
        if is_scalar(sequences) and is_scalar(new_tokens) and is_scalar(past_tokens):
            return cls(values(sequences), values(new_tokens), values(past_tokens))
        b, t, s = as_array(sequences), as_array(new_tokens), as_array(past_tokens)
        shape = np.broadcast_shapes(b.shape, t.shape, s.shape)
        return cls(spread(b, shape), spread(t, shape), spread(s, shape))

    @property
    def tokens(self) -> FloatArray:
        return values(self.sequences * self.new_tokens)

    def as_floats(self) -> AttentionGroup:
        """Return the group of a single point with plain floats (a one-point evaluation)."""
        return AttentionGroup(*(_one_float(v) for v in self._columns()))

    def as_arrays(self) -> AttentionGroup:
        """Return the group with arrays (0-d for a plain float), for the array path."""
        if not any(is_scalar(v) for v in self._columns()):
            return self
        return AttentionGroup(*(as_array(v) for v in self._columns()))

    def _columns(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        return self.sequences, self.new_tokens, self.past_tokens


@dataclass(slots=True)  # not frozen, as ``KernelCost`` (construction cost)
class OperatorRow:
    """One operator of a step: work and time per GPU, summed over the layers that run it."""

    name: str
    phase: str
    kind: str
    cost: KernelCost

    @property
    def flops(self) -> FloatArray:
        return self.cost.flops

    @property
    def bytes(self) -> FloatArray:
        return self.cost.bytes

    @property
    def time_s(self) -> FloatArray:
        return self.cost.time_s

    @property
    def arithmetic_intensity_flop_per_byte(self) -> FloatArray:
        return intensity(self.cost.flops, self.cost.bytes)

    @property
    def bound(self) -> npt.NDArray[np.str_]:
        if self.kind == COMMUNICATION:
            return np.full(np.shape(self.cost.time_s), COMMUNICATION)
        return self.cost.bound


@dataclass(slots=True)  # not frozen, as ``KernelCost`` (construction cost)
class StepCost:
    """All operators of one step plus fixed per-layer and per-step overheads."""

    phase: str
    overhead_s: FloatArray
    total: KernelCost  # the rows summed
    # A step cut from a combined one (``part``) keeps the combined step and its points, and
    # slices its rows and bound only when they are asked for.
    whole: tuple[StepCost, slice] | None = None
    _rows: list[tuple[OperatorRow, ...]] = field(default_factory=list, compare=False, repr=False)
    _bound: list[npt.NDArray[np.str_]] = field(default_factory=list, compare=False, repr=False)
    # A one-point step costed on floats (``at_points``) keeps that step and converts its rows to
    # arrays only when they are asked for.
    floats: StepCost | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, phase: str, rows: Sequence[OperatorRow], overhead_s: FloatArray) -> StepCost:
        """Build a step from its rows (summing them once)."""
        total = rows[0].cost
        for row in rows[1:]:
            total = total + row.cost
        return cls(phase, overhead_s, total, None, [tuple(rows)])

    def part(self, phase: str, points: slice) -> StepCost:
        """Return the step restricted to a slice of its points, under another phase name."""
        return StepCost(phase, self.overhead_s[points], _sliced(self.total, points), (self, points))

    def at_points(self, shape: tuple[int, ...]) -> StepCost:
        """Return this step, costed on floats for one point, as arrays of ``shape`` (size 1)."""
        bound = np.array(bound_of(*self.time_by_bound()), dtype="<U13").reshape(shape)
        block = np.array((*_fields(self.total), self.overhead_s), dtype=np.float64)
        block = block.reshape((7, *shape))
        total = KernelCost(*(block[i, ...] for i in range(6)))
        return StepCost(self.phase, block[6, ...], total, None, [], [bound], self)

    @property
    def rows(self) -> tuple[OperatorRow, ...]:
        """The operators of the step, in execution order."""
        if not self._rows and self.floats is not None:
            shape = np.shape(self.overhead_s)
            self._rows.append(
                tuple(
                    OperatorRow(r.name, r.phase, r.kind, _cost_at(r.cost, shape))
                    for r in self.floats.rows
                )
            )
        if not self._rows:
            assert self.whole is not None  # a step built by ``of`` has its rows
            whole, points = self.whole
            self._rows.append(
                tuple(
                    OperatorRow(r.name, self.phase, r.kind, _sliced(r.cost, points))
                    for r in whole.rows
                )
            )
        return self._rows[0]

    @property
    def time_s(self) -> FloatArray:
        return values(self.total.time_s + self.overhead_s)

    @property
    def point_time_s(self) -> FloatArray:
        """Return ``time_s``; a float for one point costed on floats (``at_points``)."""
        return self.floats.time_s if self.floats is not None else self.time_s

    def kind_total(self, kind: str) -> KernelCost:
        """Sum the rows of one kind (e.g. GEMM for the weight-streaming intensity)."""
        rows = [r.cost for r in self.rows if r.kind == kind]
        total = zero_cost(np.shape(self.overhead_s))
        for cost in rows:
            total = total + cost
        return total

    @property
    def bound(self) -> npt.NDArray[np.str_]:
        """Name the term whose rows take the most time: compute, memory or communication.

        Each row counts wholly towards its own bound; only communication rows carry link time.
        Computed once per step (and once for all the parts of a combined step).
        """
        if self.whole is not None:
            whole, points = self.whole
            return whole.bound[points]
        if not self._bound:
            self._bound.append(self._bound_of_rows())
        return self._bound[0]

    def _bound_of_rows(self) -> npt.NDArray[np.str_]:
        return bound_of(*self.time_by_bound())

    def time_by_bound(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Return (compute-bound, memory-bound, communication) row time, summed over rows.

        A row's whole time counts towards the larger of its compute and memory terms; the step
        label and the critical batch size both read this split, so they agree.
        """
        if is_scalar(self.overhead_s):
            compute = memory = link = zeros_like(self.overhead_s)
        else:
            shape = np.shape(self.overhead_s)
            compute, memory, link = np.zeros(shape), np.zeros(shape), np.zeros(shape)
        for row in self.rows:
            cost = row.cost
            if row.kind == COMMUNICATION:
                link = link + cost.time_s
                continue
            on_compute = cost.compute_s >= cost.memory_s
            compute = compute + where(on_compute, cost.time_s, 0.0)
            memory = memory + where(on_compute, 0.0, cost.time_s)
        return compute, memory, link

    @property
    def arithmetic_intensity_flop_per_byte(self) -> FloatArray:
        total = self.total
        return intensity(total.flops, total.bytes)


def intensity(flops: FloatArray, nbytes: FloatArray) -> FloatArray:
    """Return FLOPs per byte (0 where no bytes move)."""
    if is_scalar(flops) and is_scalar(nbytes):
        return values(flops / nbytes if nbytes > 0 else 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(np.where(nbytes > 0, flops / nbytes, 0.0), dtype=np.float64)


def expected_experts_touched(
    num_experts: int, experts_per_token: int, tokens: FloatArray
) -> FloatArray:
    """Return distinct experts hit by ``tokens``, uniform top-k routing: E·(1 − (1 − k/E)^N)."""
    e, k = float(num_experts), float(experts_per_token)
    return values(e * (1.0 - (1.0 - k / e) ** tokens))


@lru_cache(maxsize=64)
def busiest_rank_sd(ranks: int) -> float:
    """Return how many standard deviations the busiest of ``ranks`` GPUs lies above their mean
    load: the expected largest of ``ranks`` independent standard normal draws,
    ∫ x d[Φ(x)^n] (0 for one rank; 0.56, 1.03, 1.42, 1.77 for 2, 4, 8, 16).

    Expert parallelism waits for its busiest rank: under uniform routing the experts a step
    touches and the token picks each rank receives are binomial counts, whose largest of n
    ranks lies about this many standard deviations above the mean (normal approximation).
    """
    if ranks <= 1:
        return 0.0
    step = 1e-3
    grid = np.arange(-10.0, 10.0 + step, step)
    cdf = np.array([0.5 * (1.0 + math.erf(x / math.sqrt(2.0))) for x in grid]) ** ranks
    return float(np.sum(0.5 * (grid[1:] + grid[:-1]) * np.diff(cdf)))


def _one_float(value: FloatArray) -> FloatArray:
    """Return a one-element array's value (or a number) as a plain float."""
    number = value.item() if isinstance(value, np.ndarray) else value
    return cast(FloatArray, float(number))


class _StepBuilder:
    """Accumulate the operator rows of one step (shared context for the per-operator helpers)."""

    def __init__(
        self,
        model: ModelShape,
        accelerator: Hardware,
        precision: Precision,
        parallelism: Parallelism,
        params: EfficiencyParams,
        phase: str,
        groups: Sequence[AttentionGroup],
        identical_sequences: bool = False,
        gemm_rates: dict[tuple[str, bool], GemmRates] | None = None,
    ) -> None:
        self.model, self.acc, self.prec, self.par, self.params = (
            model,
            accelerator,
            precision,
            parallelism,
            params,
        )
        self.phase = phase
        # One point on plain floats (``AttentionGroup.as_floats``), else arrays over the points.
        self.scalar = all(is_scalar(v) for g in groups for v in g._columns())
        shape = () if self.scalar else np.broadcast_shapes(*(np.shape(g.sequences) for g in groups))
        self.shape = shape
        # Tokens of the whole replica: the MoE layers route them all over the MoE group.
        self.all_tokens = sum((g.tokens for g in groups), self._zeros())
        # Tokens that can route differently: all of them, or one sequence's per group when the
        # sequences are copies of one prompt decoded greedily (a benchmark harness's batch):
        # copies pick the same experts, so a step reads only the experts one sequence picks.
        self.identical_sequences = identical_sequences
        self.routed_tokens = (
            sum((where(g.sequences > 0, g.new_tokens, 0.0) for g in groups), self._zeros())
            if identical_sequences
            else self.all_tokens
        )
        # Every other operator runs on the busiest attention-DP rank's sequences (all of them
        # with attention_dp = 1); the MoE exchange waits for it.
        self.groups = (
            tuple(groups)
            if parallelism.attention_dp == 1
            else tuple(
                AttentionGroup(
                    parallelism.sequences_on_busiest_dp_rank(g.sequences),
                    g.new_tokens,
                    g.past_tokens,
                )
                for g in groups
            )
        )
        self.tokens = sum((g.tokens for g in self.groups), self._zeros())
        self.logit_rows = sum((g.sequences for g in self.groups), self._zeros())
        self.rows: list[OperatorRow] = []
        self.tp = float(parallelism.tp)
        # The decoder layers' linear weights other than the routed experts are quantized unless
        # the weights are a checkpoint that quantizes only its experts (gpt-oss's MXFP4).
        self.dense_quantized = not model.quantizes_only_experts(precision.weights)
        # (compute dtype, weight bytes, activation bytes) of quantized and unquantized GEMMs.
        self.gemm_terms = {
            True: (
                precision.compute_dtype,
                precision.weight_bytes_per_element,
                precision.activation_bytes_per_element,
            ),
            False: (
                precision.unquantized_dtype,
                precision.unquantized_bytes_per_element,
                precision.unquantized_bytes_per_element,
            ),
        }
        # GEMM rates per (compute dtype, with launch latency), looked up once; steps costed for
        # the same accelerator and parameters may share this dict.
        self.gemm_rates = {} if gemm_rates is None else gemm_rates

    def _zeros(self) -> FloatArray:
        return cast(FloatArray, 0.0) if self.scalar else np.zeros(self.shape)

    def _zero_cost(self) -> KernelCost:
        z = self._zeros()
        return KernelCost(z, z, z, z, z, z)

    def gemm(
        self,
        m: FloatArray,
        n: float,
        k: float,
        *,
        quantized: bool | None = None,
        launch: bool = True,
        grid_columns: FloatArray | None = None,
    ) -> KernelCost:
        """Cost one GEMM of this step; ``launch=False`` leaves out its launch latency and
        ``grid_columns`` widens its grid (the MoE experts' fused kernels, launched once per
        matrix for all experts; ``kernels.gemm_cost``). ``quantized`` None: a decoder layer's
        linear weight other than a routed expert (``dense_quantized``)."""
        dtype, weight_bytes, activation_bytes = self.gemm_terms[
            self.dense_quantized if quantized is None else quantized
        ]
        return gemm_cost(
            m,
            n,
            k,
            compute_dtype=dtype,
            weight_bytes_per_element=weight_bytes,
            activation_bytes_per_element=activation_bytes,
            accelerator=self.acc,
            params=self.params,
            rates=self._gemm_rates_at(dtype, launch),
            grid_columns=grid_columns,
        )

    def _gemm_rates_at(self, dtype: str, launch: bool) -> GemmRates:
        rates = self.gemm_rates.get((dtype, launch))
        if rates is None:
            params = self.params if launch else _without_gemm_launch(self.params)
            rates = self.gemm_rates[dtype, launch] = GemmRates.of(dtype, self.acc, params)
        return rates

    def add(self, name: str, kind: str, cost: KernelCost) -> None:
        if not self.scalar:
            fields = _fields(cost)
            if any(np.shape(f) != self.shape for f in fields):
                cost = KernelCost(*(spread(f, self.shape) for f in fields))
        self.rows.append(OperatorRow(name, self.phase, kind, cost))

    # --- operators -------------------------------------------------------------------------

    def _streamed(self, nbytes: FloatArray) -> KernelCost:
        """A memory-only kernel that moves ``nbytes`` at the streaming share of HBM bandwidth."""
        memory_s = nbytes / (
            self.acc.memory_bandwidth_bytes_s * self.params.memory_bandwidth_efficiency
        )
        z = self._zeros()
        return KernelCost(z, nbytes, z, memory_s, z, memory_s)

    def embedding(self) -> None:
        gather = self.tokens * self.model.hidden_size * self.prec.unquantized_bytes_per_element
        self.add("embedding", MEMORY, self._streamed(gather))

    def qkv_projection(self) -> None:
        m, n = self.model, self.tokens
        heads = m.num_heads / self.tp
        if m.is_mla:
            qk_dim = m.qk_nope_head_dim + m.qk_rope_head_dim
            latent = m.kv_lora_rank + m.qk_rope_head_dim
            if m.q_lora_rank > 0:
                # Fused q_a + kv_a down-projection (replicated on every rank), then q up-projection.
                cost = self.gemm(n, m.q_lora_rank + latent, m.hidden_size)
                cost = cost + self.gemm(n, heads * qk_dim, m.q_lora_rank)
            else:
                cost = self.gemm(n, heads * qk_dim, m.hidden_size)
                cost = cost + self.gemm(n, latent, m.hidden_size)
            # Absorbed kv_b (W_UK into q, W_UV after attention): same weights, FLOPs on new tokens.
            cost = cost + self.gemm(n, heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank)
        else:
            kv_heads = self.par.kv_heads_per_gpu(m)
            cost = self.gemm(n, (heads + 2 * kv_heads) * m.head_dim, m.hidden_size)
        self.add("qkv_projection", GEMM, cost.scaled(m.num_attention_layers))

    def attention(self) -> None:
        m = self.model
        heads = m.num_heads / self.tp
        b_kv = self.prec.kv_bytes_per_element
        act_bytes = max(self.prec.activation_bytes_per_element, 2.0)
        if m.is_mla:
            # Decode (one new token) runs absorbed: scores over the 576-wide latent + rope key,
            # values in the 512-wide latent, reading the shared latent cache. Prefill chunks run
            # un-absorbed, as engines do: per-head keys of qk_nope + rope (192) and values of
            # v_head_dim (128), over K/V up-projected from the latents in 16-bit.
            latent = float(m.kv_lora_rank + m.qk_rope_head_dim)
            absorbed = (latent, float(m.kv_lora_rank), latent * b_kv)
            qk_dim = float(m.qk_nope_head_dim + m.qk_rope_head_dim)
            v_dim = float(m.v_head_dim)
            expanded = (qk_dim, v_dim, heads * (qk_dim + v_dim) * act_bytes)
            kv_heads = 1.0  # one latent cache shared by every head
        else:
            dim = float(m.head_dim)
            kv_heads = float(self.par.kv_heads_per_gpu(m))
            absorbed = expanded = (dim, dim, 2.0 * kv_heads * dim * b_kv)
        total = self._zero_cost()
        layer_kinds = (
            (m.num_full_attention_layers, 0.0),
            (m.num_sliding_layers, float(m.sliding_window_tokens)),
        )
        for count, window in layer_kinds:
            if count == 0:
                continue
            for g in self.groups:
                forms = [absorbed] if expanded is absorbed else [absorbed, expanded]
                costs = [
                    attention_cost(
                        g.sequences,
                        g.new_tokens,
                        g.past_tokens,
                        num_heads=heads,
                        score_dim=score_dim,
                        value_dim=value_dim,
                        kv_bytes_per_token=kv_per_token,
                        kv_heads=kv_heads,
                        kv_dtype=self.prec.kv_cache,
                        window_tokens=window,
                        activation_bytes_per_element=act_bytes,
                        accelerator=self.acc,
                        params=self.params,
                    )
                    for score_dim, value_dim, kv_per_token in forms
                ]
                cost = costs[0]
                if len(costs) == 2:
                    prefill = g.new_tokens > 1.0
                    cost = KernelCost(
                        *(
                            where(prefill, b, a)
                            for a, b in zip(_fields(costs[0]), _fields(costs[1]), strict=True)
                        )
                    )
                total = total + cost.scaled(count)
        self.add("attention", ATTENTION, total)
        if m.is_mla:
            self._mla_context_up_projection()

    def _mla_context_up_projection(self) -> None:
        """Un-absorbed prefill up-projects the cached latents of earlier chunks to K/V too."""
        m = self.model
        heads = m.num_heads / self.tp
        rows = sum(
            (where(g.new_tokens > 1.0, g.sequences * g.past_tokens, 0.0) for g in self.groups),
            self._zeros(),
        )
        cost = self.gemm(rows, heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank)
        self.add("mla_context_up_projection", GEMM, cost.scaled(m.num_attention_layers))

    def output_projection(self) -> None:
        m = self.model
        v_dim = m.v_head_dim if m.is_mla else m.head_dim
        cost = self.gemm(self.tokens, m.hidden_size, m.num_heads / self.tp * v_dim)
        self.add("output_projection", GEMM, cost.scaled(m.num_attention_layers))

    def mamba(self) -> None:
        """Mamba2 layers: in_proj GEMM, causal conv1d, SSD scan, out_proj GEMM (per TP rank).

        Conv and scan are elementwise/recurrent kernels priced on the roofline: FLOPs at the
        16-bit peak × attention compute efficiency, bytes at the memory efficiency, plus one
        kernel latency each. Per sequence they read the conv and SSM states when it has cached
        tokens and write them back (decode: read + write of (H/tp)·P·N and (K − 1)·channels),
        the SSM state in ``precision.ssm_state``, the conv state in the model dtype.
        """
        m = self.model
        layers = m.num_mamba_layers
        if layers == 0:
            return
        r = Mamba2Rank.of(m, self.par)
        act = max(self.prec.activation_bytes_per_element, 2.0)
        conv_b = conv_state_bytes_per_element(self.prec)
        ssm_b = ssm_state_bytes_per_element(self.prec)
        in_proj = self.gemm(self.tokens, r.in_proj_width, m.hidden_size)
        self.add("mamba_in_proj", GEMM, in_proj.scaled(layers))
        conv = self._zero_cost()
        scan = self._zero_cost()
        for g in self.groups:
            tokens = g.tokens
            # State traffic per sequence: written always, read back when tokens are cached.
            passes = where(g.past_tokens > 0, 2.0, 1.0) * g.sequences
            conv_flops = 2.0 * r.conv_kernel * r.conv_channels * tokens  # depthwise K taps
            conv_bytes = 2.0 * tokens * r.conv_channels * act  # read x/B/C, write them convolved
            conv_bytes = conv_bytes + passes * r.conv_state_elements * conv_b
            conv = conv + self._elementwise(conv_flops, conv_bytes, tokens)
            scan_flops = tokens * r.scan_flops_per_token(g.new_tokens)
            # Reads x, B, C and dt, writes y (d_inner) per token.
            scan_bytes = tokens * (2.0 * r.inner + r.bc_width + r.heads) * act
            scan_bytes = scan_bytes + passes * r.ssm_state_elements * ssm_b
            scan = scan + self._elementwise(scan_flops, scan_bytes, tokens)
        self.add("mamba_conv1d", MEMORY, conv.scaled(layers))
        self.add("mamba_ssm_scan", ATTENTION, scan.scaled(layers))
        out_proj = self.gemm(self.tokens, m.hidden_size, r.inner)
        self.add("mamba_out_proj", GEMM, out_proj.scaled(layers))

    def _elementwise(self, flops: FloatArray, nbytes: FloatArray, tokens: FloatArray) -> KernelCost:
        """Roofline cost of one non-GEMM kernel (16-bit math, one launch when it runs)."""
        p = self.params
        compute_s = flops / (hardware_attention_flops_s(self.acc) * p.attention_compute_efficiency)
        memory_s = nbytes / (self.acc.memory_bandwidth_bytes_s * p.memory_bandwidth_efficiency)
        latency_s = where(tokens > 0, p.attention_kernel_latency_us * 1e-6, 0.0)
        time_s = maximum(compute_s, memory_s) + latency_s
        z = zeros_like(time_s)
        return KernelCost(
            values(flops), values(nbytes), values(compute_s), values(memory_s), z, values(time_s)
        )

    def _mlp(self, tokens: FloatArray, width: float) -> KernelCost:
        """Cost a gated (3-matrix) or plain (2-matrix) MLP of ``width`` columns on this rank."""
        d = self.model.hidden_size
        up = 2.0 * width if self.model.ffn_type == "glu" else width
        return self.gemm(tokens, up, d) + self.gemm(tokens, d, width)

    def ffn(self) -> None:
        m = self.model
        if m.num_dense_ffn_layers == 0:
            return
        cost = self._mlp(self.tokens, m.intermediate_size / self.tp)
        self.add("ffn", GEMM, cost.scaled(m.num_dense_ffn_layers))

    def _expert_slice(self) -> tuple[float, float]:
        """One routed expert's intermediate columns on a GPU, and the share of the experts the
        busiest GPU holds: each GPU holds ceil(E / ep) experts, each split (tp × attention_dp)
        / ep ways."""
        m, par = self.model, self.par
        width = m.moe_intermediate_size * par.ep / par.moe_group_gpus
        return width, par.experts_per_gpu(m) / m.num_experts

    @cached_property
    def _busiest_rank_experts(self) -> tuple[FloatArray, FloatArray]:
        """Touched experts and token picks (rows) on the busiest expert-parallel rank.

        Under uniform top-k routing a rank holding e of the E experts finds each one touched
        with probability p = touched / E, so its touched experts are about Binomial(e, p), and
        each of the step's N·k picks lands on it with probability e / E. With ep > 1 the MoE
        layer lasts as long as its busiest rank: each count at its mean plus
        ``busiest_rank_sd(ep)`` standard deviations, at most all of them (at batch 1 with 8
        ranks holding 32 of 256 experts each, 2.4 touched experts against a mean of 1). With
        ep = 1 every GPU holds a slice of every expert: the means. Copies of one prompt route
        alike, so the picks vary with the routed tokens and scale by the copies.
        """
        m = self.model
        _, share = self._expert_slice()
        k, held = float(m.experts_per_token), share * m.num_experts
        touched = expected_experts_touched(m.num_experts, m.experts_per_token, self.routed_tokens)
        touched_here = touched * share
        picks = self.all_tokens * k
        picks_here = picks * share
        z = busiest_rank_sd(self.par.ep)
        if z == 0.0:
            return touched_here, picks_here
        hit = touched / m.num_experts
        touched_here = minimum(held, touched_here + z * sqrt(held * hit * (1.0 - hit)))
        spread_picks = z * sqrt(self.routed_tokens * k * share * (1.0 - share))
        if self.identical_sequences:  # a group's routed tokens are one copy's (≥ 1 if any)
            spread_picks = spread_picks * self.all_tokens / maximum(self.routed_tokens, 1.0)
        return touched_here, minimum(picks, picks_here + spread_picks)

    def moe(self) -> None:
        m = self.model
        if not m.is_moe:
            return
        layers = m.num_moe_layers
        router = self.gemm(self.tokens, m.num_experts, m.hidden_size, quantized=False)
        self.add("router", GEMM, router.scaled(layers))
        tokens = self.all_tokens
        touched_here, picks_here = self._busiest_rank_experts
        if self.scalar:
            rows_per_expert = cast(
                FloatArray, picks_here / touched_here if touched_here > 0 else 0.0
            )
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                rows_per_expert = np.where(touched_here > 0, picks_here / touched_here, 0.0)
        # One fused kernel per matrix, its grid over every touched expert on the GPU.
        width, _ = self._expert_slice()
        d = m.hidden_size
        up = 2.0 * width if m.ffn_type == "glu" else width
        one = self.gemm(
            rows_per_expert, up, d, quantized=True, launch=False, grid_columns=touched_here * up
        ) + self.gemm(
            rows_per_expert, d, width, quantized=True, launch=False, grid_columns=touched_here * d
        )
        experts = one.scaled(touched_here)
        launch_s = self.params.gemm_kernel_latency_us(self.prec.compute_dtype) * 1e-6
        launches = where(tokens > 0, 2.0 * launch_s, 0.0)
        z = self._zeros()
        experts = experts + KernelCost(z, z, z, z, z, launches)
        self.add("experts", GEMM, experts.scaled(layers))
        if m.num_shared_experts:
            cost = self._mlp(self.tokens, m.num_shared_experts * m.shared_expert_width / self.tp)
            self.add("shared_experts", GEMM, cost.scaled(layers))

    def activation_streaming(self) -> None:
        """The residual stream's elementwise kernels: norms and the gated activation.

        Per token, each block (mixer or FFN) ends in a fused residual-add + RMSNorm that reads
        the block's output and the residual and writes both (4·d elements, full width on every
        TP rank), and a gated FFN's activation reads gate and up and writes their product
        (3·F/tp; 2·F/tp ungated), in 16-bit. Launches are in ``layer_overhead_us``.
        """
        m = self.model
        blocks = m.num_attention_layers + m.num_mamba_layers + m.num_ffn_layers
        per_column = 3.0 if m.ffn_type == "glu" else 2.0
        elements = self.tokens * (4.0 * m.hidden_size * blocks)
        if m.num_dense_ffn_layers:
            dense = per_column * m.intermediate_size / self.tp * m.num_dense_ffn_layers
            elements = elements + self.tokens * dense
        if m.is_moe:
            width, _ = self._expert_slice()
            _, picks_here = self._busiest_rank_experts
            routed = picks_here * per_column * width
            shared_width = m.num_shared_experts * m.shared_expert_width
            shared = self.tokens * per_column * shared_width / self.tp
            elements = elements + (routed + shared) * m.num_moe_layers
        self.add("activation_streaming", MEMORY, self._streamed(elements * RESIDUAL_STREAM_BYTES))

    def lm_head(self) -> None:
        m = self.model
        cost = self.gemm(self.logit_rows, m.vocab_size / self.tp, m.hidden_size, quantized=False)
        self.add("lm_head", GEMM, cost)

    def communication(self) -> None:
        m, par = self.model, self.par
        b = self.prec.communication_bytes_per_element
        activation_bytes = self.tokens * m.hidden_size * b
        moe_exchange = par.ep > 1 or par.attention_dp > 1
        if par.tp > 1:
            # One all-reduce after every mixer (attention, Mamba2) and FFN: two per layer of a
            # plain transformer, one per block of a hybrid pattern; with ep > 1 or
            # attention_dp > 1 the MoE layers' FFN all-reduce becomes the exchange below.
            mixers = m.num_attention_layers + m.num_mamba_layers
            count = mixers + m.num_ffn_layers - (m.num_moe_layers if moe_exchange else 0)
            cost = collective_cost(
                "all_reduce", par.tp, activation_bytes, accelerator=self.acc, params=self.params
            )
            self.add("tp_all_reduce", COMMUNICATION, cost.scaled(count))
        if par.ep > 1:
            # Dispatch and combine: the replica's N·k token picks are exchanged, and the
            # exchange lasts as long as the busiest rank's share (``_busiest_rank_experts``;
            # N·k / ep on average; with attention_dp, its rank's tokens split over the rank's
            # tp GPUs).
            _, picks_here = self._busiest_rank_experts
            message = picks_here * m.hidden_size * b
            cost = collective_cost(
                "alltoall", par.ep, message, accelerator=self.acc, params=self.params
            )
            self.add("ep_all_to_all", COMMUNICATION, cost.scaled(2 * m.num_moe_layers))
        elif moe_exchange:
            # attention_dp without ep: every GPU of the MoE group holds a column slice of every
            # expert, so the ranks all-gather the replica's tokens before the MoE layer and
            # reduce-scatter its outputs after it.
            all_bytes = self.all_tokens * m.hidden_size * b
            group = par.moe_group_gpus
            gather = collective_cost(
                "all_gather", group, all_bytes, accelerator=self.acc, params=self.params
            )
            scatter = collective_cost(
                "reduce_scatter", group, all_bytes, accelerator=self.acc, params=self.params
            )
            self.add(
                "dp_gather_scatter", COMMUNICATION, (gather + scatter).scaled(m.num_moe_layers)
            )
        if par.pp > 1:
            # One send per stage boundary: pp·v − 1 with v interleaved virtual stages (the
            # chunks cycle through the pp stages), each over the link between the two stages'
            # GPUs, stages placed one after another (rank r of a stage sends to rank r of the
            # next: the first GPUs stand for the boundary).
            stage_gpus = par.tp * par.attention_dp
            boundaries = Counter(
                (k % par.pp * stage_gpus, (k + 1) % par.pp * stage_gpus)
                for k in range(par.pp_boundaries)
            )
            sends = [
                collective_cost(
                    "send",
                    2,
                    activation_bytes,
                    accelerator=self.acc,
                    params=self.params,
                    link_bytes_s=self.acc.send_bytes_s(first, second),
                ).scaled(count)
                for (first, second), count in sorted(boundaries.items())
            ]
            self.add("pp_send", COMMUNICATION, sum(sends[1:], sends[0]))

    def build(self) -> StepCost:
        self.embedding()
        self.qkv_projection()
        self.attention()
        self.output_projection()
        self.mamba()
        self.ffn()
        self.moe()
        self.activation_streaming()
        self.lm_head()
        self.communication()
        p = self.params
        # Host overheads: per layer, per step, and per sequence in the step (one logit row each),
        # the last both per step and per layer, part of it split over the tp ranks
        # (efficiency.py).
        layers = self.model.num_layers
        fixed_us = layers * p.layer_overhead_us + p.step_overhead_us
        per_layer_us = p.sequence_layer_overhead_us + p.sequence_layer_sharded_us / self.par.tp
        per_sequence_us = p.sequence_overhead_us + layers * per_layer_us
        charged = charged_sequences(self.logit_rows, p.sequence_overhead_full_batch)
        overhead_us = fixed_us + charged * per_sequence_us
        overhead = where(self.tokens > 0, overhead_us * 1e-6, 0.0)
        if self.scalar:
            return StepCost.of(self.phase, self.rows, overhead)
        return StepCost.of(self.phase, self.rows, spread(overhead, self.shape))


def charged_sequences(sequences: FloatArray, full_batch: float) -> FloatArray:
    """Sequences whose per-sequence overhead a step pays: all up to ``full_batch``, then fewer.

    The n-th sequence beyond ``full_batch`` costs full_batch / n of one within it, so R of them
    cost as many as full_batch · (1 + ln(R / full_batch)) (efficiency.py,
    ``sequence_overhead_full_batch``).
    """
    if is_scalar(sequences):
        rows = float(sequences)
        if rows <= full_batch:
            return sequences
        return full_batch * (1.0 + math.log(rows / full_batch))  # type: ignore[return-value]
    rows_array = np.asarray(sequences, dtype=np.float64)
    beyond = np.maximum(rows_array, full_batch) / full_batch
    return np.where(rows_array <= full_batch, rows_array, full_batch * (1.0 + np.log(beyond)))


@lru_cache(maxsize=256)
def _without_gemm_launch(params: EfficiencyParams) -> EfficiencyParams:
    """Return ``params`` without GEMM launch latency (the MoE experts' fused kernels)."""
    return params.replace(gemm_kernel_latency_us_bf16=0.0, gemm_kernel_latency_us_fp8=0.0)


def _fields(cost: KernelCost) -> tuple[FloatArray, ...]:
    return (
        cost.flops,
        cost.bytes,
        cost.compute_s,
        cost.memory_s,
        cost.communication_s,
        cost.time_s,
    )


def _sliced(cost: KernelCost, points: slice) -> KernelCost:
    return KernelCost(*(f[points] for f in _fields(cost)))


def _cost_at(cost: KernelCost, shape: tuple[int, ...]) -> KernelCost:
    """Return a one-point cost of floats as arrays of ``shape`` (one allocation)."""
    block = np.array(_fields(cost), dtype=np.float64).reshape((6, *shape))
    return KernelCost(*(block[i, ...] for i in range(6)))


def _one_point(
    model: ModelShape,
    accelerator: Hardware,
    precision: Precision,
    parallelism: Parallelism,
    groups: Sequence[AttentionGroup],
    params: EfficiencyParams,
    phase: str,
    identical_sequences: bool,
    shape: tuple[int, ...],
    gemm_rates: dict[tuple[str, bool], GemmRates] | None = None,
) -> StepCost | None:
    """Cost a one-point step on floats (same formulas, no numpy calls), as arrays of ``shape``.

    None where floats cannot stand in for arrays: an accelerator stack, or a division by zero
    or overflow that numpy would turn into inf or NaN (the caller then runs the array path).
    ``gemm_rates``: the GEMM rates of steps on the same accelerator and parameters, shared.
    """
    if isinstance(accelerator, AcceleratorStack) or not groups:
        return None
    floats = [g.as_floats() for g in groups]
    try:
        step = _StepBuilder(
            model, accelerator, precision, parallelism, params, phase, floats,
            identical_sequences, gemm_rates,
        ).build()  # fmt: skip
        return step.at_points(shape)
    except (ZeroDivisionError, OverflowError):
        return None


def step_cost(
    model: ModelShape,
    accelerator: Hardware,
    *,
    precision: Precision,
    parallelism: Parallelism,
    groups: Sequence[AttentionGroup],
    params: EfficiencyParams,
    phase: str,
    identical_sequences: bool = False,
) -> StepCost:
    """Cost one forward step whose sequences are described by attention groups.

    GEMMs run once over all the step's tokens (a unified batch); attention runs per group; the LM
    head runs on one row per sequence (the last token of a prefill, the new token of a decode).
    ``identical_sequences``: each group's sequences are copies of one (they route alike).
    """
    if all(np.size(v) == 1 for g in groups for v in g._columns()):
        shape = np.broadcast_shapes(*(np.shape(g.sequences) for g in groups))
        one = _one_point(
            model, accelerator, precision, parallelism, groups, params, phase,
            identical_sequences, shape,
        )  # fmt: skip
        if one is not None:
            return one
    arrays = [g.as_arrays() for g in groups]
    return _StepBuilder(
        model, accelerator, precision, parallelism, params, phase, arrays, identical_sequences
    ).build()


def step_costs(
    model: ModelShape,
    accelerator: Hardware,
    *,
    precision: Precision,
    parallelism: Parallelism,
    steps: Sequence[tuple[str, Sequence[AttentionGroup]]],
    points: int,
    params: EfficiencyParams,
    identical_sequences: bool = False,
) -> list[StepCost]:
    """Cost several steps over the same ``points`` in one vectorised pass.

    Equal to ``step_cost`` per (phase, groups) step, each broadcast to ``points``: the steps'
    points are laid end to end and steps with fewer attention groups get empty ones (which cost
    exactly nothing), so the per-operator Python work is paid once instead of once per step.
    """
    if points == 1:
        gemm_rates: dict[tuple[str, bool], GemmRates] = {}
        ones = [
            _one_point(
                model,
                accelerator,
                precision,
                parallelism,
                groups,
                params,
                phase,
                identical_sequences,
                (1,),
                gemm_rates,
            )
            for phase, groups in steps
        ]
        if all(one is not None for one in ones):
            return cast("list[StepCost]", ones)
    width = max(len(groups) for _, groups in steps)
    empty = np.zeros(points)

    def column(step_groups: Sequence[AttentionGroup], i: int, name: str) -> FloatArray:
        if i >= len(step_groups):
            return empty
        return spread(getattr(step_groups[i], name), (points,))

    merged = [
        AttentionGroup(
            *(
                np.concatenate([column(groups, i, name) for _, groups in steps])
                for name in ("sequences", "new_tokens", "past_tokens")
            )
        )
        for i in range(width)
    ]
    hardware = (
        accelerator.tiled(len(steps)) if isinstance(accelerator, AcceleratorStack) else accelerator
    )
    combined = step_cost(
        model,
        hardware,
        precision=precision,
        parallelism=parallelism,
        groups=merged,
        params=params,
        phase="combined",
        identical_sequences=identical_sequences,
    )
    return [
        combined.part(phase, slice(i * points, (i + 1) * points))
        for i, (phase, _) in enumerate(steps)
    ]


def decode_step(
    model: ModelShape,
    accelerator: Hardware,
    *,
    batch_size: npt.ArrayLike,
    context_tokens: npt.ArrayLike,
    precision: Precision,
    parallelism: Parallelism,
    params: EfficiencyParams,
) -> StepCost:
    """Cost one decode step: ``batch_size`` sequences each add a token after ``context_tokens``."""
    group = AttentionGroup.of(batch_size, 1.0, context_tokens)
    return step_cost(
        model,
        accelerator,
        precision=precision,
        parallelism=parallelism,
        groups=[group],
        params=params,
        phase="decode",
    )


def prefill_step(
    model: ModelShape,
    accelerator: Hardware,
    *,
    batch_size: npt.ArrayLike,
    input_tokens: npt.ArrayLike,
    precision: Precision,
    parallelism: Parallelism,
    params: EfficiencyParams,
) -> StepCost:
    """Cost the prefill of ``batch_size`` prompts of ``input_tokens`` each (no cached context)."""
    group = AttentionGroup.of(batch_size, input_tokens, 0.0)
    return step_cost(
        model,
        accelerator,
        precision=precision,
        parallelism=parallelism,
        groups=[group],
        params=params,
        phase="prefill",
    )
