"""What the contract fuzzers check, and the findings in other modules they tolerate for now."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import schemathesis


def ridge_point_overflows(case: schemathesis.Case, _: str) -> bool:
    """Return True when the accelerator body's peak / bandwidth ratio is not a finite float."""
    body = case.body if isinstance(case.body, dict) else {}
    peaks, bandwidth = body.get("peak_tflops"), body.get("memory_bandwidth_gb_s")
    if not isinstance(peaks, dict) or not isinstance(bandwidth, int | float) or bandwidth <= 0:
        return False
    ratios = [v * 1e12 / (bandwidth * 1e9) for v in peaks.values() if isinstance(v, int | float)]
    return any(not math.isfinite(r) for r in ratios)


def text_has(marker: str) -> Callable[[schemathesis.Case, str], bool]:
    """Return a predicate: the failure or response text contains ``marker``."""
    return lambda _, text: marker in text


# Findings in other modules, tolerated until their owners fix them (reported to them):
# failure title -> predicate on (case, failure and response text) -> why.
KNOWN_ISSUES: list[tuple[str, Callable[[schemathesis.Case, str], bool], str]] = []


def is_known(case: schemathesis.Case, failure: Exception, body: str) -> bool:
    """Return True when a failure is one of the tolerated KNOWN_ISSUES."""
    title = getattr(failure, "title", "")
    text = f"{failure} {body}"
    return any(title == known and matches(case, text) for known, matches, _ in KNOWN_ISSUES)


def fuzz_config(seed: int, max_examples: int) -> dict[str, Any]:
    """Return schemathesis settings: positive and negative data, bounded examples, a seed."""
    return {
        "seed": seed,
        "generation": {"mode": "all", "max-examples": max_examples},
        "checks": {
            # Schema-valid input can still be refused with 422 for reasons JSON Schema cannot
            # state: layouts that do not divide the heads, opaque cursors the server never issued.
            "positive_data_acceptance": {
                "expected-statuses": ["2xx", "3xx", "401", "403", "404", "409", "422", "429"]
            },
        },
    }
