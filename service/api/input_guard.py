"""Refuse NUL characters in a request's path, query or body before they reach the database.

PostgreSQL text cannot hold U+0000 (psycopg raises DataError, which was a 500), and no field of
this API means anything with one, so a NUL anywhere is a 422 naming where it is. The check is a
substring search on the raw bytes; only a body that contains ``\\u0000`` (or a raw NUL byte) is
decoded to find the field, so ordinary requests pay one ``bytes.find`` per body. A batch body
(``per_item``) is refused only for a NUL outside its ``items``: the endpoint answers an item
that holds one with that item's own 422 (``nul_path``), as for any other invalid item.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl

from service.services.errors import NESTING_MESSAGE

NUL = "\x00"
_JSON_NUL = b"\\u0000"
NUL_MESSAGE = "must not contain the NUL character (U+0000)"


def nul_in_path(path: str) -> bool:
    """Return whether the (percent-decoded) request path holds a NUL."""
    return NUL in path


def nul_query_field(query_string: bytes) -> str | None:
    """Return the name of the first query parameter whose name or value holds a NUL."""
    if b"%00" not in query_string and b"\x00" not in query_string:
        return None
    text = query_string.decode("latin-1")
    for name, value in parse_qsl(text, keep_blank_values=True):
        if NUL in name or NUL in value:
            return name.replace(NUL, "") or "query"
    return "query"


def nul_path(document: Any) -> str | None:
    """Return the dotted path of the first string (key or value) holding a NUL; iterative."""
    stack: list[tuple[tuple[str, ...], Any]] = [((), document)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if NUL in value:
                return ".".join(path) or "body"
        elif isinstance(value, dict):
            for key, item in value.items():
                if NUL in key:
                    return ".".join((*path, key.replace(NUL, ""))) or "body"
                stack.append(((*path, key), item))
        elif isinstance(value, list):
            stack.extend(((*path, str(i)), item) for i, item in enumerate(value))
    return None


def body_problem(
    body: bytes, content_type: str, *, per_item: bool = False
) -> tuple[str, str] | None:
    """Return ``(field, message)`` when the body holds a NUL, else None.

    JSON bodies are searched for the member that holds it (the body is only decoded when the
    escape ``\\u0000`` or a raw NUL occurs); any other body with a raw NUL names ``body``.
    ``per_item``: the elements of a top-level ``items`` array are left to the endpoint.
    """
    raw_nul = b"\x00" in body
    escaped = _JSON_NUL in body
    if not raw_nul and not escaped:
        return None
    media = content_type.split(";")[0].strip().lower()
    if escaped and (media == "application/json" or media.endswith("+json")):
        try:
            document = json.loads(body)
        except RecursionError:
            return "body", NESTING_MESSAGE
        except ValueError:
            document = None  # not JSON: the endpoint's parser reports it
        if per_item and isinstance(document, dict) and isinstance(document.get("items"), list):
            document = {key: value for key, value in document.items() if key != "items"}
        field = nul_path(document) if document is not None else None
        if field is not None:
            return field, NUL_MESSAGE
    if raw_nul:
        return "body", NUL_MESSAGE
    return None  # an escaped backslash followed by "u0000", not a NUL
