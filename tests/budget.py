"""The suite's budget shows (a plugin of tests/conftest.py): a whole lane's run fails when it collects more
than ``TOLERANCE`` fewer tests than ``tests/budget.toml`` keeps for that lane, so speed never comes from
dropping checks. A lane is a whole run: ``pytest`` (``all``), ``make test-fast`` (``fast``) or the
PostgreSQL run (``postgres``); a run given paths, ``-k`` or another ``-m`` is not counted.

The kept numbers change only as a reviewed line of the diff: ``pytest --update-test-count`` (with the lane's
``-m``) writes the count this run collected.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests import lanes

BUDGET = Path(__file__).resolve().parent / "budget.toml"
TOLERANCE = 0.01

LANES = {"": "all", lanes.FAST_LANE: "fast", lanes.POSTGRES_LANE: "postgres"}


def lane_of(config: pytest.Config) -> str | None:
    """The lane a run is (None: a partial run, not counted)."""
    if config.getoption("keyword", "") or config.args_source != pytest.Config.ArgsSource.TESTPATHS:
        return None
    return LANES.get(" ".join(config.getoption("markexpr", "").split()))


def kept() -> dict[str, int]:
    if not BUDGET.exists():
        return {}
    return dict(tomllib.loads(BUDGET.read_text()).get("collected", {}))


def verdict(lane: str, collected: int, counts: dict[str, int]) -> str | None:
    """Why this count fails its lane's budget, or None."""
    if lane not in counts:
        return f"tests/budget.toml keeps no count for the {lane!r} lane: run with --update-test-count"
    floor = counts[lane] * (1 - TOLERANCE)
    if collected < floor:
        return (
            f"the {lane!r} lane collected {collected} tests, {counts[lane] - collected} fewer than the "
            f"{counts[lane]} tests/budget.toml keeps (at most {TOLERANCE:.0%} fewer may go unremarked): restore "
            "the checks, or say why in the diff with --update-test-count"
        )
    return None


def write(lane: str, collected: int) -> None:
    counts = {**kept(), lane: collected}
    lines = [
        "# Tests each whole lane collects (tests/budget.py): a run that collects more than 1 % fewer fails.",
        "# Written by `pytest --update-test-count` (with the lane's -m); a change here is a reviewed line.",
        "[collected]",
        *(f"{name} = {count}" for name, count in sorted(counts.items())),
    ]
    BUDGET.write_text("\n".join(lines) + "\n")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-test-count", action="store_true", help="keep this lane's collected count in tests/budget.toml"
    )


class _Count:
    def __init__(self) -> None:
        self.collected: int | None = None
        self.problem: str | None = None


_count = _Count()


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_collection_finish(session: pytest.Session) -> None:
    if not _is_worker(session.config) and not _xdist_controller(session.config):
        _count.collected = len(session.items)


def _xdist_controller(config: pytest.Config) -> bool:
    return bool(getattr(config.option, "numprocesses", None)) and not _is_worker(config)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    _count.collected = len(ids)  # every worker collects the same tests


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    lane = lane_of(config)
    if _is_worker(config) or lane is None or _count.collected is None:
        return
    if config.getoption("update_test_count"):
        write(lane, _count.collected)
        return
    _count.problem = verdict(lane, _count.collected, kept())
    if _count.problem is not None:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    lane = lane_of(config)
    if lane is None or _count.collected is None or _is_worker(config):
        return
    counts = kept()
    terminalreporter.write_line(
        f"test budget: the {lane!r} lane collected {_count.collected} tests (kept: {counts.get(lane, 'none')})"
    )
    if _count.problem is not None:
        terminalreporter.section("test budget", red=True)
        terminalreporter.write_line(_count.problem, red=True)
