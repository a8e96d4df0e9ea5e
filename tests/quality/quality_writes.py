"""Write load for the live-server gates: small model shapes with unique ids."""

from __future__ import annotations

from typing import Any

import httpx

SEEDED_FIELDS = ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "intermediate_size")


def model_body(model_id: str, layers: int) -> dict[str, Any]:
    """Return a valid POST /v1/models body; ``layers`` makes each body distinguishable."""
    return {
        "id": model_id,
        "name": f"Quality {model_id}",
        "family": "llama",
        "num_layers": layers,
        "hidden_size": 64,
        "num_heads": 4,
        "num_kv_heads": 2,
        "head_dim": 16,
        "intermediate_size": 128,
        "vocab_size": 1000,
        "sources": ["https://example.com/quality"],
    }


def stored_matches(stored: dict[str, Any], sent: dict[str, Any]) -> bool:
    """Return True when every field that was sent reads back unchanged."""
    return all(stored.get(name) == value for name, value in sent.items())


def calibration_body(index: int) -> dict[str, Any]:
    """A small GEMM calibration upload whose name and latencies identify it."""
    shapes = [(m, n, k) for m in (16, 256, 4096) for n, k in ((4096, 4096), (14336, 4096))]
    # Synthetic latencies near an H100's bf16 GEMM roofline; only their identity matters here.
    return {
        "accelerator": "h100-sxm",
        "name": f"quality upload {index}",
        "backend": "quality",
        "measurements": [
            {
                "kind": "gemm",
                "dtype": "bf16",
                "m": m,
                "n": n,
                "k": k,
                "latency_ms": round(2 * m * n * k / 700e12 * 1e3 + 0.01 + index * 1e-4, 6),
            }
            for m, n, k in shapes
        ],
    }


def list_items(client: httpx.Client, path: str, **params: Any) -> list[dict[str, Any]]:
    """Follow the cursor through every page and return the items in order."""
    items: list[dict[str, Any]] = []
    query: dict[str, Any] = {"limit": 200, **params}
    while True:
        page = client.get(path, params=query).json()
        items += page["items"]
        if not page["next_cursor"]:
            return items
        query["cursor"] = page["next_cursor"]
