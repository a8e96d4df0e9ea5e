"""Service-level failures that the API maps to problem+json (404, 409, 412, 401, 403, 422)."""

from __future__ import annotations

from collections.abc import Sequence

# A JSON body deeper than the parser's recursion limit (a RecursionError, once a 500).
NESTING_MESSAGE = "JSON is nested too deeply to parse; flatten the document"


class ServiceError(Exception):
    """Base class for expected failures of a service call."""


class NotFoundError(ServiceError):
    """No resource of this kind has this id; ``closest`` names ids that look like it."""

    def __init__(self, kind: str, resource_id: str, closest: Sequence[str] = ()) -> None:
        hint = f"; closest ids: {', '.join(closest)}" if closest else ""
        super().__init__(f"{kind} '{resource_id}' does not exist{hint}")
        self.kind = kind
        self.resource_id = resource_id


class ConflictError(ServiceError):
    """A resource with this id already exists."""

    def __init__(self, kind: str, resource_id: str) -> None:
        super().__init__(f"{kind} '{resource_id}' already exists")
        self.kind = kind
        self.resource_id = resource_id


class PreconditionFailedError(ServiceError):
    """The client's If-Match ETag no longer matches the stored resource."""


class FieldError(ServiceError):
    """A request value is invalid; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class AuthenticationError(ServiceError):
    """The API key is missing, unknown or revoked."""


class PermissionDeniedError(ServiceError):
    """The API key lacks the scope this operation needs."""
