"""Helpers the test modules import directly (conftest modules are not importable by name)."""

from __future__ import annotations

from pathlib import Path

from service.settings import Settings

TEST_PEPPER = "test-pepper-not-secret"


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
