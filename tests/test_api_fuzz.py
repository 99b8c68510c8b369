"""Schemathesis against our own OpenAPI schema, on a live server: every check it has (server errors,
status codes, content types, response schemas and headers, ...), stateless over every operation and
stateful over the schema's links. Derandomized (a fixed seed) so CI is repeatable."""

from __future__ import annotations

import json
from typing import Any

import pytest
import schemathesis
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings

from access.models import ApiToken

from .test_pages import fleet  # noqa: F401 - a realistic snapshot to hit

pytestmark = pytest.mark.django_db(transaction=True)

# The schema as the running app serves it (generated in-process: serving it needs a login).
SCHEMA = json.loads(json.dumps(SchemaGenerator().get_schema(public=True), default=str))
# A string the schema cannot describe (a label selector) may be well-typed and still wrong: a documented 400.
CONFIG = schemathesis.Config.from_dict(
    {
        "seed": 11,
        "checks": {
            "positive_data_acceptance": {
                "expected-statuses": ["2xx", "400", "401", "403", "404", "409", "412", "422", "429"]
            },  # fmt: skip
        },
    }
)
schema = schemathesis.openapi.from_dict(SCHEMA, config=CONFIG)
FUZZ = settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@pytest.fixture(autouse=True)
def _no_failure_brake(monkeypatch: Any) -> None:
    """Schemathesis probes every answered operation with invalid credentials and expects 401: the brake
    on failed token attempts (429 after 10 a minute, tests/access/test_client_address.py) would answer."""
    from access.throttles import AnonymousThrottle, TokenFailureThrottle

    monkeypatch.setattr(TokenFailureThrottle, "THROTTLE_RATES", {"token_failures": "100000/minute"})
    monkeypatch.setattr(AnonymousThrottle, "THROTTLE_RATES", {"anon": "100000/minute"})


@pytest.fixture
def bearer(admin_user: Any) -> dict[str, str]:
    _row, text = ApiToken.issue(admin_user, "schemathesis")
    return {"Authorization": f"Bearer {text}"}


@schema.parametrize()
@FUZZ
def test_every_operation_conforms_to_the_schema_whatever_it_is_sent(
    case: Any,
    live_server: Any,
    bearer: dict[str, str],
    fleet: Any,  # noqa: F811
) -> None:
    case.call_and_validate(base_url=live_server.url, headers=bearer)


def test_the_schema_has_links_for_the_stateful_mode() -> None:
    put = SCHEMA["paths"]["/api/v1/namespaces/{name}/offloading/"]["put"]["responses"]["202"]
    assert put["links"]["GetChange"]["parameters"] == {"id": "$response.body#/id"}
    assert "links" in SCHEMA["paths"]["/api/v1/bulk/"]["post"]["responses"]["201"]


def test_stateful_runs_over_the_links(live_server: Any, bearer: dict[str, str], fleet: Any) -> None:  # noqa: F811
    class Workflow(schema.as_state_machine()):  # type: ignore[misc]
        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"base_url": live_server.url, "headers": bearer}

    Workflow.run(settings=settings(FUZZ, max_examples=15, stateful_step_count=5))
