"""map_case fixers for the two upload operations: POST /v1/calibrations and /v1/models/import.

Both take an input format the JSON Schema only outlines (a measurement file, a Hugging Face
config.json), so their positive cases are rewritten into inputs of that format whose rows agree
with themselves and with the seeded catalog, as each operation's description says the server
checks. Every number is taken from the generated case where the case has one (clamped or
rounded to a divisor, as the other hooks of contract_hooks.py do); where the generator had nothing
to give (a CSV body is a bare string, a config.json an object with only ``model_type``), the
numbers are drawn from a generator seeded by the generated value, so they still vary with it.
"""

from __future__ import annotations

import csv
import io
import json
import math
import random
import re
import zlib
from typing import Any

import schemathesis
from contract_catalog import (
    _ACCELERATOR_RECORDS,
    _SHAPES,
    READ_ACCELERATORS,
    READ_MODELS,
    JsonDict,
    _divisor_at_most,
    _int,
    _pick,
    fix_layout,
)

from service.api.schemas.calibrations import MEASUREMENT_DTYPES
from service.engine.hf_import import SUPPORTED_MODEL_TYPES
from service.engine.precision import DTYPE_BYTES, WIDE_DTYPES, Precision
from service.services.calibration_uploads import BACKEND_MAX_CHARS, BACKEND_PATTERN


def _seeded(generated: object) -> random.Random:
    """A generator seeded by a generated value (deterministic, varies with it)."""
    return random.Random(zlib.crc32(repr(generated).encode()))


def _catalog_id(options: list[str], generated: object) -> str:
    """The generated id if the catalog has it, else one picked by it (a case's body may be
    shared with another case, so a fixer may see its own output again)."""
    return (
        generated
        if isinstance(generated, str) and generated in options
        else _pick(options, generated)
    )


def _number(value: object, default: float) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return default


# ---- calibrations: rows that agree with themselves and the catalog -------------------------


def _peak_tflops(accelerator: str) -> dict[str, float]:
    peaks = _ACCELERATOR_RECORDS[accelerator]["peak_tflops"]
    return {str(k): float(v) for k, v in peaks.items() if v}  # type: ignore[union-attr]


def _bandwidth_bytes_s(accelerator: str) -> float:
    return float(_ACCELERATOR_RECORDS[accelerator]["memory_bandwidth_gb_s"]) * 1e9  # type: ignore[arg-type]


def fix_gemm(row: JsonDict, accelerator: str) -> None:
    """A dtype the accelerator has a peak for ("422: <accelerator> has no <dtype> peak") and a
    latency no shorter than the GEMM takes at that peak: 2·m·n·k flops (measured ≤ peak)."""
    peaks = {d: v for d, v in _peak_tflops(accelerator).items() if d in MEASUREMENT_DTYPES}
    if row.get("dtype") not in peaks:
        row["dtype"] = _pick(sorted(peaks), row.get("dtype"))
    flops = 2.0 * _int(row.get("m"), 1) * _int(row.get("n"), 1) * _int(row.get("k"), 1)
    floor_ms = flops / (peaks[row["dtype"]] * 1e12) * 1e3
    row["latency_ms"] = max(_number(row.get("latency_ms"), floor_ms), floor_ms)


def fix_attention(row: JsonDict, accelerator: str) -> None:
    """num_kv_heads divides num_heads (the description's rule), and a latency no shorter than
    reading the KV cache once at the accelerator's memory bandwidth (measured ≤ peak)."""
    heads = max(1, _int(row.get("num_heads"), 1))
    # gcd: a divisor of num_heads not above the generated num_kv_heads, found in log time
    # (the schema bounds neither: a divisor search up to 10**18 would never end)
    row["num_kv_heads"] = math.gcd(heads, max(1, _int(row.get("num_kv_heads"), 1)))
    kv_bytes = (
        2
        * _int(row.get("batch_size"), 1)
        * _int(row.get("context_tokens"), 1)
        * row["num_kv_heads"]
        * _int(row.get("head_dim"), 1)
        * DTYPE_BYTES.get(str(row.get("kv_dtype", "bf16")), 2)
    )
    floor_ms = kv_bytes / _bandwidth_bytes_s(accelerator) * 1e3
    row["latency_ms"] = max(_number(row.get("latency_ms"), floor_ms), floor_ms)


def fix_run_precision(row: JsonDict, accelerator: str) -> None:
    """The dtype a run's GEMMs compute in needs a peak ("unsupported precision on
    <accelerator>"): the server's defaults (weights bf16; activations follow 16-bit weights,
    else bf16) are applied, and a pair without a peak becomes bf16 (fp16 where the accelerator
    has no bf16 peak)."""
    peaks = _peak_tflops(accelerator)
    given = row.get("precision") if isinstance(row.get("precision"), dict) else {}
    weights = str(given.get("weights") or "bf16")
    default = weights if weights in WIDE_DTYPES else "bf16"
    activations = str(given.get("activations") or default)
    if Precision(weights=weights, activations=activations).compute_dtype not in peaks:
        fallback = "bf16" if "bf16" in peaks else "fp16"
        row["precision"] = {**given, "weights": fallback, "activations": fallback}


def fix_run(row: JsonDict, accelerator: str, backend: str | None) -> None:
    """An end-to-end run (static or serving) of a catalog model, with a layout that divides it,
    a precision the accelerator has peaks for, the upload's one backend (None: leave as
    generated), and a serving row's load-pattern fields only where its pattern takes them."""
    model = _catalog_id(READ_MODELS, row.get("model"))
    row["model"] = model
    shape = _SHAPES[model]
    if isinstance(row.get("parallelism"), dict):
        layout = {k: v for k, v in row["parallelism"].items() if k in ("tp", "pp")}
        fix_layout(shape, layout)
        row["parallelism"].update(layout)
    fix_run_precision(row, accelerator)
    window = shape.max_context_tokens  # "input_tokens + output_tokens ... exceed the context
    inp, out = _int(row.get("input_tokens"), 1), _int(row.get("output_tokens"), 1)
    if window and inp + out > window:  # window" is a 422 of the fit
        row["input_tokens"] = max(1, min(inp, window // 2))
        row["output_tokens"] = max(1, min(out, window - row["input_tokens"]))
    if backend is not None:
        if backend:
            row["backend"] = backend
        else:
            row.pop("backend", None)
    if row.get("kind") == "serving":
        pattern = row.get("load_pattern", "closed_loop")
        if pattern == "open_loop":
            # an open loop needs its offered rate: at most concurrency over the mean request
            # time (Little's law), that time taken as at least 1 ms
            seconds = (
                _number(row.get("ttft_ms"), 1.0) / 1e3
                + _int(row.get("output_tokens"), 1) * _number(row.get("tpot_ms"), 1.0) / 1e3
            )
            seconds = max(seconds, 1e-3)
            row.setdefault("request_rate_per_s", _int(row.get("concurrency"), 1) / seconds)
        else:
            for name in ("request_rate_per_s", "burstiness"):
                row.pop(name, None)
            if row.get("arrival_process"):
                row["arrival_process"] = ""


def _profile_backend(value: object) -> bool:
    """A run's backend that can be a profile's (split_by_backend=true stores it as one)."""
    return (
        isinstance(value, str)
        and len(value) <= BACKEND_MAX_CHARS
        and re.fullmatch(BACKEND_PATTERN, value) is not None
    )


def _one_backend(rows: list[JsonDict], declared: object, split: bool) -> str | None:
    """The backend every run gets: the declared one, else the first a run names ("" for none).
    ``split_by_backend=true`` takes runs that all name one (declared: none), so each run keeps
    a generated backend or gets the first one named."""
    named = [str(r["backend"]) for r in rows if r.get("backend")]
    if split:
        return next((b for b in named if _profile_backend(b)), "vllm")
    if isinstance(declared, str) and declared:
        return declared
    return named[0] if named else ""


def fix_measurements(rows: list[Any], accelerator: str, declared: object, split: bool) -> None:
    """Make each row keep the rules of its kind (POST /v1/calibrations description)."""
    runs = [r for r in rows if isinstance(r, dict) and r.get("kind") in ("static", "serving")]
    backend = _one_backend(runs, None if split else declared, split)
    for row in rows:
        if not isinstance(row, dict):
            continue
        kind = row.get("kind")
        if kind == "gemm":
            fix_gemm(row, accelerator)
        elif kind == "attention":
            fix_attention(row, accelerator)
        elif kind in ("static", "serving"):
            if split and _profile_backend(row.get("backend")):
                fix_run(row, accelerator, None)
            else:
                fix_run(row, accelerator, backend)


def _drawn_rows(rng: random.Random, serving: bool) -> list[JsonDict]:
    """One to four rows of one kind (serving runs or gemm kernels) drawn from ``rng``."""
    rows: list[JsonDict] = []
    for _ in range(rng.randint(1, 4)):
        if serving:
            row: JsonDict = {
                "kind": "serving",
                "model": rng.random(),
                "parallelism": {"tp": rng.choice([1, 2, 4, 8]), "pp": 1},
                "precision": {"weights": rng.choice(["bf16", "fp16", "fp8"])},
                "input_tokens": rng.randint(1, 4096),
                "output_tokens": rng.randint(1, 1024),
                "concurrency": rng.randint(1, 256),
                "ttft_ms": rng.uniform(1.0, 5_000.0),
                "tpot_ms": rng.uniform(1.0, 200.0),
            }
        else:
            row = {
                "kind": "gemm",
                "dtype": rng.random(),
                "m": rng.randint(1, 16_384),
                "n": rng.randint(1, 16_384),
                "k": rng.randint(1, 16_384),
                "latency_ms": rng.uniform(1e-3, 10.0),
            }
        rows.append(row)
    return rows


def _csv_text(rows: list[JsonDict]) -> str:
    """The rows as a benchmark CSV the upload detects (gemm or serving columns)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    if rows[0]["kind"] == "serving":
        # `precision`: the weights dtype (activations follow it, as in a JSON row without them)
        header = ["model", "isl", "osl", "concurrency", "tp", "precision", "backend"]
        writer.writerow([*header, "ttft_ms", "tpot_ms"])
        for r in rows:
            writer.writerow(
                [
                    r["model"],
                    r["input_tokens"],
                    r["output_tokens"],
                    r["concurrency"],
                    r["parallelism"]["tp"],
                    r["precision"]["weights"],
                    r.get("backend", ""),
                    r["ttft_ms"],
                    r["tpot_ms"],
                ]
            )
    else:
        writer.writerow(["dtype", "m", "n", "k", "latency_ms"])
        writer.writerows([r["dtype"], r["m"], r["n"], r["k"], r["latency_ms"]] for r in rows)
    return buffer.getvalue()


def _vllm_results(rows: list[JsonDict]) -> str:
    """The serving rows as `vllm bench serve --save-result` results (closed loops at
    max_concurrency, request_rate inf; docs/measurement-formats.md), one JSON line each."""
    lines = []
    for r in rows:
        requests = 4 * r["concurrency"]
        result = {
            "model_id": r["model"],
            "backend": r.get("backend") or "vllm",
            "completed": requests,
            "num_prompts": requests,
            "total_input_tokens": requests * r["input_tokens"],
            "total_output_tokens": requests * r["output_tokens"],
            "mean_ttft_ms": r["ttft_ms"],
            "mean_tpot_ms": r["tpot_ms"],
            "request_rate": "inf",
            "max_concurrency": r["concurrency"],
            "tensor_parallel_size": r["parallelism"]["tp"],
            "precision": r["precision"]["weights"],
        }
        lines.append(json.dumps(result))
    return "\n".join(lines) + "\n"


def _sglang_results(rows: list[JsonDict]) -> str:
    """The serving rows as `sglang.bench_serving --output-file` lines (closed loops); SGLang
    records neither TP nor precision: they come from the query (fix_harness_query)."""
    lines = []
    for r in rows:
        requests = 4 * r["concurrency"]
        result = {
            "model_id": r["model"],
            "backend": r.get("backend") or "sglang",
            "completed": requests,
            "total_input_tokens": requests * r["input_tokens"],
            "total_output_tokens": requests * r["output_tokens"],
            "mean_ttft_ms": r["ttft_ms"],
            "mean_tpot_ms": r["tpot_ms"],
            "mean_e2e_latency_ms": r["ttft_ms"] + r["output_tokens"] * r["tpot_ms"],
            "request_rate": "inf",
            "max_concurrency": r["concurrency"],
        }
        lines.append(json.dumps(result))
    return "\n".join(lines) + "\n"


# Harness formats a positive case may force with `format` (the file is built for it).
BUILT_FORMATS = {"vllm_bench_json": _vllm_results, "sglang_bench_serving": _sglang_results}


def fix_harness_query(query: JsonDict, rows: list[JsonDict], accelerator: str) -> None:
    """A file that does not record TP or the weights dtype takes the query's `tp` and
    `weights_dtype` for every run: the largest tp up to the generated one that every run's
    model admits, and a weights dtype whose compute dtype has a peak (bf16, or fp16)."""
    wanted = max(1, _int(query.get("tp"), 1))
    shapes = [_SHAPES[r["model"]] for r in rows]

    def admitted(tp: int) -> bool:
        for shape in shapes:
            layout = {"tp": tp}
            fix_layout(shape, layout)
            if layout["tp"] != tp:
                return False
        return True

    query["tp"] = max(t for t in range(1, min(wanted, 1024) + 1) if admitted(t))
    weights = {"precision": {"weights": query.get("weights_dtype")}}
    if weights["precision"]["weights"] not in MEASUREMENT_DTYPES:
        weights["precision"]["weights"] = "bf16"
    fix_run_precision(weights, accelerator)
    query["weights_dtype"] = weights["precision"]["weights"]
    for r in rows:
        r["parallelism"]["tp"] = query["tp"]
        r["precision"] = {"weights": query["weights_dtype"]}


def _upload_file(
    rng: random.Random, accelerator: str, declared: object, split: bool, query: JsonDict
) -> str:
    """A file for a text/csv body or a multipart `file`: the results of the harness the
    query's `format` forces, else a benchmark CSV; rows fixed as the JSON rows are."""
    build = BUILT_FORMATS.get(str(query.get("format")))
    rows = _drawn_rows(rng, serving=build is not None or rng.random() < 0.5)
    fix_measurements(rows, accelerator, declared, split)
    if build is _sglang_results:
        fix_harness_query(query, rows, accelerator)
    if build is not None:
        for row in rows:  # a harness run names its backend ("vllm" when the file does not)
            row["backend"] = row.get("backend") or "vllm"
        return build(rows)
    return _csv_text(rows)


def fix_calibration(case: schemathesis.Case) -> None:
    """POST /v1/calibrations: "422 ... an accelerator or a model the catalog lacks; no
    accelerator; a body that is not the format `format` names; rows inconsistent in
    themselves (num_kv_heads must divide num_heads) or naming several backends without
    `split_by_backend`" (the description lists the rest)."""
    query = case.query if case.query is not None else {}
    case.query = query
    split = str(query.get("split_by_backend", "false")).lower() == "true"
    # A forced `format` needs a result file of that harness: one is built for the formats of
    # BUILT_FORMATS, as a file (a text/csv body or a multipart file; a JSON body in the
    # document is the API body), else `format` is left out.
    if case.media_type == "application/json" or query.get("format") not in BUILT_FORMATS:
        query.pop("format", None)
    if split:
        query.pop("backend", None)  # "leave backend out with split_by_backend=true"
    body = case.body
    if case.media_type == "application/json" and isinstance(body, dict):
        body["accelerator"] = _catalog_id(READ_ACCELERATORS, body.get("accelerator"))
        if split:
            body.pop("backend", None)
        rows = body.get("measurements") if isinstance(body.get("measurements"), list) else []
        fix_measurements(rows, body["accelerator"], body.get("backend"), split)
    elif case.media_type == "text/csv":
        accelerator = _catalog_id(READ_ACCELERATORS, query.get("accelerator"))
        query["accelerator"] = accelerator
        rng = _seeded(body)
        case.body = _upload_file(rng, accelerator, query.get("backend"), split, query)
    elif case.media_type == "multipart/form-data" and isinstance(body, dict):
        body["accelerator"] = _catalog_id(READ_ACCELERATORS, body.get("accelerator"))
        if split:
            body.pop("backend", None)
        declared = body.get("backend") or query.get("backend")
        rng = _seeded(body.get("file"))
        body["file"] = _upload_file(rng, body["accelerator"], declared, split, query)


def unique_idempotency_key(case: schemathesis.Case) -> None:
    """A key names one request ("Retries with the same key and body replay the first answer";
    the same key with another body is a 422): the generated key gets a digest of the request
    as sent, so two cases share a key only when they are the same request."""
    headers = case.headers or {}
    key = headers.get("Idempotency-Key")
    if key:
        sent = (case.media_type, case.body, sorted((case.query or {}).items()))
        headers["Idempotency-Key"] = f"{key[:200]}-{zlib.crc32(repr(sent).encode()):08x}"


# ---- models/import: a config.json its family's reader takes ---------------------------------


def _core(rng: random.Random) -> JsonDict:
    """The keys every family reads (service/engine/hf_import.py, _attention_core): the hidden
    size is heads x head_dim (so head_dim may be left out), KV heads divide the heads."""
    heads = rng.choice([1, 2, 4, 8, 12, 16, 32, 64])
    head_dim = rng.choice([32, 64, 80, 128])
    config: JsonDict = {
        "hidden_size": heads * head_dim,
        "num_hidden_layers": rng.randint(1, 48),
        "num_attention_heads": heads,
        "num_key_value_heads": _divisor_at_most(heads, rng.randint(1, heads)),
        "vocab_size": rng.randint(256, 262_144),
        "max_position_embeddings": rng.choice([0, 2048, 4096, 32_768, 131_072]),
        "intermediate_size": heads * head_dim * rng.randint(1, 4),
        "tie_word_embeddings": rng.random() < 0.5,
    }
    if rng.random() < 0.5:
        config["head_dim"] = head_dim
    return config


def _experts(rng: random.Random, count_key: str) -> JsonDict:
    experts = rng.randint(1, 64)
    return {count_key: experts, "num_experts_per_tok": rng.randint(1, experts)}


def _layer_types(rng: random.Random, layers: int) -> list[str]:
    return [rng.choice(["sliding_attention", "full_attention"]) for _ in range(layers)]


def _family_keys(model_type: str, core: JsonDict, rng: random.Random) -> JsonDict:
    """The keys one family's reader takes beyond the core, consistent with it."""
    layers = core["num_hidden_layers"]
    width = core["intermediate_size"]
    window = rng.choice([None, 512, 4096])
    if model_type == "llama":
        return {"attention_bias": rng.random() < 0.5, "mlp_bias": rng.random() < 0.5}
    if model_type in ("mistral", "phi3"):
        return {"sliding_window": window}
    if model_type in ("qwen2", "qwen3"):
        return {
            "use_sliding_window": window is not None,
            "sliding_window": window,
            "max_window_layers": rng.randint(0, layers),
        }
    if model_type == "mixtral":
        return {**_experts(rng, "num_local_experts"), "sliding_window": window}
    if model_type == "qwen3_moe":
        return {
            **_experts(rng, "num_experts"),
            "moe_intermediate_size": width // 4 or 1,
            "decoder_sparse_step": 1,
            "mlp_only_layers": list(range(rng.randint(0, layers - 1))),
        }
    if model_type in ("deepseek_v3", "kimi_k2"):
        return {
            **_experts(rng, "n_routed_experts"),
            "moe_layer_freq": 1,
            "qk_nope_head_dim": rng.choice([64, 128]),
            "qk_rope_head_dim": rng.choice([32, 64]),
            "v_head_dim": rng.choice([64, 128]),
            "kv_lora_rank": rng.choice([256, 512]),
            "q_lora_rank": rng.choice([0, 1536]),
            "n_shared_experts": rng.randint(0, 2),
            "moe_intermediate_size": width // 4 or 1,
            "first_k_dense_replace": rng.randint(0, layers - 1),
            "num_nextn_predict_layers": rng.randint(0, min(1, layers)),
        }
    if model_type in ("gemma2", "gemma3", "gemma3_text"):
        keys: JsonDict = {"sliding_window": window or 4096}
        if rng.random() < 0.5:
            keys["layer_types"] = _layer_types(rng, layers)
        return keys
    if model_type == "gpt_oss":
        return {**_experts(rng, "num_local_experts"), "sliding_window": window or 128}
    if model_type in ("llama4", "llama4_text"):
        keys = {
            **_experts(rng, "num_local_experts"),
            "interleave_moe_layer_step": rng.randint(1, layers),
            "intermediate_size_mlp": width * 2,
            "attention_chunk_size": rng.choice([0, 8192]),
        }
        if rng.random() < 0.5:
            keys["no_rope_layers"] = [rng.randint(0, 1) for _ in range(layers)]
        return keys
    if model_type == "nemotron_h":
        # one letter per layer with at least one attention block; Mamba2 heads x head width =
        # expand x hidden_size (expand 2), n_groups dividing the heads
        letters = [rng.choice("M*-") for _ in range(layers)]
        letters[rng.randrange(layers)] = "*"
        head_width = core["hidden_size"] // core["num_attention_heads"]
        mamba_heads = 2 * core["num_attention_heads"]
        return {
            "hybrid_override_pattern": "".join(letters),
            "attention_head_dim": head_width,
            "mamba_num_heads": mamba_heads,
            "mamba_head_dim": head_width,
            "expand": 2,
            "n_groups": _divisor_at_most(mamba_heads, rng.randint(1, 8)),
            "ssm_state_size": rng.choice([64, 128]),
            "conv_kernel": 4,
            "chunk_size": rng.choice([128, 256]),
        }
    return {}


def build_hf_config(generated: JsonDict) -> JsonDict:
    """A config.json of the generated model_type, with the generated other keys kept (the
    importer ignores keys its family does not read): the core keys and the family's own,
    drawn from a generator seeded by the generated config. Gemma-3 (and Llama-4 when drawn)
    nest the text model's keys under text_config, as their real configs do."""
    model_type = str(generated["model_type"])
    rng = _seeded(generated)
    core = _core(rng)
    text = {**core, **_family_keys(model_type, core, rng)}
    text = {k: v for k, v in text.items() if v is not None}
    quant = rng.choice([None, "fp8", "mxfp4"])
    config = {k: v for k, v in generated.items() if k not in text}
    if quant:
        config["quantization_config"] = {"quant_method": quant}
    if model_type == "gemma3" or (model_type == "llama4" and rng.random() < 0.5):
        config["text_config"] = text
    else:
        config.update(text)
    config["model_type"] = model_type
    return config


def fix_import(case: schemathesis.Case) -> None:
    """POST /v1/models/import: "422 (not stated in the schema): a config that lacks a key its
    model_type's reader needs, or whose shape breaks a rule of POST /v1/models that compares
    two fields"."""
    body = case.body
    if not isinstance(body, dict) or not isinstance(body.get("hf_config"), dict):
        return
    config = body["hf_config"]
    if config.get("model_type") in SUPPORTED_MODEL_TYPES:
        body["hf_config"] = build_hf_config(config)
    if isinstance(body.get("id"), str):
        # generated ids repeat ("0"), and a stored id is a 409: the id takes a digest of the
        # config, so that mostly new models are imported (a repeated case still gets its 409)
        body["id"] = f"{body['id'][:80]}-{zlib.crc32(repr(config).encode()):08x}"
