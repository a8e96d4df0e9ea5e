"""Several steps costed in one pass (``step_costs``) equal each step costed on its own."""

from __future__ import annotations

import numpy as np
import pytest
from engine_refs import (
    deepseek_v3,
    gemma_2_9b,
    llama_31_8b,
    make_h100,
    make_h200,
    mixtral_8x7b,
)

from service.engine.accelerator_stack import AcceleratorStack
from service.engine.efficiency import DEFAULT_EFFICIENCY
from service.engine.kernels import Hardware
from service.engine.operators import AttentionGroup, StepCost, step_cost, step_costs
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.engine.shapes import ModelShape

BATCHES = np.array([1.0, 7.0, 64.0, 300.0])
FIELDS = ("flops", "bytes", "compute_s", "memory_s", "communication_s", "time_s")


def _steps() -> list[tuple[str, list[AttentionGroup]]]:
    decode = AttentionGroup.of(BATCHES, 1.0, 1500.0)
    prompts = AttentionGroup.of(BATCHES / 200.0, 1024.0, 0.0)
    chunk = AttentionGroup.of(1.0, 512.0, 256.0)  # a scalar group, broadcast to the points
    return [("mixed", [decode, prompts]), ("decode", [decode]), ("prefill", [chunk])]


def _assert_same(together: StepCost, alone: StepCost) -> None:
    assert together.phase == alone.phase
    assert [r.name for r in together.rows] == [r.name for r in alone.rows]
    for a, b in zip(together.rows, alone.rows, strict=True):
        assert a.phase == alone.phase
        for name in FIELDS:
            want = np.broadcast_to(getattr(b.cost, name), BATCHES.shape)
            np.testing.assert_allclose(getattr(a.cost, name), want, rtol=1e-12, atol=0)
    np.testing.assert_allclose(together.time_s, np.broadcast_to(alone.time_s, BATCHES.shape))
    assert together.bound.tolist() == np.broadcast_to(alone.bound, BATCHES.shape).tolist()


def _check(model: ModelShape, hardware: Hardware, precision: Precision, par: Parallelism) -> None:
    params = DEFAULT_EFFICIENCY.replace(step_overhead_us=40.0, sequence_overhead_us=1.5)
    together = step_costs(
        model,
        hardware,
        precision=precision,
        parallelism=par,
        steps=_steps(),
        points=BATCHES.size,
        params=params,
    )
    for (phase, groups), part in zip(_steps(), together, strict=True):
        alone = step_cost(
            model,
            hardware,
            precision=precision,
            parallelism=par,
            groups=groups,
            params=params,
            phase=phase,
        )
        _assert_same(part, alone)


@pytest.mark.parametrize(
    ("model", "parallelism"),
    [
        (llama_31_8b(), Parallelism(tp=2)),
        (gemma_2_9b(), Parallelism()),
        (mixtral_8x7b(), Parallelism(tp=2, ep=2)),
        (deepseek_v3(), Parallelism(tp=8, pp=2)),
    ],
    ids=["dense", "sliding-window", "moe", "mla"],
)
def test_steps_together_equal_steps_alone(model: ModelShape, parallelism: Parallelism) -> None:
    _check(model, make_h100(), Precision("fp8", "fp8"), parallelism)


def test_accelerator_stack_is_repeated_per_step() -> None:
    """Per-point hardware (two accelerators over the points) lines up with every step's points."""
    stack = AcceleratorStack.of(
        [make_h100(), make_h200()], [0, 1, 1, 0], {"bf16": np.array([1.0, 0.9, 0.9, 1.0])}
    )
    _check(llama_31_8b(), stack, Precision(), Parallelism())
    # The H200 points really differ from H100 ones, so a misaligned repeat would be caught.
    steps = [("decode", [AttentionGroup.of(BATCHES, 1.0, 1500.0)])]
    on_stack, on_h100 = (
        step_costs(
            llama_31_8b(),
            hardware,
            precision=Precision(),
            parallelism=Parallelism(),
            steps=steps,
            points=BATCHES.size,
            params=DEFAULT_EFFICIENCY,
        )[0].time_s
        for hardware in (stack, make_h100())
    )
    assert on_stack[0] == on_h100[0] and on_stack[1] < on_h100[1]
