"""The test lanes: which tests are slow, marked from what they use rather than by hand.

``make test-fast`` runs ``pytest -m "not slow"``: the unit and page tests. ``make test`` runs everything.

- ``sandbox``: the test starts a sandbox API server: it asks for a fixture that does
  (``SANDBOX_FIXTURES``), or its own code, one of its fixtures or a function of the tests they call
  calls ``Sandbox(``, starts a domain of sandboxes (``Domain(``) or runs ``python -m sandbox serve``.
  ``_sandbox_needs_the_marker`` (autouse) fails a test without the marker that starts one anyway, so the
  marking cannot drift.
- ``e2e``: a real Redis and Celery worker (``pipeline``, ``redis_url``).
- ``browser``: Chromium (``browser_page``).
- ``slow``: all of the above, a live HTTP server (``live_server``), and what ``SLOW_MODULES`` lists:
  tests that take seconds starting other programs (gunicorn, checkov, fresh interpreters, ...).
- ``database``: the test touches the database: it asks for ``db``, ``transactional_db`` (or a fixture
  that does), ``live_server`` or carries ``django_db``. pytest-django refuses any other test a
  connection, so the rule is exact. The PostgreSQL run (``make test``) runs only these.
- ``once``: what ``ONCE_MODULES`` lists: tests that prove the same on any database (lint, the rendered
  manifests, the schema fuzzer), run in the SQLite run only.

In the fast lane, the terminal summary lists the tests that took longer than ``FAST_LIMIT`` seconds: mark
them slow (``pytestmark = pytest.mark.slow`` or ``SLOW_MODULES``) or make them fast.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox.server import Sandbox

TESTS = Path(__file__).resolve().parent

SANDBOX_FIXTURES = frozenset({"sandbox", "sandboxes", "k8s", "kube", "rbac_sandbox", "pipeline"})
E2E_FIXTURES = frozenset({"pipeline", "redis_url"})
BROWSER_FIXTURES = frozenset({"browser_page", "chromium"})
SLOW_FIXTURES = frozenset({"live_server"})

# Slow by what they start, not by a fixture: a module (its path under tests/) or one test of it
# ("path::name", every parametrization), with what makes it slow. Seconds measured on two busy cores.
SLOW_MODULES: dict[str, str] = {
    "test_deploy.py": "kubectl kustomize, checkov and manage.py check --deploy in other processes (100 s)",
    "test_api_fuzz.py": "schemathesis over every operation on a live server; its lazy schema hides the fixture (4 min)",
    "test_supervisor.py": "starts, kills and restarts child processes, waiting out their back-off (20 s)",
    "test_warmup.py": "imports the WSGI entry point in fresh interpreters (15 s)",
    "test_env_example.py": "parses every source file with ast, once per test (30 s)",
    "access/test_client_address.py::test_the_web_process_keys_throttles_and_lockout_on_the_proxys_entry": (
        "starts gunicorn (10 s)"
    ),
    "test_heartbeat.py::test_the_module_entry_point_exits_non_zero_when_stale": "four fresh interpreters (5 s)",
    "test_health.py::test_pod_ip_from_the_environment_is_an_allowed_host": "a fresh interpreter with Django (5 s)",
    "test_managed_access.py::test_the_settings_refuse_an_access_for_the_default_or_an_unlisted_context": (
        "two fresh interpreters with Django (2 s)"
    ),
    "test_lanes.py::test_the_lanes_split_as_documented": "collects tests in another pytest (10 s)",
}

# Tests that touch the database but prove nothing a second database would: left out of the PostgreSQL
# run (``POSTGRES_LANE``), each with why. Browser tests are left out there too: they drive the same views
# the page tests run on PostgreSQL, and Chromium renders the same HTML whichever database filled it.
ONCE_MODULES: dict[str, str] = {
    "test_api_fuzz.py": "schemathesis against the OpenAPI schema: the views' contract, not the database's",
    "test_deploy.py": "the rendered manifests, checkov and manage.py check --deploy on their own database",
    "test_env_example.py": "parses the source files",
    "test_structure.py": "reads the source and the import graph",
    "test_lanes.py": "the lanes themselves",
}

DATABASE_FIXTURES = frozenset(
    {"db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback", "live_server"}
)
POSTGRES_LANE = "database and not browser and not once"

FAST_LANE = "not slow"
FAST_LIMIT = 5.0

_STARTS_A_SANDBOX = re.compile(r'\bSandbox\(|\bDomain\(|"sandbox",\s*"serve"')
_source_starts_a_sandbox: dict[Any, bool] = {}


def _starts_a_sandbox(function: Any) -> bool:
    """Whether a test or fixture function defined under tests/ calls ``Sandbox(`` or ``Domain(`` (or runs
    ``python -m sandbox serve``), itself or through a function of the tests it calls by name
    (``_converge(...)``)."""
    function = inspect.unwrap(function)
    if function not in _source_starts_a_sandbox:
        _source_starts_a_sandbox[function] = False  # while looking: a recursive helper ends here
        source = _test_source(function)
        found = bool(source) and (
            bool(_STARTS_A_SANDBOX.search(source))
            or any(_starts_a_sandbox(helper) for helper in _helpers_called(function, source))
        )
        _source_starts_a_sandbox[function] = found
    return _source_starts_a_sandbox[function]


def _test_source(function: Any) -> str:
    """The source of a function defined under tests/ (not this module), or ''."""
    try:
        path = Path(inspect.getsourcefile(function) or "")
        if not path.is_relative_to(TESTS) or path == Path(__file__):
            return ""
        return textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        return ""


def _helpers_called(function: Any, source: str) -> Iterator[Any]:
    """The functions a function calls by a plain name, as its module sees them."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return
    names = {node.func.id for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    scope = getattr(function, "__globals__", {})
    for name in sorted(names):
        helper = scope.get(name)
        if inspect.isfunction(helper):
            yield helper


def _fixture_functions(item: pytest.Item) -> Iterator[Any]:
    info = getattr(item, "_fixtureinfo", None)
    for definitions in getattr(info, "name2fixturedefs", {}).values():
        for definition in definitions:
            yield definition.func


def _in_fast_lane(config: pytest.Config) -> bool:
    return _lane(config) == FAST_LANE


def _lane(config: pytest.Config) -> str:
    return " ".join(config.getoption("markexpr", "").split())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        relative = item.path.relative_to(TESTS).as_posix() if item.path.is_relative_to(TESTS) else ""
        markers: set[str] = set()
        function = getattr(item, "function", None)
        if names & SANDBOX_FIXTURES or any(
            _starts_a_sandbox(f) for f in (function, *_fixture_functions(item)) if f is not None
        ):
            markers.add("sandbox")
        if names & E2E_FIXTURES:
            markers.add("e2e")
        if names & BROWSER_FIXTURES:
            markers.add("browser")
        if names & DATABASE_FIXTURES or item.get_closest_marker("django_db") is not None:
            markers.add("database")
        if relative in ONCE_MODULES:
            markers.add("once")
        if (
            markers - {"database", "once"}
            or names & SLOW_FIXTURES
            or relative in SLOW_MODULES
            or f"{relative}::{getattr(item, 'originalname', item.name)}" in SLOW_MODULES
            or any(item.get_closest_marker(name) is not None for name in ("sandbox", "e2e", "browser"))
        ):
            markers.add("slow")
        for name in sorted(markers):
            if item.get_closest_marker(name) is None:
                item.add_marker(name)


@pytest.fixture(autouse=True)
def _sandbox_needs_the_marker(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test that starts a sandbox API server must be marked ``sandbox`` (and so ``slow``): the fast
    lane leaves it out. The marking above finds it from its fixtures and its source; this catches the rest
    (a helper in another module that starts one, say)."""
    if request.node.get_closest_marker("sandbox") is not None:
        return

    def refuse(self: Any) -> Any:
        pytest.fail(
            f"{request.node.nodeid} starts a sandbox API server but is not marked 'sandbox': add "
            "pytest.mark.sandbox to it (tests/lanes.py marks tests that ask for a sandbox fixture or call "
            "Sandbox( themselves or through a helper of the tests they call by name)",
            pytrace=False,
        )

    monkeypatch.setattr(Sandbox, "start", refuse)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if not _in_fast_lane(config):
        return
    durations: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            if isinstance(report, pytest.TestReport):
                durations[report.nodeid] = durations.get(report.nodeid, 0.0) + report.duration
    slow = sorted(((d, n) for n, d in durations.items() if d > FAST_LIMIT), reverse=True)
    if slow:
        terminalreporter.section(f"tests over {FAST_LIMIT:.0f} s in the fast lane (mark them slow, see tests/lanes.py)")
        for duration, nodeid in slow:
            terminalreporter.write_line(f"{duration:6.1f} s  {nodeid}")
