"""A short contract-fuzzing run against a live ``ridgeline serve`` process (2 workers)."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from quality_contract import fuzz_config
from quality_live import ServerFactory
from schemathesis import GenerationMode

pytestmark = pytest.mark.slow

LIVE_EXAMPLES = 5
SEED = 2


def test_live_server_honours_contract(live_server_factory: ServerFactory) -> None:
    server = live_server_factory()
    headers = {"X-API-Key": server.create_key("admin")}  # may edit seeded rows (PUT, PATCH)
    server.start()
    schema = schemathesis.openapi.from_url(
        f"{server.base_url}/openapi.json",
        config=schemathesis.Config.from_dict(fuzz_config(SEED, LIVE_EXAMPLES)),
    )
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10
    for operation in operations:
        strategy = st.one_of(
            operation.as_strategy(generation_mode=GenerationMode.POSITIVE),
            operation.as_strategy(generation_mode=GenerationMode.NEGATIVE),
        )

        @given(case=strategy)
        @settings(
            max_examples=LIVE_EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        def honours_contract(case: schemathesis.Case) -> None:
            response = case.call(headers=headers, timeout=60)
            case.validate_response(response)

        honours_contract()
    server.terminate()
