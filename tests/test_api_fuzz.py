"""Schemathesis against our own OpenAPI schema, on a live server: every check it has (server errors,
status codes, content types, response schemas and headers, ...), stateless over every operation and
stateful over the schema's links. Several fixed seeds (``SEEDS``), so CI is repeatable."""

from __future__ import annotations

import json
from typing import Any

import hypothesis
import pytest
import schemathesis
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings

from access.models import ApiToken

pytestmark = pytest.mark.django_db(transaction=True)

# The schema as the running app serves it (generated in-process: serving it needs a login).
SCHEMA = json.loads(json.dumps(SchemaGenerator().get_schema(public=True), default=str))
# Fixed seeds, each a run of its own: repeatable in CI, and more of the input space than one seed sees.
SEEDS = (11, 2718, 80443)


def _schema(seed: int) -> Any:
    """The schema under schemathesis with every check. A string the schema cannot describe (a label
    selector) may be well-typed and still wrong: a documented 400.

    The coverage phase (every boundary and every invalid value the schema defines, built while
    collecting: the collection's minutes) takes no seed: its cases are the same whatever the seed, so
    they run once, with the first seed (``test_the_coverage_cases_do_not_depend_on_the_seed``)."""
    config = schemathesis.Config.from_dict(
        {
            "seed": seed,
            "phases": {"coverage": {"enabled": seed == SEEDS[0]}},
            "checks": {
                "positive_data_acceptance": {
                    "expected-statuses": ["2xx", "400", "401", "403", "404", "409", "412", "422", "429"]
                },
            },
        }
    )
    # A managed cluster's copies (/api/v1/m/{cluster}/...) are the same views as the default cluster's,
    # fuzzed here; a generated cluster name would only ever meet their 404 (tests/test_cluster_switch.py).
    return schemathesis.openapi.from_dict(SCHEMA, config=config).exclude(path_regex=r"^/api/v1/m/")


FUZZ = settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), derandomize=False)


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


@pytest.fixture(params=SEEDS, ids=lambda seed: f"seed_{seed}")
def seeded_schema(request: Any) -> Any:
    return _schema(request.param)


# The operations are generated when the test runs, not while collecting (a lazy schema): each xdist
# worker collects this module, and only the one that runs a seed builds its cases (the coverage
# phase's are a minute of CPU). Each operation is a subtest, named in a failure.
@schemathesis.pytest.from_fixture("seeded_schema").parametrize()
@FUZZ
def test_every_operation_conforms_to_the_schema_whatever_it_is_sent(
    case: Any, live_server: Any, bearer: dict[str, str], fleet: Any
) -> None:
    case.call_and_validate(base_url=live_server.url, headers=bearer)


def test_the_schema_has_links_for_the_stateful_mode() -> None:
    put = SCHEMA["paths"]["/api/v1/namespaces/{name}/offloading/"]["put"]["responses"]["202"]
    assert put["links"]["GetChange"]["parameters"] == {"id": "$response.body#/id"}
    assert "links" in SCHEMA["paths"]["/api/v1/bulk/"]["post"]["responses"]["201"]


@pytest.mark.parametrize("seed", SEEDS)
def test_stateful_runs_over_the_links(live_server: Any, bearer: dict[str, str], fleet: Any, seed: int) -> None:
    class Workflow(_schema(seed).as_state_machine()):  # type: ignore[misc]
        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"base_url": live_server.url, "headers": bearer}

    hypothesis.seed(seed)(Workflow)
    Workflow.run(settings=settings(FUZZ, max_examples=12, stateful_step_count=5))


def _parameter(path: str, method: str, name: str) -> dict[str, Any]:
    return next(p for p in SCHEMA["paths"][path][method]["parameters"] if p["name"] == name)


def test_the_schema_says_what_the_api_enforces() -> None:
    """What schemathesis found looser in the schema than in the API, each now stated."""
    change = _parameter("/api/v1/audit/", "get", "change")["schema"]
    assert (change["type"], change["minimum"]) == ("integer", 1)
    assert _parameter("/api/v1/changes/", "get", "bulk")["schema"]["maximum"] == 2**62
    assert {"format": "date-time"} in _parameter("/api/v1/audit/", "get", "since")["schema"]["anyOf"]
    assert "pattern" in _parameter("/api/v1/namespaces/", "get", "selector")["schema"]
    assert "pattern" in _parameter("/api/v1/namespaces/", "get", "cluster")["schema"]
    assert "" in _parameter("/api/v1/namespaces/", "get", "phase")["schema"]["enum"]  # the pages' "any"
    assert "pattern" in _parameter("/api/v1/namespaces/{name}/offloading/", "put", "If-Match")["schema"]
    assert _parameter("/api/v1/bulk/{id}/", "get", "id")["schema"]["maximum"] == 2**63 - 1
    schemas = SCHEMA["components"]["schemas"]
    assert schemas["Spec"]["properties"]["clusterSelector"]["type"] == "object"  # null is refused
    assert len(schemas["BulkCreate"]["properties"]["namespaceSelector"]["allOf"]) == 2  # blank is refused


def _coverage_cases(seed: int, path: str, method: str) -> list[tuple[str, ...]]:
    """The coverage phase's cases of one operation, as schemathesis builds them for ``seed``."""
    from schemathesis.generation.hypothesis.builder import HypothesisTestConfig, HypothesisTestMode, create_test

    schema = schemathesis.openapi.from_dict(SCHEMA, config=schemathesis.Config.from_dict({"seed": seed}))
    config = HypothesisTestConfig(project=schema.config, modes=[HypothesisTestMode.COVERAGE], seed=seed)
    test = create_test(operation=schema[path][method], test_func=lambda case: None, config=config)
    cases = [example.kwargs["case"] for example in test.hypothesis_explicit_examples]
    return [(c.method, c.path, repr(c.path_parameters), repr(c.query), repr(c.headers), repr(c.body)) for c in cases]


def test_the_coverage_cases_do_not_depend_on_the_seed() -> None:
    """Why only the first seed runs the coverage phase: its cases are the same under every seed."""
    for path, method in (("/api/v1/clusters/", "GET"), ("/api/v1/audit/", "GET")):
        first = _coverage_cases(SEEDS[0], path, method)
        assert len(first) > 10  # boundaries and invalid values of every parameter
        assert all(_coverage_cases(seed, path, method) == first for seed in SEEDS[1:])
