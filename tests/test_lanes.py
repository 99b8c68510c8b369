"""The fast lane (``make test-fast``, ``pytest -m "not slow"``) leaves out what tests/lanes.py marks slow:
from the fixtures a test uses and from ``Sandbox(`` in its source, and a test that starts a sandbox
without the marker fails."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sandbox import server
from tests import lanes
from tests.fixtures.waits import ROOT


def _starts_one() -> None:
    with server.Sandbox(scenario="minimal", port=0):
        pass


def _through_a_helper() -> None:
    _starts_one()


def _starts_none() -> None:
    server.Sandbox.__name__.lower()


def test_the_source_says_who_starts_a_sandbox() -> None:
    assert lanes._starts_a_sandbox(_starts_one)
    assert lanes._starts_a_sandbox(_through_a_helper)
    assert not lanes._starts_a_sandbox(_starts_none)
    assert not lanes._starts_a_sandbox(lanes._sandbox_needs_the_marker)  # its own message names Sandbox(


def test_an_unmarked_test_that_starts_a_sandbox_anyway_fails(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("sandbox") is None
    start_one = getattr(server, "Sandbox")  # noqa: B009 - hidden from the source scan on purpose
    with pytest.raises(pytest.fail.Exception, match="starts a sandbox API server but is not marked 'sandbox'"):
        start_one(scenario="minimal", port=0).start()


def _collect(*args: str) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "--collect-only", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode in (0, 5), result.stdout + result.stderr  # 5: every test deselected
    return {line.split("[")[0] for line in result.stdout.splitlines() if "::" in line}


def test_the_lanes_split_as_documented() -> None:
    modules = (
        "tests/test_pages.py",
        "tests/test_sync.py",
        "tests/test_browser.py",
        "tests/test_e2e.py",
        "tests/test_deploy.py",
        "tests/sandbox/test_faults.py",
    )
    fast = _collect("-m", "not slow", *modules)
    sandbox = _collect("-m", "sandbox", *modules)
    assert "tests/test_pages.py::test_namespace_list_shows_phase_and_filters" in fast  # a page test
    assert "tests/sandbox/test_faults.py::test_the_cli_server_writes_a_kubeconfig_and_takes_faults_over_http" in (
        sandbox - fast
    )  # python -m sandbox serve
    assert "tests/test_sync.py::test_a_restarted_api_server_is_followed_again" in sandbox - fast  # Sandbox( itself
    assert "tests/test_sync.py::test_a_cold_sync_lists_each_kind_once_and_marks_the_snapshot_fresh" in sandbox - fast
    grouped = "tests/sandbox/test_grouped_writes.py::test_grouped_writes_converge_to_the_state_of_one_write_each"
    assert grouped in _collect("-m", "sandbox", grouped)  # through a helper of its module
    assert not {n for n in fast if n.startswith(("tests/test_browser.py", "tests/test_e2e.py", "tests/test_deploy.py"))}
    assert _collect("-m", "e2e", "tests/test_e2e.py") == _collect("tests/test_e2e.py")  # the pipeline fixture


def test_every_slow_module_named_exists() -> None:
    for key in (*lanes.SLOW_MODULES, *lanes.ONCE_MODULES):
        path = lanes.TESTS / key.split("::")[0]
        assert path.is_file(), f"{key} in tests/lanes.py names no test module"
        if "::" in key:
            assert f"def {key.split('::')[1]}(" in path.read_text(), f"{key} in tests/lanes.py names no test"
