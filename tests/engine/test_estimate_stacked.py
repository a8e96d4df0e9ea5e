"""estimate_stacked: one vectorised pass returns exactly what estimate() returns per member."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from engine_refs import (
    deepseek_v3,
    gemma_2_9b,
    llama_31_8b,
    make_a100,
    make_h100,
    make_h200,
    mixtral_8x7b,
)

from service.engine.efficiency import DEFAULT_EFFICIENCY
from service.engine.errors import EngineError, UnsupportedDtypeError
from service.engine.estimate import EstimateResult, estimate, estimate_stacked
from service.engine.hardware import Accelerator
from service.engine.memory import max_batch_size
from service.engine.parallel import Parallelism
from service.engine.precision import Precision
from service.engine.shapes import ModelShape

FP8 = Precision(weights="fp8", activations="fp8", kv_cache="fp8")
NUMERIC = [f.name for f in dataclasses.fields(EstimateResult)]


def accelerators() -> list[Accelerator]:
    """Accelerators that differ in every figure the formulas read (price, link, memory type)."""
    h100, h200 = make_h100(), make_h200()
    return [
        h100,
        h200,
        make_a100(),
        dataclasses.replace(h100, id="h100-no-link", interconnect_gb_s=0.0, tdp_w=0.0),
        dataclasses.replace(h200, id="gddr", memory_type="GDDR6", memory_gb=48.0),
    ]


def assert_same(got: EstimateResult, want: EstimateResult) -> None:
    for name in NUMERIC:
        a, b = getattr(got, name), getattr(want, name)
        if isinstance(b, np.ndarray) and b.dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=0.0, equal_nan=True, err_msg=name)
        elif isinstance(b, np.ndarray):
            np.testing.assert_array_equal(a, b, err_msg=name)
        elif isinstance(b, float):
            assert a == pytest.approx(b, rel=1e-9), name
        else:
            assert a == b, name


CASES = [
    (llama_31_8b(), Precision(), Parallelism()),
    (llama_31_8b(), FP8, Parallelism(tp=2)),
    (deepseek_v3(), FP8, Parallelism(tp=8, ep=8)),
    (mixtral_8x7b(), Precision(), Parallelism(tp=2, pp=2)),
    (gemma_2_9b(), Precision(), Parallelism(tp=2)),
]


@pytest.mark.parametrize("mode", ["static", "serving"])
@pytest.mark.parametrize(("model", "precision", "layout"), CASES)
def test_stacked_matches_estimate_per_member(
    mode: str, model: ModelShape, precision: Precision, layout: Parallelism
) -> None:
    accs = [a for a in accelerators() if precision.compute_dtype in a.peak_tflops]
    members = [
        (acc, s_in, s_out, batches, price)
        for k, acc in enumerate(accs)
        for s_in, s_out, batches, price in (
            (128 + 37 * k, 64, [1.0, 3.0, 64.0, 900.0], None),
            (20_000, 1 + k, [7.0], 1.25 * (k + 1)),
            (1, 4096, [2.0, 2.0, 5000.0], None),
        )
    ]
    stacked = estimate_stacked(
        model,
        [m[0] for m in members],
        precision=precision,
        parallelism=layout,
        input_tokens=[m[1] for m in members],
        output_tokens=[m[2] for m in members],
        batch_sizes=[m[3] for m in members],
        mode=mode,
        params=DEFAULT_EFFICIENCY.replace(sequence_overhead_us=40.0, prefill_queue_share=0.5),
        prices_usd_per_hour=[m[4] for m in members],
    )
    assert len(stacked) == len(members)
    for got, (acc, s_in, s_out, batches, price) in zip(stacked, members, strict=True):
        want = estimate(
            model,
            acc,
            precision=precision,
            parallelism=layout,
            input_tokens=s_in,
            output_tokens=s_out,
            batch_sizes=batches,
            mode=mode,
            params=DEFAULT_EFFICIENCY.replace(sequence_overhead_us=40.0, prefill_queue_share=0.5),
            price_usd_per_hour=price,
        )
        assert_same(got, want)
        scalar_limit = max_batch_size(
            model,
            acc,
            precision=precision,
            parallelism=layout,
            context_tokens=float(s_in + s_out),
            step_tokens=DEFAULT_EFFICIENCY.prefill_chunk_tokens,
        )
        assert scalar_limit == got.max_batch_size


def test_stacked_without_critical_batch_leaves_it_none() -> None:
    (r,) = estimate_stacked(
        llama_31_8b(),
        [make_h100()],
        input_tokens=[512],
        output_tokens=[128],
        batch_sizes=[[1.0, 8.0]],
        with_critical_batch=False,
    )
    assert r.critical_batch_size is None
    assert r.ttft_ms.shape == (2,)


def test_stacked_rejects_invalid_members() -> None:
    no_fp8 = dataclasses.replace(make_h100(), peak_tflops={"bf16": 989.5})
    kwargs = {"input_tokens": [512], "output_tokens": [128], "batch_sizes": [[1.0]]}
    with pytest.raises(UnsupportedDtypeError):
        estimate_stacked(llama_31_8b(), [no_fp8], precision=FP8, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(EngineError):
        estimate_stacked(
            llama_31_8b(), [make_h100()], input_tokens=[0], output_tokens=[1], batch_sizes=[[1.0]]
        )
    with pytest.raises(EngineError):
        estimate_stacked(
            llama_31_8b(), [make_h100()], input_tokens=[1, 2], output_tokens=[1], batch_sizes=[[1]]
        )
    assert (
        estimate_stacked(llama_31_8b(), [], input_tokens=[], output_tokens=[], batch_sizes=[]) == []
    )


def test_members_with_their_own_gemm_priors_match_single_estimates() -> None:
    # Per-accelerator priors (measured matmul fractions) differ only in GEMM compute efficiency;
    # stacking them must give what estimate() gives with each member's own parameters.
    model = llama_31_8b()
    accs = [make_h100(), make_h200(), make_a100()]
    own = [
        DEFAULT_EFFICIENCY.replace(gemm_compute_efficiency_bf16=e, gemm_compute_efficiency_fp8=f)
        for e, f in ((0.80, 0.71), (0.51, 0.71), (0.87, 0.60))
    ]
    batches = [np.array([1.0, 64.0, 512.0])] * 3
    stacked = estimate_stacked(
        model,
        accs,
        input_tokens=[4096] * 3,
        output_tokens=[128] * 3,
        batch_sizes=batches,
        mode="serving",
        params=own[0],
        member_params=own,
    )
    for acc, params, result in zip(accs, own, stacked, strict=True):
        single = estimate(
            model,
            acc,
            input_tokens=4096,
            output_tokens=128,
            batch_sizes=batches[0],
            mode="serving",
            params=params,
        )
        np.testing.assert_allclose(result.ttft_ms, single.ttft_ms, rtol=1e-9)
        np.testing.assert_allclose(result.tpot_ms, single.tpot_ms, rtol=1e-9)
        assert result.critical_batch_size == single.critical_batch_size
    # The priors matter: same chip figures, lower GEMM fraction, longer prefill-heavy TTFT.
    lower = estimate_stacked(
        model,
        [accs[1]],
        input_tokens=[4096],
        output_tokens=[128],
        batch_sizes=batches[:1],
        mode="serving",
        params=own[0],
    )
    assert stacked[1].ttft_ms[0] > lower[0].ttft_ms[0]


def test_members_may_not_differ_in_other_parameters() -> None:
    model = llama_31_8b()
    acc = make_h100()
    other = DEFAULT_EFFICIENCY.replace(step_overhead_us=DEFAULT_EFFICIENCY.step_overhead_us + 5)
    with pytest.raises(EngineError):
        estimate_stacked(
            model,
            [acc, acc],
            input_tokens=[128, 128],
            output_tokens=[16, 16],
            batch_sizes=[[1], [1]],
            member_params=[DEFAULT_EFFICIENCY, other],
        )
