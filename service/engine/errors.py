"""Exceptions raised by the engine; the API layer maps them to problem+json responses."""


class EngineError(Exception):
    """Base class for every error the engine raises on bad input."""


class InvalidShapeError(EngineError):
    """A model shape is inconsistent (non-positive sizes, heads that do not divide, ...)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class InvalidLayoutError(EngineError):
    """A parallel layout does not divide the model or does not suit the accelerator."""


class UnsupportedDtypeError(EngineError):
    """The accelerator has no peak figure for the requested compute dtype."""
