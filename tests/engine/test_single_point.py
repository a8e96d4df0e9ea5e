"""A one-point estimate (costed on Python floats) equals the same point of an array sweep.

``operators.step_cost`` / ``step_costs`` evaluate a single point with plain floats through the
same formulas; a sweep of several points runs them on arrays. The two paths share nothing but
the formulas, so comparing every field of ``EstimateResult`` point by point checks the float
path across dense, sliding-window, MoE, MLA and hybrid Mamba2 models, several accelerators,
precisions, layouts, modes and parameter sets.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from service.catalog_files import (
    accelerator_from_record,
    load_accelerator_records,
    load_model_records,
    model_from_record,
)
from service.engine.efficiency import DEFAULT_EFFICIENCY, EfficiencyParams
from service.engine.estimate import EstimateResult, estimate
from service.engine.hardware import Accelerator
from service.engine.memory import _per_replica_constants, _weights_and_kv
from service.engine.operators import AttentionGroup, _without_gemm_launch, step_cost
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.engine.roofline import _CRITICAL_CACHE
from service.engine.shapes import ModelShape

ACCELERATORS = {str(r["id"]): accelerator_from_record(r) for r in load_accelerator_records()}
MODELS = {str(r["id"]): model_from_record(r) for r in load_model_records()}
BATCHES = [1.0, 3.0, 8.0, 64.0, 300.0]
# A calibration-like parameter set: every shape penalty switched on, host overheads per
# sequence, a smaller prefill chunk (serving prompts then run in several chunks).
CALIBRATED = DEFAULT_EFFICIENCY.replace(
    gemm_compute_efficiency_bf16=0.74,
    gemm_half_efficiency_rows_bf16=41.0,
    gemm_half_efficiency_columns_bf16=120.0,
    gemm_half_efficiency_columns_fp8=2900.0,
    gemm_kernel_latency_us_fp8=5.7,
    attention_half_efficiency_tokens=940.0,
    step_overhead_us=250.0,
    sequence_layer_overhead_us=0.3,
    sequence_layer_sharded_us=0.6,
    prefill_chunk_tokens=2048.0,
)
CASES = [
    ("llama-3.1-8b", "h100-sxm", Precision(), Parallelism()),
    ("llama-3.1-70b", "h100-sxm", Precision(), Parallelism(tp=4)),
    ("llama-3.1-70b", "mi300x", Precision("fp8", "fp8", "fp8"), Parallelism(tp=2, pp=2)),
    ("gemma-2-9b", "l40s", Precision(), Parallelism(tp=2)),
    ("mixtral-8x7b", "h100-sxm", Precision(), Parallelism(tp=2, ep=2)),
    ("qwen3-30b-a3b", "b200", Precision("fp8", "fp8"), Parallelism(tp=2, ep=4, attention_dp=2)),
    ("deepseek-v3", "h200-sxm", Precision("fp8", "fp8"), Parallelism(tp=8)),
    ("deepseek-v3", "h200-sxm", Precision("fp8", "fp8"), Parallelism(tp=8, pp=2)),
    ("nemotron-h-56b", "h100-sxm", Precision(), Parallelism(tp=4)),
    ("gpt-oss-20b", "h100-sxm", Precision("native"), Parallelism()),
    ("llama-3.1-8b", "v100-sxm2-32gb", Precision("fp16", "fp16", "fp16"), Parallelism()),
]
MODES = [("static", "closed_loop"), ("serving", "closed_loop"), ("serving", "offline")]


def _fields(result: EstimateResult) -> dict[str, object]:
    return {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}


def _assert_point(single: EstimateResult, sweep: EstimateResult, i: int) -> None:
    for name, value in _fields(single).items():
        other = getattr(sweep, name)
        if isinstance(value, np.ndarray):
            assert value.shape == (1,), name
            assert value.dtype.kind == other.dtype.kind, name
            if value.dtype.kind == "f":
                np.testing.assert_allclose(value[0], other[i], rtol=1e-12, atol=0, err_msg=name)
            else:
                assert value[0] == other[i], name
        else:
            assert value == other, name


@pytest.mark.parametrize(("model_id", "acc_id", "precision", "parallelism"), CASES)
@pytest.mark.parametrize(("mode", "load_pattern"), MODES)
@pytest.mark.parametrize("params", [DEFAULT_EFFICIENCY, CALIBRATED], ids=["priors", "calibrated"])
def test_single_points_equal_the_sweep(
    model_id: str,
    acc_id: str,
    precision: Precision,
    parallelism: Parallelism,
    mode: str,
    load_pattern: str,
    params: EfficiencyParams,
) -> None:
    model, acc = MODELS[model_id], ACCELERATORS[acc_id]
    for input_tokens, output_tokens in ((1024, 256), (3000, 1)):
        kwargs = {
            "precision": precision,
            "parallelism": parallelism,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "mode": mode,
            "params": params,
            "load_pattern": load_pattern,
        }
        sweep = estimate(model, acc, batch_sizes=BATCHES, **kwargs)  # type: ignore[arg-type]
        for i, batch in enumerate(BATCHES):
            single = estimate(model, acc, batch_sizes=[batch], **kwargs)  # type: ignore[arg-type]
            _assert_point(single, sweep, i)


def _one_and_two(
    model: ModelShape, acc: Accelerator, params: EfficiencyParams, precision: Precision
) -> tuple[object, object]:
    """Cost a mixed step for one point (floats) and for two equal points (arrays)."""

    def cost(points: int) -> object:
        groups = [
            AttentionGroup.of(np.full(points, 6.0), 1.0, 2000.0),
            AttentionGroup.of(np.full(points, 1.0), 512.0, 1024.0),
        ]
        return step_cost(
            model,
            acc,
            precision=precision,
            parallelism=Parallelism(tp=2),
            groups=groups,
            params=params,
            phase="mixed",
        )

    return cost(1), cost(2)


@pytest.mark.parametrize("model_id", ["llama-3.1-70b", "deepseek-v3", "nemotron-h-56b"])
def test_one_point_rows_and_bound_equal_the_array_path(model_id: str) -> None:
    one, two = _one_and_two(
        MODELS[model_id], ACCELERATORS["h100-sxm"], CALIBRATED, Precision("fp8", "fp8")
    )
    assert one.floats is not None  # type: ignore[attr-defined]  # the float path ran
    assert two.floats is None  # type: ignore[attr-defined]
    rows_one, rows_two = one.rows, two.rows  # type: ignore[attr-defined]
    assert [(r.name, r.phase, r.kind) for r in rows_one] == [
        (r.name, r.phase, r.kind) for r in rows_two
    ]
    for a, b in zip(rows_one, rows_two, strict=True):
        for name in ("flops", "bytes", "compute_s", "memory_s", "communication_s", "time_s"):
            got, want = getattr(a.cost, name), getattr(b.cost, name)
            assert got.shape == (1,)
            np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=0, err_msg=a.name)
        assert a.bound.tolist() == b.bound[:1].tolist()
    assert one.bound.tolist() == two.bound[:1].tolist()  # type: ignore[attr-defined]
    assert one.bound.dtype == two.bound.dtype  # type: ignore[attr-defined]
    np.testing.assert_allclose(one.time_s, two.time_s[:1], rtol=1e-12)  # type: ignore[attr-defined]


def _clear_memos() -> None:
    _weights_and_kv.cache_clear()
    _without_gemm_launch.cache_clear()
    _per_replica_constants.cache_clear()
    _CRITICAL_CACHE.clear()


def test_a_changed_input_gives_its_own_answer() -> None:
    """Memoised per-configuration values are keyed by everything they depend on.

    Each configuration's reference is computed with every memo empty; the single points then
    run one after another with the memos full of the other configurations' entries, so a memo
    keyed on too little would hand one configuration another's value.
    """
    model, acc = MODELS["mixtral-8x7b"], ACCELERATORS["h100-sxm"]
    base = {"input_tokens": 1024, "output_tokens": 256, "mode": "serving"}
    other = CALIBRATED.replace(gemm_kernel_latency_us_bf16=9.0, gemm_compute_efficiency_bf16=0.5)
    configs = [
        {"params": params, "precision": precision, "parallelism": parallelism}
        for params, precision, parallelism in itertools.product(
            (CALIBRATED, other),
            (Precision(), Precision("fp8", "fp8")),
            (Parallelism(tp=2), Parallelism(tp=4, ep=2)),
        )
    ]
    references = []
    for config in configs:
        _clear_memos()
        references.append(estimate(model, acc, batch_sizes=[2, 16], **base, **config))  # type: ignore[arg-type]
    _clear_memos()
    for _ in range(2):
        for config, reference in zip(configs, references, strict=True):
            single = estimate(model, acc, batch_sizes=[16], **base, **config)  # type: ignore[arg-type]
            _assert_point(single, reference, 1)
    assert len({float(r.e2e_latency_ms[1]) for r in references}) == len(configs)
    assert len({float(r.weights_gb[1]) for r in references}) == 4  # precision × layout


@pytest.mark.parametrize(
    ("change", "mode"),
    [
        ({"memory_bandwidth_efficiency": 0.0}, "static"),  # a step's float division by zero
        ({"prefill_chunk_tokens": 0.0}, "serving"),  # the timeline's (n = S_in / 0 chunks)
    ],
)
def test_a_division_by_zero_falls_back_to_the_array_answer(
    change: dict[str, float], mode: str
) -> None:
    """Where numpy answers inf or NaN, floats must not raise ZeroDivisionError instead."""
    params = DEFAULT_EFFICIENCY.replace(**change)
    model, acc = MODELS["llama-3.1-8b"], ACCELERATORS["h100-sxm"]
    kwargs = {"input_tokens": 512, "output_tokens": 64, "params": params, "mode": mode}
    with np.errstate(all="ignore"):
        single = estimate(model, acc, batch_sizes=[4], **kwargs)  # type: ignore[arg-type]
        sweep = estimate(model, acc, batch_sizes=[1, 4], **kwargs)  # type: ignore[arg-type]
    assert not np.isfinite(single.ttft_ms[0])
    for name, value in _fields(single).items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(value, getattr(sweep, name)[1:], err_msg=name)
        else:
            assert value == getattr(sweep, name), name
