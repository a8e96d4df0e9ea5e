"""Work budgets: what one request may make the server compute and send, and the 422 past it.

Size limits (items per batch, batch sizes per item) do not bound work on their own: 256 items x
1,024 batch sizes is 262,144 points and a 265 MB answer. A budget bounds the product, and the
422 names the budget, the request's figure and how to split the request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from service.services.errors import FieldError


def estimate_points(items: Sequence[Any]) -> int:
    """Return the points a batch asks for: the sum of its items' batch sizes (1 if unnamed)."""
    total = 0
    for item in items:
        sizes = item.get("batch_sizes") if isinstance(item, dict) else None
        total += len(sizes) if isinstance(sizes, list) else 1
    return total


def check_estimate_points(points: int, budget: int, field: str = "items") -> None:
    """Raise a FieldError (422) when a request's points exceed the budget."""
    if points > budget:
        raise FieldError(
            field,
            f"asks for {points} points (items x batch sizes); the work budget is {budget} "
            f"points per request: split it into {-(-points // budget)} or more requests",
        )


def check_response_bytes(size_bytes: int, budget_bytes: int) -> None:
    """Raise a FieldError (422) when an encoded answer exceeds the response budget."""
    if size_bytes > budget_bytes:
        raise FieldError(
            "body",
            f"the answer would be {size_bytes} bytes; the response budget is {budget_bytes} "
            "bytes: split the request into smaller ones",
        )
