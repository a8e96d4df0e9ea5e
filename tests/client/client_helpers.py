"""Test data helpers shared by the client and CLI tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "data"


def hf_config(name: str) -> dict[str, Any]:
    """A Hugging Face config.json from the test data."""
    config: dict[str, Any] = json.loads((DATA / "hf_configs" / f"{name}.json").read_text())
    return config
