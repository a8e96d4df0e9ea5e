"""Helpers the test modules import directly (conftest modules are not importable by name)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from service.settings import Settings

TEST_PEPPER = "test-pepper-not-secret"
SERVING_SUBSET = Path(__file__).parent / "data" / "benchmarks" / "h100_serving_qwen3_32b_subset.csv"


def serving_rows(backend: str, path: Path = SERVING_SUBSET) -> bytes:
    """The header and ``backend``'s rows of a serving CSV (one backend per profile)."""
    header, *rows = path.read_text().strip().splitlines()
    return "\n".join([header, *(r for r in rows if f",{backend}," in r)]).encode() + b"\n"


def upload_serving_runs(client: Any, headers: dict[str, str], backend: str = "trtllm") -> str:
    """Fit a profile on ``backend``'s runs of the serving subset on H100; return its id."""
    upload = client.post(
        "/v1/calibrations",
        files=[("file", (f"{backend}.csv", serving_rows(backend), "text/csv"))],
        params={"accelerator": "h100-sxm", "backend": backend},
        headers=headers,
    )
    assert upload.status_code == 201, upload.text
    profile: str = upload.json()["id"]
    return profile


def make_test_settings(database_url: str, data_dir: Path, **overrides: object) -> Settings:
    """Settings for a test app: the given database, already migrated and seeded."""
    values: dict[str, object] = {
        "database_url": database_url,
        "data_dir": data_dir,
        "migrate_on_startup": False,
        "seed_on_startup": False,
        "api_key_pepper": TEST_PEPPER,
        "environment": "test",
        "log_level": "WARNING",
        # Heavy work in a thread of the test process (tests monkeypatch services); the child
        # process path is tested in tests/api/test_heavy_processes.py and by the live servers.
        "heavy_processes": 0,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]
