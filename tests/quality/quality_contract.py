"""Contract fuzzers' settings: schemathesis.toml (as `schemathesis run` reads it) plus a seed."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

CONFIG_FILE = Path(__file__).resolve().parents[2] / "schemathesis.toml"


def fuzz_config(seed: int, max_examples: int) -> dict[str, Any]:
    """Return schemathesis settings: the repository's checks, positive and negative data, a seed.

    Every check runs (``--checks all``); a failure of any of them fails the test.
    """
    config: dict[str, Any] = tomllib.loads(CONFIG_FILE.read_text())
    config["seed"] = seed
    config["generation"] = {"mode": "all", "max-examples": max_examples}
    return config
