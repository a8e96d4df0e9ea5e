"""ETag responses, conditional GETs and JSON merge patches shared by resource routers."""

from __future__ import annotations

from typing import Any

from fastapi import Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError

from service.services.catalog import etag_matches
from service.services.errors import FieldError
from service.services.representation import etag_of


def representation_response(
    representation: dict[str, Any],
    *,
    status_code: int = 200,
    if_none_match: str | None = None,
    location: str | None = None,
) -> Response:
    """Return the representation with its strong ETag, or 304 when If-None-Match matches."""
    etag = etag_of(representation)
    headers = {"ETag": etag}
    if if_none_match is not None and etag_matches(if_none_match, etag):
        return Response(status_code=304, headers=headers)
    if location is not None:
        headers["Location"] = location
    return JSONResponse(representation, status_code=status_code, headers=headers)


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7396 JSON merge patch (null deletes a member)."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def validate_as(schema: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    """Validate ``data`` with ``schema`` and dump it; errors become a 422 naming the fields."""
    try:
        return schema.model_validate(data).model_dump()
    except ValidationError as exc:
        raise RequestValidationError(exc.errors()) from exc


def check_body_id(path_id: str, body_id: str | None) -> None:
    """Refuse a body whose ``id`` disagrees with the path."""
    if body_id is not None and body_id != path_id:
        raise FieldError("id", f"must equal the id in the path ('{path_id}')")
