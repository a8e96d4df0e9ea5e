"""When to retry a call and how long to wait: Retry-After first, else capped exponential backoff."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After value (delta-seconds or HTTP date); None if invalid."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retry limits: attempts, retried statuses, backoff growth and caps (seconds)."""

    max_retries: int = 3
    retry_statuses: frozenset[int] = frozenset({429, 503})
    backoff_base_s: float = 0.5
    backoff_max_s: float = 8.0
    max_retry_after_s: float = 60.0

    def backoff_s(self, attempt: int, jitter: float) -> float:
        """Wait before retry ``attempt`` (0-based): base·2^attempt, capped, in [½, 1]× by jitter."""
        ceiling = min(self.backoff_max_s, self.backoff_base_s * 2.0**attempt)
        return ceiling * (0.5 + 0.5 * min(max(jitter, 0.0), 1.0))

    def delay_s(
        self, attempt: int, retry_after: str | None, jitter: float, now: datetime | None = None
    ) -> float | None:
        """Seconds to wait before retrying, or None to give up.

        A server's Retry-After is honoured as given; one longer than ``max_retry_after_s``
        means giving up rather than blocking the caller for that long.
        """
        if attempt >= self.max_retries:
            return None
        asked = parse_retry_after(retry_after, now)
        if asked is None:
            return self.backoff_s(attempt, jitter)
        return asked if asked <= self.max_retry_after_s else None
