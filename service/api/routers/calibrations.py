"""/v1/calibrations: fit and store a profile from an upload; list and read profiles.

POST accepts (detected from Content-Type, then from the content):

- ``application/json``: the docs/api.md body (``accelerator``, ``name``, ``backend``,
  ``backend_version``, ``measurements``), or a harness result file (an object, a list, or JSON
  lines) with the metadata as query parameters;
- ``text/csv``: a benchmark CSV, metadata as query parameters;
- ``multipart/form-data``: a ``file`` (CSV or harness result JSON) plus form fields
  ``accelerator``, ``name``, ``backend``, ``backend_version`` (query parameters fill what the
  form leaves out); ``file`` repeated fits one profile on every file (kernel tables beside the
  end-to-end runs).

Harness result files (vllm, SGLang, genai-perf, trtllm-bench, guidellm) are detected from the
content or named by ``format``; see docs/measurement-formats.md and UPLOAD_DESCRIPTION.

The fit runs off the event loop within ``fit_time_budget_s`` (settings): past it the answer is a
503 problem with Retry-After and nothing is stored. It holds one of the process's heavy-work
slots while it runs (``api.heavy``: ``heavy_workers`` at once, ``heavy_queue`` waiting, beyond
that a 503 with Retry-After), like plans, batches and charts, so concurrent fits cannot starve
cheap requests of the interpreter.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal, get_args

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from service.api.deps import ReadAccess, SessionDep, SettingsDep, Viewer, WriteAccess
from service.api.heavy import HeavyWork
from service.api.limits import MAX_MEASUREMENTS_PER_CALIBRATION, problem_responses
from service.api.problems import problem
from service.api.schemas.calibrations import (
    NAME_MAX_CHARS,
    CalibrationCreate,
    CalibrationMetadata,
    CalibrationProfileOut,
    CalibrationProfilesOut,
    CalibrationUploadForm,
)
from service.api.schemas.common import SLUG_PATTERN, Cursor, ListPage, text_query
from service.services.calibration import (
    CalibrationService,
    FitLimits,
    FitTimeoutError,
)
from service.services.calibration_uploads import (
    BACKEND_MAX_CHARS,
    BACKEND_PATTERN,
    HARNESS_FORMAT_NAMES,
    CalibrationUpload,
    HarnessOptions,
    UploadMetadata,
    build_upload,
    decode_json_text,
    decode_text,
    from_dicts,
    from_harness,
    looks_like_harness_result,
    merge_uploads,
)
from service.services.errors import FieldError

router = APIRouter(prefix="/v1/calibrations", tags=["calibration"])
HarnessFormatName = Literal[
    "vllm_bench_json", "sglang_bench_serving", "genai_perf", "trtllm_bench", "guidellm"
]
assert set(get_args(HarnessFormatName)) == set(HARNESS_FORMAT_NAMES)  # one list of formats

RETRY_AFTER_S = 30
FILE_FIELD = "file"


def _schema(model: type[Any]) -> dict[str, Any]:
    schema: dict[str, Any] = model.model_json_schema(ref_template="#/components/schemas/{model}")
    schema.pop("title", None)
    return schema


UPLOAD_DESCRIPTION = """\
The docs/api.md JSON body; or a benchmark CSV (text/csv or a multipart `file`: columns of the H100
gemm/attention/nccl/serving tables, Argonne LLM-Inference-Bench, or
`model,batch_size,input_tokens,output_tokens` static runs; unknown columns are ignored with a
warning); or the result file of a serving benchmark harness, as application/json (JSON lines
accepted) with the metadata as query parameters, or as a multipart `file`. The harness format is
detected from the content, or forced with `format`. Field-by-field mappings:
docs/measurement-formats.md.

Every serving measurement records its `load_pattern`: `closed_loop` (at `concurrency`),
`open_loop` (at `request_rate_per_s`, `concurrency` = mean requests in flight, optional
`arrival_process` poisson/constant/gamma and `burstiness`) or `offline` (all requests at once,
`concurrency` = requests); static runs are `static`. Harness rules: rate inf with a concurrency
limit → closed_loop at the limit; a finite rate → open_loop; inf without a limit → offline.

- `vllm_bench_json` (`vllm bench serve --save-result`): model_id → model;
  total_input_tokens/completed → input_tokens; total_output_tokens/completed → output_tokens;
  mean_ttft_ms → ttft_ms; mean_tpot_ms → tpot_ms; request_rate, max_concurrency, burstiness →
  load pattern (open loop in flight = request_throughput × mean_e2el_ms); backend;
  tensor_parallel_size (else `tp`); precision (else `weights_dtype`).
- `sglang_bench_serving` (`sglang.bench_serving --output-file`, JSON lines): as vllm, with
  mean_e2e_latency_ms and SGLang's measured `concurrency` for an open loop; the lines do not
  name the model: pass `model`; backend from the client protocol (sglang*, vllm*, trt → trtllm).
- `genai_perf` (`profile_export_genai_perf.json`): input_config.model → model;
  input/output_sequence_length.avg → tokens; time_to_first_token.avg → ttft_ms and
  inter_token_latency.avg → tpot_ms, each converted from its `unit`; input_config.concurrency →
  closed_loop, input_config.request_rate → open_loop (also under perf_analyzer.stimulus).
- `trtllm_bench` (`trtllm-bench throughput --streaming --report_json`): engine.model,
  engine.version, engine.quantization/dtype/kv_cache_dtype, world_info.tp_size/pp_size,
  request_info.avg_input/output_length, streaming_metrics.avg_ttft_ms/avg_tpot_ms (ms); the
  report does not record --concurrency: `concurrency` → closed_loop, else offline.
- `guidellm` (`benchmarks.json`): one measurement per benchmark; successful means of
  prompt/output_token_count, time_to_first_token_ms, inter_token_latency_ms (→ tpot_ms);
  config.strategy synchronous/concurrent → closed_loop at 1/streams, throughput → offline,
  constant/poisson → open_loop at rate.

A profile is fitted for one backend: an upload whose runs name several backends, or another
backend than `backend`, is refused with a 422 on `backend` listing them; nothing is stored.
With `split_by_backend=true` one profile per backend is stored instead (all or none) and the 201
body is `{"items": [profile, ...]}`.
"""


def _form_schema(model: type[Any]) -> dict[str, Any]:
    """A multipart form's schema: a form field is text or absent, never JSON null (a "null"
    field would be read as the text "null"), so optional fields lose their null branch."""
    schema = _schema(model)
    for name, field in schema["properties"].items():
        branches = field.get("anyOf", [])
        if {"type": "null"} in branches:
            text = [b for b in branches if b != {"type": "null"}]
            rest = {k: v for k, v in field.items() if k not in ("anyOf", "default")}
            schema["properties"][name] = {**rest, **text[0]} if len(text) == 1 else field
    return schema


_UPLOAD_FORM = _form_schema(CalibrationUploadForm)
# one file; the field may repeat (several parts named `file`): one profile fitted on all of them
_UPLOAD_FORM["properties"][FILE_FIELD] = {
    "type": "string",
    "format": "binary",
    "description": "A benchmark CSV or harness result file. Repeat the field to fit one profile "
    "on several files (kernel tables beside the serving or static runs).",
}
REQUEST_BODY: dict[str, Any] = {
    "required": True,
    "description": UPLOAD_DESCRIPTION,
    "content": {
        "application/json": {"schema": _schema(CalibrationCreate)},
        "text/csv": {"schema": {"type": "string"}},
        "multipart/form-data": {"schema": _UPLOAD_FORM},
    },
}


def get_calibrations(session: SessionDep) -> CalibrationService:
    """Return the calibration service bound to this request's session."""
    return CalibrationService(session)


CalibrationDep = Annotated[CalibrationService, Depends(get_calibrations, scope="function")]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=255,
        description="Retries with the same key and body replay the first answer.",
    ),
]


def _invalid(exc: ValidationError, prefix: tuple[str, ...] = ()) -> RequestValidationError:
    errors = [{**e, "loc": ("body", *prefix, *e.get("loc", ()))} for e in exc.errors()]
    return RequestValidationError(errors)


def _metadata(values: dict[str, Any]) -> UploadMetadata:
    """Validate metadata fields (RequestValidationError names the bad ones)."""
    try:
        meta = CalibrationMetadata.model_validate({k: v for k, v in values.items() if v})
    except ValidationError as exc:
        raise _invalid(exc) from exc
    return UploadMetadata(
        accelerator=meta.accelerator,
        name=meta.name or "",
        backend=meta.backend or "",
        backend_version=meta.backend_version or "",
    )


def _named(meta: UploadMetadata, upload_format: str) -> UploadMetadata:
    """Name an unnamed profile after its upload format."""
    return meta if meta.name else replace(meta, name=f"{upload_format} upload"[:NAME_MAX_CHARS])


def _decode_utf8(raw: bytes, field: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FieldError(field, f"is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def _from_json(raw: bytes, query: dict[str, Any], read: ReadOptions) -> CalibrationUpload:
    document: Any = decode_json_text(_decode_utf8(raw, "body"), "body")
    if read.format_name is not None or looks_like_harness_result(document):
        meta = _metadata(query)
        parsed = from_harness(document, read.harness, read.format_name)
        return build_upload(_named(meta, parsed.format), parsed)
    try:
        body = CalibrationCreate.model_validate(document)
    except ValidationError as exc:
        raise _invalid(exc) from exc
    meta = _metadata(body.model_dump(exclude={"measurements"}))
    parsed = from_dicts(body.measurements)
    return build_upload(_named(meta, parsed.format), parsed)


def _from_text(
    text: str, meta_values: dict[str, Any], read: ReadOptions, name: str = ""
) -> CalibrationUpload:
    meta = _metadata(meta_values)
    parsed = decode_text(text, options=read.harness, format_name=read.format_name)
    return build_upload(_named(meta, parsed.format), parsed, csv_text=text, name=name)


def _from_files(
    files: list[tuple[str, bytes]], meta_values: dict[str, Any], read: ReadOptions
) -> CalibrationUpload:
    """One upload of several files (name, content); an error names the file it came from."""
    if len(files) == 1:
        ((name, raw),) = files
        return _from_text(_decode_utf8(raw, FILE_FIELD), meta_values, read, name)
    uploads = []
    for name, raw in files:
        try:
            text = _decode_utf8(raw, FILE_FIELD)
            uploads.append(_from_text(text, meta_values, read, name))
        except FieldError as exc:
            raise FieldError(exc.field, f"{name}: {exc.message}") from exc
    merged = merge_uploads(_metadata(meta_values), uploads)
    return replace(merged, metadata=_named(merged.metadata, merged.format))


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """How to read a harness result file: what it may not record, and a forced format."""

    harness: HarnessOptions
    format_name: str | None = None


async def read_upload(
    request: Request, query: dict[str, Any], read: ReadOptions
) -> CalibrationUpload:
    """Decode the POST body by Content-Type (FieldError or RequestValidationError if bad)."""
    media = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
    if media == "multipart/form-data":
        form = await request.form()
        parts = form.getlist(FILE_FIELD)
        if not parts or not all(isinstance(part, UploadFile) for part in parts):
            raise FieldError(
                FILE_FIELD, "a multipart upload needs a file field named 'file' (each one a file)"
            )
        files = [
            (part.filename or f"file {number}", await part.read())
            for number, part in enumerate(parts, start=1)
            if isinstance(part, UploadFile)
        ]
        fields = {k: v for k, v in form.items() if k != FILE_FIELD and isinstance(v, str)}
        meta_values = {**query, **fields}
        return await run_in_threadpool(_from_files, files, meta_values, read)
    raw = await request.body()
    if media in ("text/csv", "text/plain"):
        text = _decode_utf8(raw, "body")
        return await run_in_threadpool(_from_text, text, query, read)
    if media in ("application/json", "application/x-ndjson", "application/jsonl") or (
        media.endswith("+json")
    ):
        return await run_in_threadpool(_from_json, raw, query, read)
    raise _Unsupported(media)


class _Unsupported(Exception):
    def __init__(self, media: str) -> None:
        super().__init__(
            f"unsupported Content-Type {media!r}; send application/json, text/csv or "
            "multipart/form-data"
        )


Visibility = Literal["published", "private"]


@router.post(
    "",
    status_code=201,
    # one profile; with split_by_backend=true {"items": [profile, ...]}
    response_model=CalibrationProfileOut | CalibrationProfilesOut,
    dependencies=[WriteAccess],
    responses=problem_responses(415, 422, 503),
    openapi_extra={"requestBody": REQUEST_BODY},
)
async def create_calibration(
    request: Request,
    service: CalibrationDep,
    settings: SettingsDep,
    # The metadata parameters take the values of the JSON body's fields (CalibrationMetadata).
    accelerator: Annotated[
        str | None,
        Query(
            pattern=SLUG_PATTERN,
            max_length=100,
            description="A catalog accelerator id, for CSV and harness uploads.",
        ),
    ] = None,
    name: Annotated[str | None, text_query(min_length=1, max_length=200)] = None,
    backend: Annotated[
        str | None,
        Query(
            pattern=BACKEND_PATTERN,
            max_length=BACKEND_MAX_CHARS,
            description="e.g. vllm, sglang, trtllm.",
        ),
    ] = None,
    backend_version: Annotated[str | None, text_query(max_length=100)] = None,
    tp: Annotated[
        int, Query(ge=1, le=1024, description="TP of a harness run whose file does not say.")
    ] = 1,
    weights_dtype: Annotated[
        str, text_query(description="Weights dtype of a harness run whose file does not say.")
    ] = "bf16",
    model: Annotated[
        str | None,
        text_query(
            max_length=200,
            description="Model of a harness run whose file does not name it (SGLang "
            "bench_serving), e.g. Qwen/Qwen3-32B or qwen3-32b.",
        ),
    ] = None,
    concurrency: Annotated[
        int | None,
        Query(
            ge=1,
            le=1_000_000,
            description="Concurrency limit of a run whose file does not record it "
            "(trtllm-bench --concurrency); without it a trtllm-bench report is read as offline.",
        ),
    ] = None,
    upload_format: Annotated[
        HarnessFormatName | None,
        Query(
            alias="format",
            description="Read the body as this harness result format instead of detecting it "
            "from the content.",
        ),
    ] = None,
    split_by_backend: Annotated[
        bool,
        Query(
            description="Store one profile per backend the runs name (kernel measurements go "
            'to each), all or none; the 201 body is then {"items": [profile, ...]}. Without '
            "it an upload whose runs name several backends is a 422.",
        ),
    ] = False,
    visibility: Annotated[
        Visibility,
        Query(
            description="published: every reader's (listed, read and chosen by anyone's "
            '"auto"); private: only the uploading key\'s (others get 404, and their "auto" '
            "never picks it). docs/shared-service.md.",
        ),
    ] = "published",
    idempotency_key: IdempotencyKey = None,
    viewer: Viewer = "",
) -> Response:
    """Fit a calibration profile from measurements and store it with them (201).

    Also 422 naming the field (not stated in the schema): an accelerator or a model the
    catalog lacks; no accelerator (in the body, the form or the query); a body that is not
    the format `format` names; rows inconsistent in themselves (num_kv_heads must divide
    num_heads) or naming several backends without `split_by_backend`, or another backend
    than `backend`; a gemm dtype the accelerator has no peak for; a run whose tp/pp does
    not divide its model (tp divides num_heads and num_kv_heads or is a multiple of them,
    pp at most num_layers), whose precision computes in a dtype the accelerator has no
    peak for, or whose input_tokens + output_tokens exceed the model's context window; a
    serving run's request_rate_per_s, burstiness or arrival_process on a pattern other
    than open_loop (open_loop needs request_rate_per_s); with `split_by_backend`, a
    declared `backend`, a run naming no backend, or one whose backend is no `backend`
    value (at most 50 letters, digits, `.`, `_`, `-`); an Idempotency-Key already used with
    another request.
    """
    query = {
        "accelerator": accelerator,
        "name": name,
        "backend": backend,
        "backend_version": backend_version,
    }
    read = ReadOptions(
        HarnessOptions(
            tp=tp, weights_dtype=weights_dtype, model=model or "", concurrency=concurrency
        ),
        upload_format,
    )
    try:
        upload = await read_upload(request, query, read)
    except _Unsupported as exc:
        return problem(415, "Unsupported Media Type", str(exc), "unsupported-media-type")
    limits = FitLimits(MAX_MEASUREMENTS_PER_CALIBRATION, settings.fit_time_budget_s)
    create = service.create_per_backend if split_by_backend else service.create
    heavy: HeavyWork = request.app.state.heavy
    try:
        async with heavy.slot():
            outcome = await run_in_threadpool(
                create,
                upload,
                limits,
                owner=viewer,
                idempotency_key=idempotency_key,
                visibility=visibility,
            )
    except FitTimeoutError as exc:
        return problem(
            503,
            "Service Unavailable",
            str(exc),
            "fit-time-budget-exceeded",
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )
    headers = {}
    if "id" in outcome.body:
        headers["Location"] = f"/v1/calibrations/{outcome.body['id']}"
    if outcome.replayed:
        headers["Idempotent-Replayed"] = "true"
    return JSONResponse(outcome.body, status_code=outcome.status_code, headers=headers)


@router.get("", response_model=ListPage[CalibrationProfileOut], dependencies=[ReadAccess])
def list_calibrations(
    service: CalibrationDep,
    viewer: Viewer,
    accelerator: Annotated[str | None, text_query(max_length=100)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Cursor = None,
) -> dict[str, Any]:
    """List the profiles the caller may see (published ones and its key's private ones) in
    creation order, optionally for one accelerator, by an opaque cursor."""
    page = service.list_profiles(accelerator=accelerator, cursor=cursor, limit=limit, viewer=viewer)
    return {"items": page.items, "next_cursor": page.next_cursor}


@router.get("/{calibration_id}", response_model=CalibrationProfileOut, dependencies=[ReadAccess])
def get_calibration(calibration_id: str, service: CalibrationDep, viewer: Viewer) -> dict[str, Any]:
    """Return one profile (404 for another key's private profile)."""
    return service.get(calibration_id, viewer=viewer)


@router.get("/{calibration_id}/measurements", dependencies=[ReadAccess])
def get_calibration_measurements(
    calibration_id: str, service: CalibrationDep, viewer: Viewer
) -> dict[str, list[dict[str, Any]]]:
    """Return the measurements a profile was fitted on, in upload order (404 as for GET)."""
    return {"items": service.measurements(calibration_id, viewer=viewer)}
