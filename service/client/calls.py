"""One description per API call: method, path, body and how to parse the answer.

Both clients execute these, so request building and response parsing live only here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from service.api.schemas.accelerators import Accelerator
from service.api.schemas.analysis import EstimateResponse, IntensityResponse
from service.api.schemas.models import Model
from service.api.schemas.planning import PlanResponse, WorkloadList, WorkloadOut
from service.client.errors import RidgelineError, error_from_problem
from service.client.types import CalibrationProfile

T = TypeVar("T")
ItemT = TypeVar("ItemT")
Body = Mapping[str, Any] | BaseModel
ChartKind = Literal["roofline", "sweep", "frontier"]
ChartFormat = Literal["svg", "png", "vega"]


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """An HTTP call and the parser of its successful response."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: Mapping[str, Any] | None = None
    json: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    idempotent: bool = True
    content: bytes | None = None  # a body already encoded (then ``json`` is unused)


Page = tuple[list[ItemT], str | None]


@dataclass(frozen=True, slots=True)
class Paged(Generic[ItemT]):
    """A paginated listing: builds the call for a page (items, next cursor) given its cursor."""

    page: Callable[[str | None], Call[Page[ItemT]]]


def to_json(body: Body | None, fields: Mapping[str, Any]) -> dict[str, Any]:
    """Merge a request object (pydantic model or mapping) and keyword fields into a JSON body."""
    if isinstance(body, BaseModel):
        data = body.model_dump(mode="json", exclude_unset=True, by_alias=True)
    else:
        data = dict(body or {})
    data.update(fields)
    # Values may be API models taken from earlier answers (e.g. a plan's parallelism).
    encoded: dict[str, Any] = to_jsonable_python(data, by_alias=True)
    return encoded


def _segment(value: str) -> str:
    return quote(value, safe="")


def _none(_: httpx.Response) -> None:
    return None


def _bytes(response: httpx.Response) -> bytes:
    return response.content


def _as(model: type[BaseModel]) -> Callable[[httpx.Response], Any]:
    return lambda response: model.model_validate_json(response.content)


def _if_match(if_match: str | None) -> dict[str, str]:
    return {"If-Match": if_match} if if_match else {}


def _query(params: Mapping[str, Any]) -> dict[str, Any]:
    """Drop unset parameters and join sequences with commas."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, Sequence) and not isinstance(value, str):
            out[key] = ",".join(str(v) for v in value)
        else:
            out[key] = value
    return out


def _paged(
    path: str,
    parse_item: Callable[[Any], ItemT],
    limit: int | None,
    filters: Mapping[str, Any],
) -> Paged[ItemT]:
    def parse(response: httpx.Response) -> Page[ItemT]:
        body = response.json()
        return [parse_item(item) for item in body["items"]], body.get("next_cursor")

    def page(cursor: str | None) -> Call[Page[ItemT]]:
        params = _query({**filters, "limit": limit, "cursor": cursor})
        return Call("GET", path, parse, params=params)

    return Paged(page)


# Catalog: accelerators ------------------------------------------------------------------------


def list_accelerators(limit: int | None, filters: Mapping[str, Any]) -> Paged[Accelerator]:
    """Pages of GET /v1/accelerators."""
    return _paged("/v1/accelerators", Accelerator.model_validate, limit, filters)


def get_accelerator(accelerator_id: str) -> Call[Accelerator]:
    """GET /v1/accelerators/{id}."""
    return Call("GET", f"/v1/accelerators/{_segment(accelerator_id)}", _as(Accelerator))


def create_accelerator(body: Body | None, fields: Mapping[str, Any]) -> Call[Accelerator]:
    """POST /v1/accelerators."""
    return Call(
        "POST", "/v1/accelerators", _as(Accelerator), json=to_json(body, fields), idempotent=False
    )


def update_accelerator(
    accelerator_id: str,
    body: Body | None,
    fields: Mapping[str, Any],
    *,
    replace: bool,
    if_match: str | None,
) -> Call[Accelerator]:
    """PATCH (merge) or PUT (replace) /v1/accelerators/{id}."""
    return Call(
        "PUT" if replace else "PATCH",
        f"/v1/accelerators/{_segment(accelerator_id)}",
        _as(Accelerator),
        json=to_json(body, fields),
        headers=_if_match(if_match),
    )


def delete_accelerator(accelerator_id: str, if_match: str | None) -> Call[None]:
    """DELETE /v1/accelerators/{id}."""
    path = f"/v1/accelerators/{_segment(accelerator_id)}"
    return Call("DELETE", path, _none, headers=_if_match(if_match))


# Catalog: models ------------------------------------------------------------------------------


def list_models(limit: int | None, filters: Mapping[str, Any]) -> Paged[Model]:
    """Pages of GET /v1/models."""
    return _paged("/v1/models", Model.model_validate, limit, filters)


def get_model(model_id: str) -> Call[Model]:
    """GET /v1/models/{id}."""
    return Call("GET", f"/v1/models/{_segment(model_id)}", _as(Model))


def create_model(body: Body | None, fields: Mapping[str, Any]) -> Call[Model]:
    """POST /v1/models."""
    return Call("POST", "/v1/models", _as(Model), json=to_json(body, fields), idempotent=False)


def update_model(
    model_id: str,
    body: Body | None,
    fields: Mapping[str, Any],
    *,
    replace: bool,
    if_match: str | None,
) -> Call[Model]:
    """PATCH (merge) or PUT (replace) /v1/models/{id}."""
    return Call(
        "PUT" if replace else "PATCH",
        f"/v1/models/{_segment(model_id)}",
        _as(Model),
        json=to_json(body, fields),
        headers=_if_match(if_match),
    )


def delete_model(model_id: str, if_match: str | None) -> Call[None]:
    """DELETE /v1/models/{id}."""
    return Call("DELETE", f"/v1/models/{_segment(model_id)}", _none, headers=_if_match(if_match))


def import_hf_model(
    model_id: str, hf_config: Mapping[str, Any], fields: Mapping[str, Any]
) -> Call[Model]:
    """POST /v1/models/import with a Hugging Face config.json."""
    body = {"id": model_id, "hf_config": dict(hf_config), **fields}
    # Hugging Face configs may hold Infinity or NaN (Python's json writes them, and the API reads
    # them): send the config as it is, so that the server answers as it would to curl (a 422
    # naming the key when the value matters, else the import).
    content = json.dumps(body, allow_nan=True).encode()
    return Call(
        "POST",
        "/v1/models/import",
        _as(Model),
        content=content,
        headers={"Content-Type": "application/json"},
        idempotent=False,
    )


# Analysis and planning (pure computations: safe to repeat) ------------------------------------


def intensity(body: Body | None, fields: Mapping[str, Any]) -> Call[IntensityResponse]:
    """POST /v1/intensity."""
    return Call("POST", "/v1/intensity", _as(IntensityResponse), json=to_json(body, fields))


def estimate(body: Body | None, fields: Mapping[str, Any]) -> Call[EstimateResponse]:
    """POST /v1/estimates."""
    return Call("POST", "/v1/estimates", _as(EstimateResponse), json=to_json(body, fields))


def _batch_items(response: httpx.Response) -> list[EstimateResponse | RidgelineError]:
    items = response.json()["items"]
    return [
        EstimateResponse.model_validate(item) if "points" in item else error_from_problem(item)
        for item in items
    ]


def estimate_batch(
    requests: Sequence[Body],
) -> Call[list[EstimateResponse | RidgelineError]]:
    """POST /v1/estimates/batch: each result is an estimate or the item's error (not raised)."""
    items = [to_json(request, {}) for request in requests]
    return Call("POST", "/v1/estimates/batch", _batch_items, json={"items": items})


def plan(body: Body | None, fields: Mapping[str, Any]) -> Call[PlanResponse]:
    """POST /v1/plans."""
    return Call("POST", "/v1/plans", _as(PlanResponse), json=to_json(body, fields))


def _workload_items(response: httpx.Response) -> list[WorkloadOut]:
    return WorkloadList.model_validate_json(response.content).items


def workloads() -> Call[list[WorkloadOut]]:
    """GET /v1/workloads."""
    return Call("GET", "/v1/workloads", _workload_items)


# Calibration ----------------------------------------------------------------------------------


def calibrate(body: Body | None, fields: Mapping[str, Any]) -> Call[CalibrationProfile]:
    """POST /v1/calibrations (stores a profile: not repeated on connection errors)."""
    return Call(
        "POST",
        "/v1/calibrations",
        _as(CalibrationProfile),
        json=to_json(body, fields),
        idempotent=False,
    )


def calibrate_per_backend(
    body: Body | None, fields: Mapping[str, Any]
) -> Call[list[CalibrationProfile]]:
    """POST /v1/calibrations?split_by_backend=true: one stored profile per backend of the runs
    (all or none; not repeated on connection errors)."""
    return Call(
        "POST",
        "/v1/calibrations",
        lambda response: [_profile(item) for item in response.json()["items"]],
        params={"split_by_backend": "true"},
        json=to_json(body, fields),
        idempotent=False,
    )


def _profile(item: Any) -> CalibrationProfile:
    return CalibrationProfile.model_validate(item)


def list_calibrations(limit: int | None, filters: Mapping[str, Any]) -> Paged[CalibrationProfile]:
    """Pages of GET /v1/calibrations."""
    return _paged("/v1/calibrations", _profile, limit, filters)


def get_calibration(calibration_id: str) -> Call[CalibrationProfile]:
    """GET /v1/calibrations/{id}."""
    return Call("GET", f"/v1/calibrations/{_segment(calibration_id)}", _as(CalibrationProfile))


# Charts ---------------------------------------------------------------------------------------


def chart(kind: ChartKind, chart_format: ChartFormat, params: Mapping[str, Any]) -> Call[bytes]:
    """GET /v1/charts/{kind}: SVG, PNG or Vega-Lite JSON as bytes."""
    query = _query({**params, "format": chart_format})
    return Call("GET", f"/v1/charts/{_segment(kind)}", _bytes, params=query)
