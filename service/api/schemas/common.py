"""Shared schema types: slugs, dtypes, source URLs and list pages."""

from __future__ import annotations

from typing import Annotated, Any, Generic, Literal, TypeVar

from fastapi import Query
from pydantic import BaseModel, BeforeValidator, Field, StringConstraints
from pydantic.config import JsonDict

SLUG_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"
Slug = Annotated[str, StringConstraints(pattern=SLUG_PATTERN, min_length=1, max_length=100)]
# An http(s) URL with a host name, then printable ASCII (an IRI's other characters are
# percent-encoded), so that every regex engine and URL parser reads it alike.
SOURCE_URL_PATTERN = r"^https?://[A-Za-z0-9.-]+(?::[0-9]{1,5})?(?:[/?#][!-~]*)?$"
SourceUrl = Annotated[str, StringConstraints(pattern=SOURCE_URL_PATTERN, max_length=2000)]
# Free text without U+0000 (PostgreSQL text has none: input_guard refuses it in every request).
NO_NUL_PATTERN = r"^[^\x00]*$"
Dtype = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"]
# An opaque page cursor: unpadded URL-safe base64 (a length of 4n + 1 cannot occur).
CURSOR_PATTERN = r"^(?:[A-Za-z0-9_-]{4})*(?:[A-Za-z0-9_-]{2,3})?$"
Cursor = Annotated[
    str | None,
    Query(
        min_length=2,
        max_length=400,
        pattern=CURSOR_PATTERN,
        description="The `next_cursor` of the previous page.",
    ),
]


def _json_integer(value: Any) -> Any:
    """Read what JSON Schema calls an integer (1 or 1.0); refuse booleans and strings."""
    if isinstance(value, bool | str):
        raise ValueError("must be a JSON integer")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# Put after Field(strict=True, ...): 1.0 counts as 1 (as in JSON Schema), true and "1" do not.
JSON_INTEGER = BeforeValidator(_json_integer)

# A request field the server ignores (it echoes a response field): clients need not send it.
READ_ONLY: JsonDict = {"readOnly": True}

# A dict keyed by a patterned string: pydantic states the key pattern as patternProperties,
# which leaves other keys free unless additionalProperties is false, as the server reads it.
PATTERNED_KEYS_ONLY: JsonDict = {"additionalProperties": False}


def text_query(**options: Any) -> Any:
    """Return the Query of a free-text parameter: any string without U+0000."""
    return Query(pattern=NO_NUL_PATTERN, **options)


ItemT = TypeVar("ItemT")


class ListPage(BaseModel, Generic[ItemT]):
    """A page of items and the opaque cursor of the next page (null at the end)."""

    items: list[ItemT]
    next_cursor: str | None = Field(
        default=None, description="Pass as `cursor` to get the next page; null on the last page."
    )
