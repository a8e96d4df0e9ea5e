"""Contract fuzzing with schemathesis over the app's OpenAPI document (positive and negative data).

Every operation gets up to ``RIDGELINE_FUZZ_EXAMPLES`` generated requests per phase, sent with an
admin key (which may edit seeded rows, so PUT and PATCH are tried rather than refused with 403)
to a fresh app on a seeded database with rate limiting off (so requests are answered, not 429),
and every schemathesis check runs with the settings of schemathesis.toml (no tolerated
failures): no 5xx; status codes, content types, headers and bodies conform to the document;
schema-valid requests are accepted and schema-invalid ones refused (positive cases keep the
rules the schema cannot state: contract_hooks.py). ``RIDGELINE_FUZZ_SEED`` picks another
deterministic run.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import hypothesis
import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck
from quality_contract import fuzz_config
from support import make_test_settings

from service.api.app import create_app
from service.settings import Settings

pytestmark = pytest.mark.slow

MAX_EXAMPLES = int(os.environ.get("RIDGELINE_FUZZ_EXAMPLES", "10"))
SEED = int(os.environ.get("RIDGELINE_FUZZ_SEED", "1"))


def document_app() -> FastAPI:
    """An app used only to serve its OpenAPI document (its database is never opened, but its
    startup lock file is made beside it: in a temporary folder, removed at exit)."""
    folder = tempfile.mkdtemp(prefix="ridgeline-fuzz-schema-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    unused = Path(folder) / "unused-fuzz-schema.db"
    return create_app(Settings(database_url=f"sqlite:///{unused}", environment="test"))


schema = schemathesis.openapi.from_asgi(
    "/openapi.json",
    document_app(),
    config=schemathesis.Config.from_dict(fuzz_config(SEED, MAX_EXAMPLES)),
)


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    """The test settings with rate limiting off (the fuzzer sends thousands of requests)."""
    return make_test_settings(database_url, tmp_path, rate_limit_enabled=False)


@pytest.fixture
def admin_key(make_api_key: Callable[..., str]) -> str:
    return make_api_key("admin")


@schema.parametrize()
@hypothesis.settings(deadline=None, suppress_health_check=list(HealthCheck))
def test_operation_honours_contract(
    case: schemathesis.Case, app: FastAPI, client: TestClient, admin_key: str
) -> None:
    response = case.call(app=app, headers={"X-API-Key": admin_key})
    case.validate_response(response)
