"""The suite's plugins: the lanes and the budget (tests/lanes.py, tests/budget.py) and the fixtures, one
module a job in tests/fixtures/ (its __init__ lists them)."""

from __future__ import annotations

pytest_plugins = (
    "tests.lanes",
    "tests.budget",
    "tests.fixtures.isolation",
    "tests.fixtures.personas",
    "tests.fixtures.snapshot",
    "tests.fixtures.cluster",
    "tests.fixtures.broker",
    "tests.fixtures.celery",
    "tests.fixtures.browser",
    "tests.fixtures.managed",
    "tests.fixtures.domain",
)
