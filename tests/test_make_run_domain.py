"""`make run` serves a sandbox domain (issue 28): the runner (offloading/management/commands/run_demo.py)
starts `sandbox serve` with sandbox/scenarios/domains/demo.yaml and gives every process
LIQO_DASH_CLUSTERS=rome,milan,naples; rome keeps the single-cluster demo's namespaces. No process is
started here: supervisord is replaced by a stand-in that records what it was given."""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from offloading.management.commands import run_demo
from sandbox import domain
from tests import lanes
from tests.fixtures.waits import ROOT


def test_the_runner_finds_the_clusters_of_a_domain_and_none_for_a_single_cluster() -> None:
    assert run_demo.domain_clusters(run_demo.DEMO_SCENARIO, ROOT) == ["rome", "milan", "naples"]
    assert run_demo.domain_clusters("domain:rome,milan,turin:provider", ROOT) == ["rome", "milan", "turin"]
    assert run_demo.domain_clusters("demo", ROOT) == []
    assert run_demo.domain_clusters("sandbox/scenarios/minimal.yaml", ROOT) == []


def _offloadings(namespaces: list[dict[str, Any]]) -> dict[str, bool]:
    return {ns["name"]: "offloading" in ns for ns in namespaces}


def test_rome_keeps_the_single_cluster_demos_nodes_and_namespaces() -> None:
    """The README and the screenshots name the demo's namespaces: the domain's rome has each of them,
    offloaded where the demo offloads it, and the demo's nodes."""
    single = yaml.safe_load((ROOT / "sandbox/scenarios/demo.yaml").read_text())
    spec = domain.load(ROOT / run_demo.DEMO_SCENARIO)
    rome = spec.clusters[0]
    assert rome.name == single["localCluster"]["id"] == "rome"
    assert _offloadings(domain.namespaces_of(spec, rome)) == _offloadings(single["namespaces"])
    assert rome.scenario["localNodes"] == single["localNodes"]
    # the peers' labels the demo's selectors use: web-frontend and payments-prod select eks (milan)
    assert domain.labels_of(spec, spec.clusters[1])["liqo.io/provider"] == "eks"


class _Supervisord:
    """Stands for supervisord: it has run and stopped."""

    returncode = 0

    def wait(self) -> int:
        return 0

    def poll(self) -> int:
        return 0


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: Any) -> Callable[[str], dict[str, Any]]:
    """``run(scenario)``: run_demo's handle with that scenario, up to where supervisord would start; what
    supervisord was given (its configuration, its environment) and what was printed."""
    settings.VAR_DIR = tmp_path
    for name in ("LIQO_DASH_CLUSTERS", "SANDBOX_SCENARIO", "REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LIQO_DASH_ADMIN_PASSWORD", "not-a-secret")
    monkeypatch.setattr(run_demo, "call_command", lambda *args, **kwargs: None)  # migrate, collectstatic
    monkeypatch.setattr(run_demo, "wait_for_ready", lambda port, timeout: True)
    monkeypatch.setattr(run_demo.signal, "signal", lambda *args: None)

    def go(scenario: str) -> dict[str, Any]:
        given: dict[str, Any] = {}
        out = io.StringIO()
        monkeypatch.setattr(run_demo.sys, "stdout", out)  # here: pytest sets its own between setup and call

        def start(config_path: Path, environment: dict[str, str], sink: Any = None) -> _Supervisord:
            given.update(config=config_path.read_text(), environment=environment)
            return _Supervisord()

        monkeypatch.setattr(run_demo, "start_supervisord", start)
        with pytest.raises(SystemExit):
            run_demo.Command().handle(port=0, scenario=scenario, no_sandbox=False)
        deadline = time.monotonic() + 5
        while "liqo-dash is up" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)  # the banner comes from a thread once /readyz would answer
        given["output"] = out.getvalue()
        return given

    return go


def test_every_process_of_make_run_manages_the_three_clusters(run: Callable[[str], dict[str, Any]]) -> None:
    given = run(run_demo.DEMO_SCENARIO)
    # supervisord hands its environment to every program: web, worker, beat and watcher
    assert given["environment"]["LIQO_DASH_CLUSTERS"] == "rome,milan,naples"
    assert given["environment"]["KUBECONFIG"].endswith("liqo-dash.kubeconfig")
    for program in ("web", "worker", "beat", "watcher"):
        assert f"[program:{program}]" in given["config"]
    sandbox_line = next(line for line in given["config"].splitlines() if " -m sandbox serve " in line)
    assert f"--scenario {run_demo.DEMO_SCENARIO} " in sandbox_line
    for flag in ("--kubeconfig", "--service-kubeconfig", "--controller-delay", "--state-file"):
        assert f" {flag} " in sandbox_line
    assert "login: admin / not-a-secret" in given["output"]
    assert "clusters: rome, milan, naples (kubectl --kubeconfig " in given["output"]


def test_a_single_cluster_scenario_sets_no_clusters(run: Callable[[str], dict[str, Any]]) -> None:
    given = run("demo")
    assert "LIQO_DASH_CLUSTERS" not in given["environment"]
    assert "--scenario demo " in given["config"]
    assert "login: admin / not-a-secret" in given["output"]
    assert "clusters:" not in given["output"]


def _starts_a_domain() -> None:
    with domain.Domain("domain:rome,milan", port=0):
        pass


def test_the_lanes_mark_a_test_that_starts_a_domain_as_a_sandbox_test() -> None:
    assert lanes._starts_a_sandbox(_starts_a_domain)
