"""Schemathesis generation hooks: teach the fuzzer the rules JSON Schema cannot state.

Some operations rightly refuse a schema-valid request with 422 for a rule that compares two
values or depends on the stored catalog; each such rule is written in the operation's
description (GET /openapi.json). The ``map_case`` hook below rewrites **positive** cases only
so that they also keep those rules, using the generated values (a divisor nearest the generated
one, a minimum of two generated values, a catalog id picked by the generated id), so that
``positive_data_acceptance`` runs on every operation. Negative cases are left untouched, so
``negative_data_rejection`` still tests the server's own checks.

Loaded by the contract tests (tests/quality/quality_contract.py imports it) and by the CLI:
``SCHEMATHESIS_HOOKS=tests/quality/contract_hooks.py schemathesis run ...`` (schemathesis.toml).
Catalog-dependent operations are pointed at the seeded catalog (hardware_catalog/, read with
the loader the seeding uses); merge patches target a few seeded ids that no other operation
reads, so a patched model or accelerator never changes what a later operation expects.
"""

from __future__ import annotations

import os
import sys
import zlib
from collections.abc import Callable
from typing import Any

import schemathesis
from schemathesis import GenerationMode

# `schemathesis run` loads this file by path: its sibling modules are imported from its folder.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from contract_catalog import (
    _ACCELERATORS,
    _PEAKS,
    _SHAPES,
    PATCHED_ACCELERATORS,
    PATCHED_MODELS,
    PLAN_POINTS,
    READ_ACCELERATORS,
    READ_MODELS,
    JsonDict,
    _divisor_at_most,
    _int,
    _pick,
    fix_layout,
)
from contract_uploads import fix_calibration, fix_import, unique_idempotency_key

from service.engine.precision import WIDE_DTYPES, Precision
from service.engine.shapes import ModelShape


def _if_match(case: schemathesis.Case) -> None:
    """Every other generated If-Match becomes "*" (the description: "`*` or ETags from an
    earlier response; anything else ... gives 412"), so merges are tried, not only 412s."""
    headers = case.headers or {}
    value = headers.get("If-Match")
    if value not in (None, "*") and zlib.crc32(repr(value).encode()) % 2:
        headers["If-Match"] = "*"


# ---- models: POST / PUT / PATCH /v1/models ------------------------------------------------


def fix_model_shape(body: JsonDict) -> None:
    """Make a full model body keep the rules of POST /v1/models that compare two fields.

    Description: "num_kv_heads divides num_heads, experts_per_token <= num_experts,
    first_dense_layers < num_layers and num_sliding_layers <= num_layers; mtp_layers <=
    num_layers. A layer_pattern has one letter per layer and at least one `*` ...".
    """
    layers = max(1, _int(body.get("num_layers"), 1))
    heads = max(1, _int(body.get("num_heads"), 1))
    body["num_kv_heads"] = _divisor_at_most(heads, max(1, _int(body.get("num_kv_heads"), 1)))
    experts = _int(body.get("num_experts"), 0)
    pattern = body.get("layer_pattern") or ""
    if pattern:
        # One letter per layer (the generated letters, repeated or cut), at least one `*`,
        # an FFN layer (`-`) for the MoE layers, no MTP modules; Mamba2 fields positive with
        # mamba_n_groups dividing mamba_num_heads.
        pattern = (pattern * (layers // len(pattern) + 1))[:layers]
        if "*" not in pattern:
            pattern = "*" + pattern[1:]
        if experts and "-" not in pattern:
            pattern = pattern[:-1] + "-" if layers > 1 else pattern
            if "-" not in pattern:
                pattern = ""
        body["layer_pattern"] = pattern
    if pattern:
        body["mtp_layers"] = 0
        if "M" in pattern:
            for name in (
                "mamba_num_heads",
                "mamba_head_dim",
                "ssm_state_size",
                "mamba_conv_kernel",
                "mamba_chunk_size",
            ):
                body[name] = max(1, _int(body.get(name), 1))
            body["mamba_n_groups"] = _divisor_at_most(
                body["mamba_num_heads"], max(1, _int(body.get("mamba_n_groups"), 1))
            )
    else:
        body["mtp_layers"] = min(_int(body.get("mtp_layers"), 0), layers)
    ffn_layers = pattern.count("-") if pattern else layers
    attention_layers = pattern.count("*") if pattern else layers
    if experts:
        body["experts_per_token"] = min(max(1, _int(body.get("experts_per_token"), 1)), experts)
        body["first_dense_layers"] = min(_int(body.get("first_dense_layers"), 0), ffn_layers - 1)
    sliding = min(_int(body.get("num_sliding_layers"), 0), attention_layers)
    body["num_sliding_layers"] = sliding
    # Only an MoE checkpoint quantizes its experts alone (the POST schema's if/then; a merge
    # patch may set it, or num_experts 0, on its own).
    if not experts and body.get("native_quantized_layers") == "experts":
        body["native_quantized_layers"] = "all"


_SHAPE_KEYS = frozenset(ModelShape.__dataclass_fields__) - {"id", "name"}


def fix_model_patch(body: JsonDict, model_id: str) -> None:
    """A merge patch whose merged model stays valid whatever the stored shape is.

    Description of PATCH /v1/models/{model_id}: "The merged model must be a valid POST
    /v1/models body". A patch that touches a shape field carries every shape field (the
    generated ones, the rest from the seeded shape, defaults included: an earlier patch of
    the run may have stored a field the seeded record leaves out, e.g. a layer_pattern),
    made consistent as for POST.
    """
    if not any(key in _SHAPE_KEYS for key in body):
        return
    seeded = _SHAPES[model_id]
    full = {k: getattr(seeded, k) for k in _SHAPE_KEYS}
    full.update({k: v for k, v in body.items() if k in _SHAPE_KEYS and v is not None})
    for key, value in {"intermediate_size": 1, "moe_intermediate_size": 1}.items():
        if not _int(full.get(key), 0):
            full[key] = value
    if _int(full.get("kv_lora_rank"), 0):
        full["qk_rope_head_dim"] = max(1, _int(full.get("qk_rope_head_dim"), 1))
        full["v_head_dim"] = max(1, _int(full.get("v_head_dim"), 1))
    if _int(full.get("num_sliding_layers"), 0):
        full["sliding_window_tokens"] = max(1, _int(full.get("sliding_window_tokens"), 1))
    fix_model_shape(full)
    body.update(full)


# ---- accelerators: POST / PUT / PATCH /v1/accelerators --------------------------------------


def fix_accelerator(body: JsonDict) -> None:
    """A measured_matmul_tflops entry only for a dtype with a peak, and at most that peak.

    Description of POST /v1/accelerators: "422 (not stated in the schema): a
    measured_matmul_tflops entry for a dtype peak_tflops lacks, or above the peak_tflops of its
    dtype." A measured dtype without a peak gets its measurement as its peak.
    """
    fix_interconnect(body)
    fix_measured_bandwidth(body)
    measured = body.get("measured_matmul_tflops")
    peaks = body.get("peak_tflops")
    if not isinstance(measured, dict) or not isinstance(peaks, dict):
        return
    for dtype, value in measured.items():
        if value is None:
            continue
        if peaks.get(dtype) is None:
            peaks[dtype] = value
        measured[dtype] = min(value, peaks[dtype])


def fix_accelerator_patch(body: JsonDict) -> None:
    """The merged accelerator stays valid whatever is stored (PATCH: "The merged accelerator
    must be a valid POST /v1/accelerators body ... a measured_matmul_tflops for a dtype the
    stored peak_tflops lacks"): no peak is removed, a measured value comes with its peak, and a
    peak that changes drops the stored measurement of its dtype (which could exceed it), and so
    does a new memory bandwidth the stored measured one; a measured bandwidth comes with a
    sheet bandwidth (the stored one could be below it)."""
    peaks = body.get("peak_tflops")
    if isinstance(peaks, dict):
        for dtype in [d for d, v in peaks.items() if v is None]:
            del peaks[dtype]
        if not peaks:
            del body["peak_tflops"]
    measured = body.get("measured_matmul_tflops")
    if isinstance(measured, dict):
        if any(v is not None for v in measured.values()):
            body.setdefault("peak_tflops", {})
        fix_accelerator(body)
        for dtype in body.get("peak_tflops", {}):
            measured.setdefault(dtype, None)
    elif "peak_tflops" in body and "measured_matmul_tflops" not in body:
        body["measured_matmul_tflops"] = dict.fromkeys(body["peak_tflops"])
    if "memory_bandwidth_gb_s" in body and "measured_memory_bandwidth_gb_s" not in body:
        body["measured_memory_bandwidth_gb_s"] = None  # the stored one could exceed it
    measured_bandwidth = body.get("measured_memory_bandwidth_gb_s")
    if isinstance(measured_bandwidth, int | float) and "memory_bandwidth_gb_s" not in body:
        body["memory_bandwidth_gb_s"] = measured_bandwidth  # the stored one could be below it
    fix_measured_bandwidth(body)
    fix_interconnect(body)


def fix_measured_bandwidth(body: JsonDict) -> None:
    """measured_memory_bandwidth_gb_s (field description): "at most memory_bandwidth_gb_s"."""
    measured, spec = body.get("measured_memory_bandwidth_gb_s"), body.get("memory_bandwidth_gb_s")
    if isinstance(measured, int | float) and isinstance(spec, int | float) and measured > spec:
        body["measured_memory_bandwidth_gb_s"] = spec


def fix_interconnect(body: JsonDict) -> None:
    """interconnect_gb_s (field description): "0 (no scale-up link) or at least 0.001"."""
    value = body.get("interconnect_gb_s")
    if isinstance(value, int | float) and 0 < value < 0.001:
        body["interconnect_gb_s"] = 0.001


# ---- catalog-dependent analyses: intensity, roofline, sweep --------------------------------


def fix_precision(shape: ModelShape, precision: JsonDict, accelerator: str) -> None:
    """Dtypes the accelerator has a peak for ("the accelerator needs a peak for the precision's
    dtypes"): the GEMM dtype and the 16-bit (or wider) dtype of embeddings and LM head; other
    dtypes are replaced by bf16, or fp16 where the accelerator has no bf16 peak."""
    peaks = _PEAKS[accelerator]
    fallback = "bf16" if "bf16" in peaks else "fp16"
    weights = precision.get("weights", "native")
    resolved = shape.native_weights_dtype if weights in ("native", None) else weights
    asked = Precision(weights=resolved, activations=precision.get("activations", "auto"))
    p = asked.resolved(shape, _ACCELERATORS[accelerator])
    needed = {p.compute_dtype, p.activations if p.activations in WIDE_DTYPES else "bf16"}
    if not needed <= peaks:
        precision["weights"] = fallback
        precision["activations"] = fallback


def _context(shape: ModelShape, tokens: int, phase: object) -> int:
    """Tokens "within the model's context window" (max_context_tokens; 0: unbounded): a
    decode step adds one token to the context_tokens already cached."""
    window = shape.max_context_tokens - (0 if phase == "prefill" else 1)
    return max(1, min(tokens, window)) if shape.max_context_tokens else tokens


def fix_intensity(body: JsonDict) -> None:
    model = _pick(READ_MODELS, body.get("model"))
    shape = _SHAPES[model]
    body["model"] = model
    body["accelerator"] = _pick(READ_ACCELERATORS, body.get("accelerator"))
    precision = body.setdefault("precision", {})
    fix_precision(shape, precision, body["accelerator"])
    if isinstance(body.get("parallelism"), dict):
        fix_layout(shape, body["parallelism"])
    body["context_tokens"] = _context(
        shape, _int(body.get("context_tokens"), 1), body.get("phase", "decode")
    )


def fix_chart_query(query: JsonDict, *, sweep: bool) -> None:
    """Roofline and sweep charts: "the rules of POST /v1/intensity" (resp. estimates) on the
    query; the roofline's context_tokens and a sweep's input + output tokens within the
    context window."""
    model = _pick(READ_MODELS, query.get("model"))
    shape = _SHAPES[model]
    query["model"] = model
    query["accelerator"] = _pick(READ_ACCELERATORS, query.get("accelerator"))
    precision = {
        "weights": query.get("weights", "bf16"),
        "activations": query.get("activations", "auto"),
    }
    fix_precision(shape, precision, query["accelerator"])
    if "weights" in query or precision["weights"] != query.get("weights", "bf16"):
        query["weights"] = precision["weights"]
    if "activations" in query or precision["activations"] != query.get("activations", "auto"):
        query["activations"] = precision["activations"]
    layout = {
        k: query[k] for k in ("tp", "pp", "ep", "attention_dp", "pp_virtual_stages") if k in query
    }
    fix_layout(shape, layout)
    query.update(layout)
    if not sweep:  # context_tokens defaults to 2048
        tokens = _int(query.get("context_tokens"), 2048)
        fitted = _context(shape, tokens, query.get("phase", "decode"))
        if fitted != tokens or "context_tokens" in query:
            query["context_tokens"] = fitted
    if sweep:
        # the estimate's rule: open-loop and offline loads are serving questions
        if query.get("mode", "serving") == "static" and query.get("load_pattern") is not None:
            query["load_pattern"] = "closed_loop"
        window = shape.max_context_tokens
        inp, out = _int(query.get("input_tokens"), 1024), _int(query.get("output_tokens"), 256)
        if window and inp + out > window:
            query["input_tokens"] = max(1, min(inp, window // 2))
            query["output_tokens"] = max(1, min(out, window - query["input_tokens"]))


# ---- plans and the frontier chart: the work budget -----------------------------------------


def _layout_bound(
    max_gpus: int,
    tp: list[int] | None,
    pp: list[int] | None,
    ep: list[int] | None,
    adp: list[int] | None,
) -> int:
    """Upper bound on layouts per model (engine/planning.py layouts(): tp x attention_dp x pp
    x ep, defaults powers of two; MoE attention_dp adds the GPU limit, ep {1, group})."""
    powers = max_gpus.bit_length()
    return (
        (len(set(tp)) if tp else powers)
        * (len(set(pp)) if pp else 1)
        * (len(set(ep)) if ep else 2)
        * (len(set(adp)) if adp else powers + 1)
    )


def fix_plan(body: JsonDict) -> None:
    """Keep candidates x concurrency levels within the 65,536-point budget (POST /v1/plans):
    an upper bound on the candidates (models x accelerators x precisions x layouts, every
    catalog accelerator when none is named) sets concurrency_levels at most budget / bound,
    after trimming the accelerators named (or naming a few) while the bound passes it."""
    body["models"] = [_pick(READ_MODELS, m) for m in body.get("models") or ["x"]]
    if body.get("accelerators"):
        body["accelerators"] = [_pick(READ_ACCELERATORS, a) for a in body["accelerators"]]
    lists = {k: body.get(k) for k in ("tp", "pp", "ep", "attention_dp")}
    per_model = _layout_bound(
        _int(body.get("max_gpus_per_replica"), 8),
        lists["tp"],
        lists["pp"],
        lists["ep"],
        lists["attention_dp"],
    )
    precisions = len(body.get("precisions") or [None, None])
    models = len(set(body["models"]))
    accelerators = body.get("accelerators") or READ_ACCELERATORS + PATCHED_ACCELERATORS
    while (
        len(accelerators) > 1 and models * len(accelerators) * precisions * per_model > PLAN_POINTS
    ):
        accelerators = accelerators[: len(accelerators) // 2]
        body["accelerators"] = accelerators
    bound = models * len(set(accelerators)) * precisions * per_model
    levels = _int(body.get("concurrency_levels"), 64)
    body["concurrency_levels"] = max(1, min(levels, PLAN_POINTS // max(1, bound)))


def fix_frontier_query(query: JsonDict) -> None:
    """The frontier chart is a plan at 64 concurrency levels: the same budget, met by trimming
    the accelerators and layouts it considers (GET /v1/charts/frontier: "422 past the plan
    work budget, which the number of catalog accelerators and layouts considered decides")."""
    models = [_pick(READ_MODELS, m) for m in str(query.get("model") or "x").split(",")]
    query["model"] = ",".join(models)
    accs = str(query.get("accelerator") or "").split(",") if query.get("accelerator") else []
    accs = [_pick(READ_ACCELERATORS, a) for a in accs] or READ_ACCELERATORS + PATCHED_ACCELERATORS
    tps = [int(t) for t in str(query["tp"]).split(",")] if query.get("tp") else None
    precisions = len(str(query["precisions"]).split(",")) if query.get("precisions") else 2
    max_gpus = _int(query.get("max_gpus_per_replica"), 8)
    budget = PLAN_POINTS // 64
    while (
        len(accs) > 1
        and len(set(models))
        * len(accs)
        * precisions
        * _layout_bound(max_gpus, tps, None, None, None)
        > budget
    ):
        accs = accs[: len(accs) // 2]
    while (
        max_gpus > 1
        and len(set(models))
        * len(accs)
        * precisions
        * _layout_bound(max_gpus, tps, None, None, None)
        > budget
    ):
        max_gpus //= 2
        query["max_gpus_per_replica"] = max_gpus
    if (
        tps
        and len(set(models))
        * len(accs)
        * precisions
        * _layout_bound(max_gpus, tps, None, None, None)
        > budget
    ):
        query["tp"] = str(tps[0])
    query["accelerator"] = ",".join(accs)


# ---- the hook --------------------------------------------------------------------------------


def _body(case: schemathesis.Case) -> JsonDict | None:
    return case.body if isinstance(case.body, dict) else None


def _query(case: schemathesis.Case) -> JsonDict:
    if case.query is None:
        case.query = {}
    return case.query


def _models_post(case: schemathesis.Case) -> None:
    if (body := _body(case)) is not None:
        fix_model_shape(body)


def _models_put(case: schemathesis.Case) -> None:
    _if_match(case)
    # PUT replaces a stored model (404 for an id the catalog lacks): aim it at a patched id.
    case.path_parameters["model_id"] = _pick(PATCHED_MODELS, case.path_parameters.get("model_id"))
    _models_post(case)


def _models_patch(case: schemathesis.Case) -> None:
    _if_match(case)
    model_id = _pick(PATCHED_MODELS, case.path_parameters.get("model_id"))
    case.path_parameters["model_id"] = model_id
    if (body := _body(case)) is not None:
        fix_model_patch(body, model_id)


def _accelerators_post(case: schemathesis.Case) -> None:
    if (body := _body(case)) is not None:
        fix_accelerator(body)


def _accelerators_put(case: schemathesis.Case) -> None:
    _if_match(case)
    case.path_parameters["accelerator_id"] = _pick(
        PATCHED_ACCELERATORS, case.path_parameters.get("accelerator_id")
    )
    _accelerators_post(case)


def _accelerators_patch(case: schemathesis.Case) -> None:
    _if_match(case)
    case.path_parameters["accelerator_id"] = _pick(
        PATCHED_ACCELERATORS, case.path_parameters.get("accelerator_id")
    )
    if (body := _body(case)) is not None:
        fix_accelerator_patch(body)


def _intensity(case: schemathesis.Case) -> None:
    if (body := _body(case)) is not None:
        fix_intensity(body)


def _plans(case: schemathesis.Case) -> None:
    if (body := _body(case)) is not None:
        fix_plan(body)


FIXERS: dict[str, Callable[[schemathesis.Case], None]] = {
    "POST /v1/models": _models_post,
    "PUT /v1/models/{model_id}": _models_put,
    "PATCH /v1/models/{model_id}": _models_patch,
    "POST /v1/accelerators": _accelerators_post,
    "PUT /v1/accelerators/{accelerator_id}": _accelerators_put,
    "PATCH /v1/accelerators/{accelerator_id}": _accelerators_patch,
    "POST /v1/intensity": _intensity,
    "GET /v1/charts/roofline": lambda case: fix_chart_query(_query(case), sweep=False),
    "GET /v1/charts/sweep": lambda case: fix_chart_query(_query(case), sweep=True),
    "POST /v1/plans": _plans,
    "GET /v1/charts/frontier": lambda case: fix_frontier_query(_query(case)),
    "POST /v1/models/import": fix_import,
    "POST /v1/calibrations": fix_calibration,
}


@schemathesis.hook
def map_case(context: schemathesis.HookContext, case: schemathesis.Case) -> schemathesis.Case:
    """Rewrite a positive case of an operation in FIXERS to keep its documented rules."""
    operation = context.operation
    meta = case.meta
    if operation is None or meta is None or meta.generation.mode != GenerationMode.POSITIVE:
        return case
    fixer = FIXERS.get(f"{operation.method.upper()} {operation.path}")
    if fixer is not None:
        fixer(case)
    return case


@schemathesis.hook
def before_call(context: schemathesis.HookContext, case: schemathesis.Case, kwargs: Any) -> None:
    """Positive calibration uploads: an Idempotency-Key unique to the request as sent."""
    operation = context.operation
    meta = case.meta
    if operation is None or meta is None or meta.generation.mode != GenerationMode.POSITIVE:
        return
    if f"{operation.method.upper()} {operation.path}" == "POST /v1/calibrations":
        unique_idempotency_key(case)
