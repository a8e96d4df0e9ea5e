"""Regular expressions that describe comma-separated query values exactly, for the OpenAPI document.

A chart takes ``batch_sizes=1,64,512``: the schema can only say what a string may be, so each list
parameter carries a pattern that admits exactly the lists the server accepts (integers in range,
no leading zeros or blanks, at most N items). FastAPI checks the pattern before the handler parses
the value, so the document and the server refuse the same strings.
"""

from __future__ import annotations

SLUG = r"[a-z0-9][a-z0-9._-]{0,99}"


def _digits_range(low: str, high: str) -> list[str]:
    """Return regexes that together match the decimal strings in [low, high] of equal length."""
    if low == high:
        return [low]
    if len(low) == 1:
        return [f"[{low}-{high}]"]
    rest = len(low) - 1
    if low[1:] == "0" * rest and high[1:] == "9" * rest:
        return [f"[{low[0]}-{high[0]}]" + "[0-9]" * rest]
    if low[0] == high[0]:
        return [low[0] + part for part in _digits_range(low[1:], high[1:])]
    parts: list[str] = []
    parts += [low[0] + p for p in _digits_range(low[1:], "9" * rest)]
    first, last = int(low[0]) + 1, int(high[0]) - 1
    if first <= last:
        digit = str(first) if first == last else f"[{first}-{last}]"
        parts.append(digit + "[0-9]" * rest)
    parts += [high[0] + p for p in _digits_range("0" * rest, high[1:])]
    return parts


def int_range(low: int, high: int) -> str:
    """Return a regex (no anchors) matching the decimal integers low..high, no leading zeros."""
    if not 0 <= low <= high:
        raise ValueError("expected 0 <= low <= high")
    parts: list[str] = []
    start = low
    while start <= high:
        width = len(str(start))
        end = min(high, 10**width - 1)
        parts += _digits_range(str(start), str(end))
        start = end + 1
    return "(?:" + "|".join(parts) + ")"


def comma_list(item: str, most: int) -> str:
    """Return an anchored regex for 1..``most`` comma-separated items matching ``item``."""
    return f"^{item}(?:,{item}){{0,{most - 1}}}$"


def int_list(low: int, high: int, most: int) -> str:
    """Return an anchored regex for a comma-separated list of integers in [low, high]."""
    return comma_list(int_range(low, high), most)


def slug_list(most: int) -> str:
    """Return an anchored regex for a comma-separated list of catalog ids."""
    return comma_list(SLUG, most)
