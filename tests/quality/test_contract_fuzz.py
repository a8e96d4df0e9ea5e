"""Contract fuzzing with schemathesis over the app's OpenAPI document (positive and negative data).

Every operation gets up to ``RIDGELINE_FUZZ_EXAMPLES`` generated requests per phase, sent with a
write key to a fresh app on a seeded database, and every schemathesis check runs with the
settings of schemathesis.toml (no tolerated failures): no 5xx; status codes, content types,
headers and bodies conform to the document; schema-valid requests are accepted and
schema-invalid ones refused. ``RIDGELINE_FUZZ_SEED`` picks another deterministic run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from quality_contract import fuzz_config

from service.api.app import create_app
from service.settings import Settings

pytestmark = pytest.mark.slow

MAX_EXAMPLES = int(os.environ.get("RIDGELINE_FUZZ_EXAMPLES", "10"))
SEED = int(os.environ.get("RIDGELINE_FUZZ_SEED", "1"))


def document_app() -> FastAPI:
    """An app used only to serve its OpenAPI document (its database is never opened)."""
    unused = Path("unused-fuzz-schema.db")
    return create_app(Settings(database_url=f"sqlite:///{unused}", environment="test"))


schema = schemathesis.openapi.from_asgi(
    "/openapi.json",
    document_app(),
    config=schemathesis.Config.from_dict(fuzz_config(SEED, MAX_EXAMPLES)),
)


@schema.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck))
def test_operation_honours_contract(
    case: schemathesis.Case, app: FastAPI, client: TestClient, api_key: str
) -> None:
    response = case.call(app=app, headers={"X-API-Key": api_key})
    case.validate_response(response)
