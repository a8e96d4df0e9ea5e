"""DeepSeek-V3's multi-token-prediction module: import, parameters, memory, MTP drafting."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from engine_refs import llama_31_8b, make_h100, make_h200

from service.engine.efficiency import DEFAULT_EFFICIENCY
from service.engine.errors import EngineError, InvalidShapeError
from service.engine.hf_import import shape_from_hf_config
from service.engine.memory import (
    RUNTIME_OVERHEAD_BYTES,
    activation_bytes,
    kv_cache_bytes_per_token,
    mtp_weight_bytes_per_gpu,
    weight_bytes_per_gpu,
)
from service.engine.operators import AttentionGroup, step_cost
from service.engine.parallel import Parallelism
from service.engine.param_count import count_parameters
from service.engine.precision import Precision
from service.engine.shapes import ModelShape
from service.engine.traffic.lengths import LengthDistribution
from service.engine.traffic.model import Replica, TrafficSpec, kv_capacity_tokens

CONFIG_DIR = Path(__file__).resolve().parents[1] / "data" / "hf_configs"
PARAMS = DEFAULT_EFFICIENCY.replace(admission_wait_steps=0.0, prefill_queue_share=0.0)
FP8 = Precision(weights="fp8")
TP8 = Parallelism(tp=8)


def _shape(name: str) -> ModelShape:
    return shape_from_hf_config(name, json.loads((CONFIG_DIR / f"{name}.json").read_text()))


def _v3() -> ModelShape:
    return _shape("deepseek-ai--DeepSeek-V3")


def test_importer_reads_num_nextn_predict_layers() -> None:
    assert _v3().mtp_layers == 1
    assert _shape("moonshotai--Kimi-K2-Instruct").mtp_layers == 0  # the config says 0
    assert _shape("meta-llama--Meta-Llama-3.1-8B").mtp_layers == 0  # no such key
    block = _v3().mtp_block()
    assert (block.num_layers, block.num_moe_layers, block.mtp_layers) == (1, 1, 0)
    with pytest.raises(InvalidShapeError, match="mtp_layers"):
        replace(_v3(), mtp_layers=62).validate()


def test_mtp_parameters_by_hand() -> None:
    """One MTP module of DeepSeek-V3 (README_WEIGHTS.md; arXiv:2412.19437 §2.2), d = 7168:

    MLA attention  7168·1536 + 1536 + 1536·128·192 + 7168·576 + 512 + 512·128·256
                   + 128·128·7168                                     =    187,107,328
    2 block norms  2·7168                                             =         14,336
    MoE            (256 + 1)·3·7168·2048 + 7168·256 (router)          = 11,320,164,352
    eh_proj        2·7168·7168                                        =    102,760,448
    enorm, hnorm, head norm  3·7168                                   =         21,504
    one module                                                        = 11,610,067,968
    README_WEIGHTS: "11.5B unique parameters" (0.96% below). The checkpoint stores the module
    with its own copies of the embedding and head, 2·129280·7168 = 1,853,358,080: 13.46B, and
    671,026,404,352 + 13,463,426,048 = 684,489,830,400, the published 685B (README: "671B of
    the Main Model weights and 14B of the Multi-Token Prediction (MTP) Module weights").
    """
    counts = count_parameters(_v3())
    assert counts.total == 671_026_404_352  # the main model: unchanged by the MTP module
    assert counts.mtp_per_module == 11_610_067_968
    assert counts.checkpoint_total == 684_489_830_400
    assert counts.checkpoint_total - counts.total == 13_463_426_048
    assert counts.checkpoint_total / 1e9 == pytest.approx(685.0, rel=1e-3)
    assert counts.mtp_per_module / 1e9 == pytest.approx(11.5, rel=0.01)
    kimi = count_parameters(_shape("moonshotai--Kimi-K2-Instruct"))
    assert kimi.mtp_per_module == 0 and kimi.checkpoint_total == kimi.total


def test_mtp_weights_in_memory_by_hand() -> None:
    """tp = 1, FP8 weights: the block's linear weights (attention 187,107,328 − 2,048 MLA norms,
    257 experts of 3·7168·2048) in the weights dtype; norms (2·7168 + 1536 + 512), router
    7168·256, eh_proj 2·7168² and three norms 3·7168 in 16 bits — together the 11.61B
    parameters of one module, the shared embedding and head not held again."""
    v3 = _v3()
    mtp = mtp_weight_bytes_per_gpu(v3, FP8)
    quantized = 187_105_280 + 257 * 3 * 7168 * 2048
    unquantized = 16_384 + 7168 * 256 + 2 * 7168 * 7168 + 3 * 7168
    assert quantized + unquantized == count_parameters(v3).mtp_per_module
    assert mtp.quantized_bytes == pytest.approx(quantized * FP8.weight_bytes_per_element)
    assert mtp.unquantized_bytes == pytest.approx(2.0 * unquantized)
    # The main model's weights do not include the module (held only when it drafts).
    assert weight_bytes_per_gpu(v3, FP8) == weight_bytes_per_gpu(replace(v3, mtp_layers=0), FP8)
    assert mtp_weight_bytes_per_gpu(llama_31_8b(), Precision()).total_bytes == 0.0


def test_mtp_drafter_holds_its_weights_and_kv_cache() -> None:
    """KV capacity with the MTP drafter: (usable − weights − MTP weights − activations −
    runtime) / (61 + 1 MLA layers · 576 values · 2 bytes / 61 per layer)."""
    v3, h200 = _v3(), make_h200()
    kw = {"precision": FP8, "parallelism": TP8, "step_tokens": 8192.0, "memory_utilization": 0.9}
    plain = kv_capacity_tokens(v3, h200, **kw)  # type: ignore[arg-type]
    with_mtp = kv_capacity_tokens(v3, h200, mtp=True, **kw)  # type: ignore[arg-type]
    weights = weight_bytes_per_gpu(v3, FP8, TP8).total_bytes
    weights += mtp_weight_bytes_per_gpu(v3, FP8, TP8).total_bytes
    act = float(activation_bytes(v3, FP8, TP8, step_tokens=8192.0, logit_rows=0.0))
    free = h200.memory_bytes * 0.9 - weights - act - RUNTIME_OVERHEAD_BYTES
    per_token = kv_cache_bytes_per_token(v3, FP8, TP8).per_token_bytes
    assert per_token == 61 * 576 * 2.0
    assert with_mtp == pytest.approx(free / (62 * 576 * 2.0))
    assert with_mtp < plain


def _replica(model: ModelShape, **knobs: object) -> Replica:
    return Replica.prepare(
        model,
        make_h200(),
        precision=FP8,
        parallelism=TP8,
        params=PARAMS,
        max_num_batched_tokens=2048,
        max_running_requests=None,
        scheduling="decode_first",
        max_input_tokens=1024,
        max_output_tokens=256,
        **knobs,  # type: ignore[arg-type]
    )


def _step_s(model: ModelShape, tokens: float, context: float, **params: float) -> float:
    step = step_cost(
        model,
        make_h200(),
        precision=FP8,
        parallelism=TP8,
        groups=[AttentionGroup.of(1.0, tokens, context)],
        params=PARAMS.replace(**params),
        phase="check",
    )
    return float(step.time_s)


def _lm_head_s(model: ModelShape, rows: float) -> float:
    step = step_cost(
        model,
        make_h200(),
        precision=FP8,
        parallelism=TP8,
        groups=[AttentionGroup.of(rows, 1.0, 0.0)],
        params=PARAMS,
        phase="flat",
    )
    return float(sum(float(r.time_s) for r in step.rows if r.name == "lm_head"))


def test_mtp_drafter_prices_k_mtp_block_decode_steps() -> None:
    """One request at a time, k = 3 drafts with α = 0.5: E = 1.875, 255 tokens after the first
    take ceil(255/1.875) = 136 steps at mean context c = 1025 + 1.875·67.5. With the MTP
    drafter each step adds 3 decode steps of the MTP block (one MoE layer at one token, its
    attention over c, the shared LM head on one row, no per-step overhead: t_mtp), so

        TPOT(mtp) − TPOT(generic) = 136 · 3 · t_mtp / 255.
    """
    v3 = _v3()
    spec = TrafficSpec(
        0.001,
        LengthDistribution.fixed(1024),
        LengthDistribution.fixed(256),
        num_requests=20,
        arrival_process="gamma",
        arrival_cv=0.01,
        draft_tokens=3,
        acceptance_rate=0.5,
        drafter="mtp",
    )
    mtp = _replica(v3, draft_tokens=3, acceptance_rate=0.5, drafter="mtp")
    generic = _replica(v3, draft_tokens=3, acceptance_rate=0.5)
    c = 1025.0 + 1.875 * 67.5
    mtp_s = _step_s(v3.mtp_block(), 1.0, c, step_overhead_us=0.0)
    assert mtp.table.draft is not None and generic.table.draft is None
    assert mtp.table.draft_s(1, c) == pytest.approx(3 * mtp_s, rel=0.01)
    assert mtp.table.decode_s(1, c) - generic.table.decode_s(1, c) == pytest.approx(
        3 * mtp_s, rel=1e-9
    )
    added = mtp.run(spec).tpot_ms.p50 - generic.run(spec).tpot_ms.p50
    assert added == pytest.approx(136 * 3 * mtp_s * 1e3 / 255, rel=0.01)
    # One MTP block costs far less than the 61-layer model's verify step.
    verify_s = _step_s(v3, 4.0, c) + _lm_head_s(v3, 4.0) - _lm_head_s(v3, 1.0)
    assert 3 * mtp_s < 0.1 * verify_s


def test_mtp_drafter_needs_mtp_layers() -> None:
    with pytest.raises(EngineError, match="drafter mtp"):
        Replica.prepare(
            llama_31_8b(),
            make_h100(),
            precision=Precision(),
            parallelism=Parallelism(),
            params=PARAMS,
            max_num_batched_tokens=2048,
            max_running_requests=None,
            scheduling="decode_first",
            max_input_tokens=128,
            max_output_tokens=32,
            draft_tokens=2,
            acceptance_rate=0.6,
            drafter="mtp",
        )
    spec = TrafficSpec(1.0, LengthDistribution.fixed(8), LengthDistribution.fixed(8), drafter="x")
    with pytest.raises(EngineError, match=r"speculative\.drafter"):
        spec.validate()
