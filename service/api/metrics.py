"""Prometheus request metrics kept in a per-app registry."""

from __future__ import annotations

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

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        """Record one finished request."""
        labels = (route, method, str(status))
        self.requests.labels(*labels).inc()
        self.latency.labels(*labels).observe(seconds)

    def render(self) -> bytes:
        """Return the registry in the Prometheus text exposition format."""
        return generate_latest(self.registry)
