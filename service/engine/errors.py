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


class ContextWindowError(EngineError):
    """A request's tokens exceed the model's context window (``max_context_tokens``)."""

    def __init__(self, field: str, tokens: int, limit: int, model_id: str) -> None:
        super().__init__(
            f"{field}: {tokens} tokens exceed the context window of {model_id} "
            f"(max_context_tokens={limit})"
        )
        self.field = field
        self.tokens = tokens
        self.limit = limit


def check_context(field: str, tokens: int, limit: int, model_id: str) -> None:
    """Raise ContextWindowError when ``tokens`` exceed a known window (``limit`` > 0)."""
    if limit > 0 and tokens > limit:
        raise ContextWindowError(field, tokens, limit, model_id)
