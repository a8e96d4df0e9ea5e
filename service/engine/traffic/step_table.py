"""Serving-step times from the engine's cost model, tabulated once and interpolated per step.

A step of continuous batching runs R decode tokens (context c each on average) and prefill
pieces (p_j new prompt tokens after q_j already prefilled). The engine's ``step_cost`` of that
step splits exactly into parts that each depend on few numbers:

    step = body(T) + lm_head(L) + overhead(L) + decode_attention(R, c)
           + Σ_j prefill_attention(p_j, q_j)

with T = R + Σ p_j tokens through the GEMMs, collectives and gathers, and L = R + n pieces
(one logit row per sequence). Decode attention of R equal sequences is R · a(c) + one kernel
latency (per-sequence bytes and FLOPs, one launch); prefill pieces run as one variable-length
kernel, so n pieces pay the launch once. Each part is tabulated on a geometric grid from one
vectorised engine call and interpolated linearly; ``tests/engine/test_traffic_model.py``
checks the sum against ``step_cost`` directly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from service.engine.efficiency import EfficiencyParams
from service.engine.hardware import Accelerator
from service.engine.kernels import FloatArray
from service.engine.operators import ATTENTION, AttentionGroup, StepCost, step_cost
from service.engine.parallel import Parallelism, on_busiest_rank
from service.engine.precision import Precision
from service.engine.serving import eager_launch_s
from service.engine.shapes import ModelShape

GRID_POINTS = 96  # per axis of the 1-D tables (step ratio ≈ 1.1 up to 8k tokens)
PREFILL_GRID_POINTS = 40  # per axis of the prefill-attention table
# Rows that run on all of a step's tokens with attention DP (the rest run on a rank's): the
# routed experts and their exchange (the routed part of the activation streaming is counted
# with the rank's rows, a small share).
ALL_TOKEN_ROWS = ("experts", "ep_all_to_all", "dp_gather_scatter")
CONTEXT_CELLS = 2048  # uniform cells of the decode-attention context axis
PREFILL_CELLS = 128  # uniform cells per axis of the prefill-attention table


def _grid(top: float, points: int, *, zero: bool = False) -> list[float]:
    """Return 1, 2, … 8 then geometric up to ``top`` (whole tokens), with 0 first if asked."""
    top = max(float(top), 1.0)
    small = [float(x) for x in range(1, 9) if x < top]
    geometric = np.unique(np.round(np.geomspace(max(len(small), 1), top, points)))
    values = sorted({*small, *geometric.tolist(), top})
    return [0.0, *values] if zero else values


@dataclass(frozen=True, slots=True)
class StepTable:
    """Step parts resampled onto uniform grids, so that a step costs a few list look-ups.

    ``tokens_s[T]``: body at T tokens; ``rows_s[L]``: LM head + overhead at L rows (whole
    numbers, exact at the engine's grid points, linear between them). Decode attention per
    sequence is on a uniform context grid of ``context_step`` tokens; prefill attention of one
    piece on a uniform (new, past) grid of ``new_step`` × ``past_step`` tokens (bilinear).
    """

    tokens_s: tuple[float, ...]
    rows_s: tuple[float, ...]
    decode_tokens: int  # tokens each decoding sequence runs per step (k + 1 when speculating)
    decode_rows_s: tuple[float, ...]  # LM head on R · decode_tokens rows + overhead of R
    context_step: float
    decode_attention_s: tuple[float, ...]  # a(c) at c = i · context_step, launch excluded
    attention_launch_s: float
    new_step: float
    past_step: float
    prefill_columns: int
    prefill_attention_s: tuple[float, ...]  # row-major [past index][new index], launch excluded
    # MTP drafter (``speculative.py``): each step also runs ``draft_passes`` decode steps of
    # one MTP block, tabulated like the model (``draft`` is that one-layer model's table).
    draft: StepTable | None = None
    draft_passes: int = 0
    # A step carrying prompt pieces on an engine that launches it outside CUDA graphs lasts at
    # least layers · eager_layer_launch_us plus its host overheads (serving.py, efficiency.py):
    # the launch time and the overhead part of ``rows_s`` at L rows.
    eager_launch_s: float = 0.0
    overhead_rows_s: tuple[float, ...] = ()
    # Attention-DP ranks: decode sequences and prompt pieces are placed whole, balanced by
    # count, and a step lasts as long as the busiest rank (``on_busiest_rank``). A decode-only
    # step's body is ``tokens_s`` (the engine prices that rank); a step with prompt pieces
    # splits it into what runs on the busiest rank's tokens (``rank_tokens_s``) and the routed
    # experts and their exchange on all the replica's tokens (``moe_tokens_s``).
    dp_ranks: int = 1
    rank_tokens_s: tuple[float, ...] = ()
    moe_tokens_s: tuple[float, ...] = ()

    def _busiest_attention(self, sequences: float, each_s: float) -> float:
        """Return the attention of the busiest rank's share of ``sequences`` costing ``each_s``
        each (all of them with one rank)."""
        if self.dp_ranks == 1:
            return sequences * each_s
        return float(on_busiest_rank(float(sequences), self.dp_ranks)) * each_s

    def draft_s(self, sequences: int, context_sum: float) -> float:
        """Return the drafter's time in a step: k one-token decode steps of the MTP block for
        each of ``sequences`` decoding sequences (0 without an MTP drafter)."""
        if self.draft is None or sequences <= 0:
            return 0.0
        return self.draft_passes * self.draft.decode_s(sequences, context_sum)

    def decode_attention(self, sequences: float, context_sum: float) -> float:
        """Return R · a(mean context) + one launch (0 without sequences)."""
        if sequences <= 0:
            return 0.0
        table = self.decode_attention_s
        x = context_sum / sequences / self.context_step
        i = min(int(x), len(table) - 2)
        low = table[i]
        each_s = low + (table[i + 1] - low) * (x - i)
        return self._busiest_attention(sequences, each_s) + self.attention_launch_s

    def prefill_attention(self, new_tokens: float, past_tokens: float) -> float:
        """Return one prefill piece's attention without its launch (bilinear in new, past)."""
        table, width = self.prefill_attention_s, self.prefill_columns
        x = new_tokens / self.new_step
        y = past_tokens / self.past_step
        j = min(int(x), width - 2)
        i = min(int(y), len(table) // width - 2)
        fx, fy = x - j, y - i
        k = i * width + j
        a = table[k] + (table[k + 1] - table[k]) * fx
        b = table[k + width] + (table[k + width + 1] - table[k + width]) * fx
        return a + (b - a) * fy

    def decode_s(self, sequences: int, context_sum: float) -> float:
        """Return the time of a decode-only step of ``sequences`` at total context."""
        table = self.decode_attention_s
        x = context_sum / sequences / self.context_step
        i = int(x)
        if i > len(table) - 2:
            i = len(table) - 2
        low = table[i]
        time_s = (
            self.tokens_s[sequences * self.decode_tokens]
            + self.decode_rows_s[sequences]
            + self._busiest_attention(sequences, low + (table[i + 1] - low) * (x - i))
            + self.attention_launch_s
        )
        if self.draft is not None:
            time_s += self.draft_s(sequences, context_sum)
        return time_s

    def decode_leap(self, sequences: int, context_sum: float) -> tuple[float, float]:
        """Return a decode-only step's time and its growth per further step.

        Each step adds one token to every sequence's context: the mean context grows by one,
        so the step grows by R · a'(c) (a is linear within a grid cell).
        """
        table = self.decode_attention_s
        x = context_sum / sequences / self.context_step
        i = int(x)
        if i > len(table) - 2:
            i = len(table) - 2
        low = table[i]
        rise = table[i + 1] - low
        time_s = (
            self.tokens_s[sequences * self.decode_tokens]
            + self.decode_rows_s[sequences]
            + self._busiest_attention(sequences, low + rise * (x - i))
            + self.attention_launch_s
        )
        growth = self._busiest_attention(sequences, rise / self.context_step)
        if self.draft is not None:
            draft_s, draft_growth = self.draft.decode_leap(sequences, context_sum)
            time_s += self.draft_passes * draft_s
            growth += self.draft_passes * draft_growth
        return time_s, growth

    def step_s(
        self, decode_sequences: float, context_sum: float, pieces: Sequence[tuple[float, float]]
    ) -> float:
        """Return the time of one step: R decodes at total context, and (new, past) pieces."""
        r = int(decode_sequences)
        tokens = r * self.decode_tokens
        for new, _ in pieces:
            tokens += int(new)
        if tokens <= 0:
            return 0.0
        if self.dp_ranks > 1 and pieces:
            new_tokens = tokens - r * self.decode_tokens
            rank_share = on_busiest_rank(float(len(pieces)), self.dp_ranks) / len(pieces)
            busiest_tokens = (
                on_busiest_rank(float(r), self.dp_ranks) * self.decode_tokens
                + rank_share * new_tokens
            )
            body = self.rank_tokens_s[int(busiest_tokens)] + self.moe_tokens_s[tokens]
        else:
            body = self.tokens_s[tokens]
        total = body + self.decode_rows_s[r] + self.rows_s[r + len(pieces)] - self.rows_s[r]
        if decode_sequences > 0:
            total += self.decode_attention(decode_sequences, context_sum)
            if self.draft is not None:
                total += self.draft_s(r, context_sum)
        if pieces:
            pieces_s = sum(self.prefill_attention(new, past) for new, past in pieces)
            if self.dp_ranks > 1:  # the busiest rank's pieces, at the pieces' mean
                pieces_s = self._busiest_attention(len(pieces), pieces_s / len(pieces))
            total += self.attention_launch_s + pieces_s
            if self.eager_launch_s > 0.0:
                kernels_s = total - self.overhead_rows_s[r + len(pieces)]
                total += max(self.eager_launch_s - kernels_s, 0.0)
        return total


def _row_time(step: StepCost, name: str | None = None, kind: str | None = None) -> FloatArray:
    total = np.zeros(np.shape(step.overhead_s))
    for row in step.rows:
        if (name is not None and row.name == name) or (kind is not None and row.kind == kind):
            total = total + row.time_s
    return total


def build_step_table(
    model: ModelShape,
    accelerator: Accelerator,
    *,
    precision: Precision,
    parallelism: Parallelism,
    params: EfficiencyParams,
    max_step_tokens: float,
    max_context_tokens: float,
    max_prompt_tokens: float,
    decode_tokens: int = 1,
    mtp_draft_passes: int = 0,
) -> StepTable:
    """Tabulate a step's parts from the engine (three vectorised ``step_cost`` calls).

    With ``mtp_draft_passes`` = k > 0 the model's MTP block is tabulated too, as a one-layer
    model decoding one token per sequence (``ModelShape.mtp_block``), and each decode step
    adds k of its steps (``speculative.py``).
    """
    draft = None
    if mtp_draft_passes:
        draft = build_step_table(
            model.mtp_block(),
            accelerator,
            precision=precision,
            parallelism=parallelism,
            # The drafts run inside the target's engine step, which pays the per-step overhead.
            params=params.replace(step_overhead_us=0.0),
            max_step_tokens=max_step_tokens,
            max_context_tokens=max_context_tokens,
            max_prompt_tokens=1.0,  # the drafter prices decode steps only
        )

    def cost(groups: list[AttentionGroup], layout: Parallelism = parallelism) -> StepCost:
        return step_cost(
            model,
            accelerator,
            precision=precision,
            parallelism=layout,
            groups=groups,
            params=params,
            phase="traffic",
        )

    # Attention per sequence or prompt piece as one rank runs it (the step prices the busiest
    # rank's count of them): the layout without attention DP (nor the ep it enables).
    one_rank = dataclasses.replace(parallelism, attention_dp=1, ep=1)

    tokens = _grid(max_step_tokens + 1, GRID_POINTS)
    t = np.asarray(tokens)
    # T sequences of one token with nothing cached: everything but attention scales with T.
    flat = cost([AttentionGroup.of(t, 1.0, 0.0)])
    lm_head = _row_time(flat, name="lm_head")
    body = flat.total.time_s - _row_time(flat, kind=ATTENTION) - lm_head
    rank_body = moe_body = np.zeros(0)
    if parallelism.attention_dp > 1:
        # T tokens as one sequence: all of them on one rank and through the routed experts.
        lone = cost([AttentionGroup.of(1.0, t, 0.0)])
        lone_body = lone.total.time_s - _row_time(lone, kind=ATTENTION)
        lone_body = lone_body - _row_time(lone, name="lm_head")
        moe_body = sum((_row_time(lone, name=name) for name in ALL_TOKEN_ROWS), np.zeros(t.size))
        rank_body = lone_body - moe_body
    # Decode attention: one and two sequences at each context give a(c) and the launch.
    contexts = np.asarray(_grid(max_context_tokens + 1, GRID_POINTS))
    n = contexts.size
    both = cost(
        [AttentionGroup.of(np.repeat([1.0, 2.0], n), float(decode_tokens), np.tile(contexts, 2))],
        one_rank,
    )
    attention = _row_time(both, kind=ATTENTION)
    one, two = attention[:n], attention[n:]
    launch = float(np.median(2.0 * one - two))
    # Prefill attention of one piece over a (new, past) grid.
    news = np.asarray(_grid(max_step_tokens, PREFILL_GRID_POINTS))
    pasts = np.asarray(_grid(max(max_prompt_tokens - 1.0, 1.0), PREFILL_GRID_POINTS, zero=True))
    new_mesh, past_mesh = np.meshgrid(news, pasts)
    pre = cost([AttentionGroup.of(1.0, new_mesh.ravel(), past_mesh.ravel())], one_rank)
    # MLA's un-absorbed prefill also up-projects the piece's cached latents (0 without past).
    up_projection = _row_time(pre, name="mla_context_up_projection")
    prefill = (_row_time(pre, kind=ATTENTION) + up_projection - launch).reshape(new_mesh.shape)
    # Resample onto uniform grids (whole tokens and rows; fixed steps for contexts and pieces).
    whole = np.arange(int(np.ceil(t[-1])) + 1, dtype=np.float64)
    context_step = max(float(contexts[-1]) / CONTEXT_CELLS, 1.0)
    context_points = np.arange(CONTEXT_CELLS + 2) * context_step
    new_step = max(float(news[-1]) / PREFILL_CELLS, 1.0)
    past_step = max(float(pasts[-1]) / PREFILL_CELLS, 1.0)
    new_points = np.arange(PREFILL_CELLS + 2) * new_step
    past_points = np.arange(PREFILL_CELLS + 2) * past_step
    along_new = np.stack([_resample(news, row, new_points) for row in prefill])
    fine = np.stack([_resample(pasts, col, past_points) for col in along_new.T]).T
    overhead = np.asarray(flat.overhead_s)
    rows = _resample(t, lm_head + overhead, whole)
    # Verifying k drafted tokens needs logits at each of the k + 1 positions.
    verify = _resample(t, lm_head, whole * decode_tokens) + _resample(t, overhead, whole)
    return StepTable(
        tokens_s=tuple(_resample(t, body, whole).tolist()),
        rows_s=tuple(rows.tolist()),
        decode_tokens=decode_tokens,
        decode_rows_s=tuple((rows if decode_tokens == 1 else verify).tolist()),
        context_step=context_step,
        decode_attention_s=tuple(_resample(contexts, one - launch, context_points).tolist()),
        attention_launch_s=launch,
        new_step=new_step,
        past_step=past_step,
        prefill_columns=PREFILL_CELLS + 2,
        prefill_attention_s=tuple(fine.ravel().tolist()),
        draft=draft,
        draft_passes=mtp_draft_passes if draft is not None else 0,
        eager_launch_s=eager_launch_s(model, parallelism, params),
        overhead_rows_s=tuple(_resample(t, overhead, whole).tolist()),
        dp_ranks=parallelism.attention_dp,
        rank_tokens_s=tuple(_resample(t, rank_body, whole).tolist()) if rank_body.size else (),
        moe_tokens_s=tuple(_resample(t, moe_body, whole).tolist()) if moe_body.size else (),
    )


def _resample(grid: npt.ArrayLike, values: npt.ArrayLike, points: npt.ArrayLike) -> FloatArray:
    """Linear interpolation on the engine's grid (held constant beyond its ends)."""
    x, xp, fp = (np.asarray(a, dtype=np.float64) for a in (points, grid, values))
    return np.asarray(np.interp(x, xp, fp), dtype=np.float64)
