"""Contract fuzzers' settings: schemathesis.toml (as `schemathesis run` reads it) plus a seed."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import contract_hooks  # noqa: F401  (registers the map_case hook: the documented 422 rules)

CONFIG_FILE = Path(__file__).resolve().parents[2] / "schemathesis.toml"


def fuzz_config(seed: int, max_examples: int) -> dict[str, Any]:
    """Return schemathesis settings: the repository's checks, positive and negative data, a seed.

    Every check runs (``--checks all``) on every operation; a failure of any of them fails the
    test. Positive cases keep the rules the schema cannot state (contract_hooks.py).
    """
    config: dict[str, Any] = tomllib.loads(CONFIG_FILE.read_text())
    config["seed"] = seed
    config.setdefault("generation", {}).update({"mode": "all", "max-examples": max_examples})
    return config
