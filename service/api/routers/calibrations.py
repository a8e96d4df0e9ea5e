"""/v1/calibrations: fit and store a profile from an upload; list and read profiles.

POST accepts (detected from Content-Type, then from the content):

- ``application/json``: the docs/api.md body (``accelerator``, ``name``, ``backend``,
  ``backend_version``, ``measurements``), or one ``vllm bench serve --save-result`` result (or a
  list of them) with the metadata as query parameters;
- ``text/csv``: a benchmark CSV, metadata as query parameters;
- ``multipart/form-data``: a ``file`` (CSV or vllm bench JSON) plus form fields ``accelerator``,
  ``name``, ``backend``, ``backend_version`` (query parameters fill what the form leaves out).

The fit runs off the event loop within ``fit_time_budget_s`` (settings): past it the answer is a
503 problem with Retry-After and nothing is stored.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from service.api.deps import ApiKeyHeader, ReadAccess, SessionDep, SettingsDep, WriteAccess
from service.api.limits import MAX_MEASUREMENTS_PER_CALIBRATION, problem_responses
from service.api.problems import problem
from service.api.schemas.calibrations import (
    CalibrationCreate,
    CalibrationMetadata,
    CalibrationProfileOut,
    CalibrationUploadForm,
)
from service.api.schemas.common import Cursor, ListPage
from service.services.calibration import (
    CalibrationService,
    FitLimits,
    FitTimeoutError,
)
from service.services.calibration_uploads import (
    CalibrationUpload,
    UploadMetadata,
    build_upload,
    decode_text,
    from_dicts,
    from_vllm,
    looks_like_vllm_result,
)
from service.services.errors import FieldError

router = APIRouter(prefix="/v1/calibrations", tags=["calibration"])

RETRY_AFTER_S = 30
FILE_FIELD = "file"


def _schema(model: type[Any]) -> dict[str, Any]:
    schema: dict[str, Any] = model.model_json_schema(ref_template="#/components/schemas/{model}")
    schema.pop("title", None)
    return schema


_UPLOAD_FORM = _schema(CalibrationUploadForm)
_UPLOAD_FORM["properties"][FILE_FIELD] = {"type": "string", "format": "binary"}
REQUEST_BODY: dict[str, Any] = {
    "required": True,
    "description": "The JSON body of docs/api.md (Calibration); or a benchmark CSV (text/csv "
    "or a multipart file; "
    "columns of the H100 gemm/attention/nccl/serving tables, Argonne LLM-Inference-Bench, or "
    "`model,batch_size,input_tokens,output_tokens` static runs; unknown columns are ignored "
    "with a warning); or a `vllm bench serve --save-result` result, one object or a list (as "
    "application/json with the metadata as query parameters, or as a multipart file). vllm "
    "mapping: model_id → model, max_concurrency (or num_prompts when unbounded) → concurrency, "
    "total_input_tokens/completed → input_tokens, total_output_tokens/completed → "
    "output_tokens, mean_ttft_ms → ttft_ms, mean_tpot_ms → tpot_ms, backend, "
    "tensor_parallel_size (else the `tp` query parameter), precision (else `weights_dtype`).",
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
    return meta if meta.name else replace(meta, name=f"{upload_format} upload")


def _decode_utf8(raw: bytes, field: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FieldError(field, f"is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def _from_json(raw: bytes, query: dict[str, Any], tp: int, weights_dtype: str) -> CalibrationUpload:
    try:
        document: Any = json.loads(_decode_utf8(raw, "body"))
    except json.JSONDecodeError as exc:
        raise FieldError("body", f"not valid JSON: {exc.msg} at line {exc.lineno}") from exc
    if looks_like_vllm_result(document):
        meta = _metadata(query)
        parsed = from_vllm(document, tp=tp, weights_dtype=weights_dtype)
        return build_upload(_named(meta, parsed.format), parsed)
    try:
        body = CalibrationCreate.model_validate(document)
    except ValidationError as exc:
        raise _invalid(exc) from exc
    meta = _metadata(body.model_dump(exclude={"measurements"}))
    parsed = from_dicts(body.measurements)
    return build_upload(_named(meta, parsed.format), parsed)


def _from_text(
    text: str, meta_values: dict[str, Any], tp: int, weights_dtype: str
) -> CalibrationUpload:
    meta = _metadata(meta_values)
    parsed = decode_text(text, tp=tp, weights_dtype=weights_dtype)
    return build_upload(_named(meta, parsed.format), parsed, csv_text=text)


async def read_upload(
    request: Request, query: dict[str, Any], tp: int, weights_dtype: str
) -> CalibrationUpload:
    """Decode the POST body by Content-Type (FieldError or RequestValidationError if bad)."""
    media = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
    if media == "multipart/form-data":
        form = await request.form()
        file = form.get(FILE_FIELD)
        if not isinstance(file, UploadFile):
            raise FieldError(FILE_FIELD, "a multipart upload needs a file field named 'file'")
        raw = await file.read()
        fields = {k: v for k, v in form.items() if k != FILE_FIELD and isinstance(v, str)}
        meta_values = {**query, **fields}
        text = _decode_utf8(raw, FILE_FIELD)
        return await run_in_threadpool(_from_text, text, meta_values, tp, weights_dtype)
    raw = await request.body()
    if media in ("text/csv", "text/plain"):
        text = _decode_utf8(raw, "body")
        return await run_in_threadpool(_from_text, text, query, tp, weights_dtype)
    if media == "application/json" or media.endswith("+json"):
        return await run_in_threadpool(_from_json, raw, query, tp, weights_dtype)
    raise _Unsupported(media)


class _Unsupported(Exception):
    def __init__(self, media: str) -> None:
        super().__init__(
            f"unsupported Content-Type {media!r}; send application/json, text/csv or "
            "multipart/form-data"
        )


def _owner(api_key: str | None) -> str:
    """The non-secret lookup prefix of the caller's key (scopes idempotency keys per client)."""
    parts = (api_key or "").split("_")
    return parts[1] if len(parts) == 3 else ""


@router.post(
    "",
    status_code=201,
    response_model=CalibrationProfileOut,
    dependencies=[WriteAccess],
    responses=problem_responses(415, 422, 503),
    openapi_extra={"requestBody": REQUEST_BODY},
)
async def create_calibration(
    request: Request,
    service: CalibrationDep,
    settings: SettingsDep,
    accelerator: Annotated[str | None, Query(description="For CSV and vllm uploads.")] = None,
    name: Annotated[str | None, Query()] = None,
    backend: Annotated[str | None, Query()] = None,
    backend_version: Annotated[str | None, Query()] = None,
    tp: Annotated[int, Query(ge=1, le=1024, description="TP of a vllm bench run.")] = 1,
    weights_dtype: Annotated[str, Query(description="Weights dtype of a vllm run.")] = "bf16",
    idempotency_key: IdempotencyKey = None,
    api_key: ApiKeyHeader = None,
) -> Response:
    """Fit a calibration profile from measurements and store it with them (201)."""
    query = {
        "accelerator": accelerator,
        "name": name,
        "backend": backend,
        "backend_version": backend_version,
    }
    try:
        upload = await read_upload(request, query, tp, weights_dtype)
    except _Unsupported as exc:
        return problem(415, "Unsupported Media Type", str(exc), "unsupported-media-type")
    limits = FitLimits(MAX_MEASUREMENTS_PER_CALIBRATION, settings.fit_time_budget_s)
    try:
        outcome = await run_in_threadpool(
            service.create,
            upload,
            limits,
            owner=_owner(api_key),
            idempotency_key=idempotency_key,
        )
    except FitTimeoutError as exc:
        return problem(
            503,
            "Service Unavailable",
            str(exc),
            "fit-time-budget-exceeded",
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )
    headers = {"Location": f"/v1/calibrations/{outcome.body['id']}"}
    if outcome.replayed:
        headers["Idempotent-Replayed"] = "true"
    return JSONResponse(outcome.body, status_code=outcome.status_code, headers=headers)


@router.get("", response_model=ListPage[CalibrationProfileOut], dependencies=[ReadAccess])
def list_calibrations(
    service: CalibrationDep,
    accelerator: Annotated[str | None, Query(max_length=100)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Cursor = None,
) -> dict[str, Any]:
    """List profiles in creation order, optionally for one accelerator, by an opaque cursor."""
    page = service.list_profiles(accelerator=accelerator, cursor=cursor, limit=limit)
    return {"items": page.items, "next_cursor": page.next_cursor}


@router.get("/{calibration_id}", response_model=CalibrationProfileOut, dependencies=[ReadAccess])
def get_calibration(calibration_id: str, service: CalibrationDep) -> dict[str, Any]:
    """Return one profile."""
    return service.get(calibration_id)


@router.get("/{calibration_id}/measurements", dependencies=[ReadAccess])
def get_calibration_measurements(
    calibration_id: str, service: CalibrationDep
) -> dict[str, list[dict[str, Any]]]:
    """Return the measurements a profile was fitted on, in upload order."""
    return {"items": service.measurements(calibration_id)}
