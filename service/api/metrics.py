"""Prometheus request metrics kept in a per-app registry."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class RequestMetrics:
    """Request counter and latency histogram labelled by route template, method and status."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "ridgeline_http_requests",
            "HTTP requests handled.",
            ("route", "method", "status"),
            registry=self.registry,
        )
        self.latency = Histogram(
            "ridgeline_http_request_duration_seconds",
            "HTTP request latency in seconds.",
            ("route", "method", "status"),
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )

        # The labelled children per (route, method, status): ``labels()`` looks them up under
        # a lock on every call; the set of label values is small (route templates).
        self._children: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        """Record one finished request."""
        key = (route, method, status)
        children = self._children.get(key)
        if children is None:
            labels = (route, method, str(status))
            children = self._children.setdefault(
                key, (self.requests.labels(*labels), self.latency.labels(*labels))
            )
        children[0].inc()
        children[1].observe(seconds)

    def render(self) -> bytes:
        """Return the registry in the Prometheus text exposition format."""
        return generate_latest(self.registry)
