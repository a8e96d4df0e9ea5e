"""ETag responses, conditional GETs and JSON merge patches shared by resource routers."""

from __future__ import annotations

from types import UnionType
from typing import Annotated, Any, Optional, Union, get_args, get_origin

from fastapi import Header, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.config import JsonDict

from service.services.catalog import etag_matches
from service.services.errors import FieldError
from service.services.representation import etag_of

# If-Match: "*" or ETags from earlier responses. Any other value is well formed but can never
# match, so it gets the 412 a stale ETag gets (documented on every write).
IfMatch = Annotated[
    str | None,
    Header(
        alias="If-Match",
        max_length=2000,
        description="`*` or ETags from an earlier response; anything else, or a stale ETag, "
        "gives 412 Precondition Failed.",
    ),
]
IfNoneMatch = Annotated[str | None, Header(alias="If-None-Match")]


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


def _without_defaults(schema: dict[str, Any]) -> None:
    """Drop the ``default: null`` every patch field carries: absent means "leave unchanged"."""
    for prop in schema.get("properties", {}).values():
        prop.pop("default", None)


def _nullable_members(annotation: Any) -> Any:
    """Let the values of a mapping be null too (null deletes that member in a merge patch)."""
    origin = get_origin(annotation)
    if origin is dict:
        key, value = get_args(annotation)
        return dict[key, Optional[value]]  # type: ignore[valid-type]  # noqa: UP045
    if origin in (Union, UnionType):
        return Union[tuple(_nullable_members(arg) for arg in get_args(annotation))]  # noqa: UP007
    return annotation


def merge_patch_model(
    model: type[BaseModel], name: str, read_only: tuple[str, ...]
) -> type[BaseModel]:
    """Return the body schema of a JSON merge patch of ``model``: every field optional.

    A field the full body requires may not be null (null deletes a member, and the result would
    lack it); a field with a default may be null (it goes back to its default). ``read_only``
    fields are declared ``readOnly``: a client sends them only as the GET returned them.
    Cross-field rules of ``model`` apply to the merged result, not to the patch.
    """
    fields: dict[str, Any] = {}
    for field_name, info in model.model_fields.items():
        value: Any = _nullable_members(info.annotation)
        if info.metadata:
            value = Annotated[(value, *info.metadata)]
        if not info.is_required():
            value = Optional[value]  # noqa: UP045 (a runtime-built type)
        extra: JsonDict | None = {"readOnly": True} if field_name in read_only else None
        fields[field_name] = (
            value,
            Field(default=None, description=info.description, json_schema_extra=extra),
        )
    return create_model(
        name,
        __config__=ConfigDict(extra="forbid", json_schema_extra=_without_defaults),
        __doc__=f"JSON merge patch (RFC 7396) of {model.__name__}.",
        **fields,
    )
