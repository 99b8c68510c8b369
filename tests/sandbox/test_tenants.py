"""Consumer peers offloading into the sandbox's cluster: the twins Liqo creates here (demo and helpers)."""

from __future__ import annotations

import copy

import pytest

from sandbox import Sandbox, scenarios, tenants
from sandbox.kinds import NAMESPACES

REMOTE_ID = "liqo.io/remote-cluster-id"


def twins(sb: Sandbox) -> dict[str, str]:
    """Namespace -> the peer it is a twin for (tenant namespaces left out)."""
    return {
        n["metadata"]["name"]: n["metadata"]["labels"][REMOTE_ID]
        for n in sb.store.items(NAMESPACES)
        if REMOTE_ID in (n["metadata"].get("labels") or {}) and not n["metadata"]["name"].startswith("liqo-tenant-")
    }


def test_the_demo_consumers_have_their_twins_here_named_labelled_and_annotated_as_liqo_does() -> None:
    with Sandbox(scenario="demo") as sb:
        assert twins(sb) == {"ci-runners-turin": "turin", "reports-bologna": "bologna", "etl": "bologna"}
        reports = sb.get("namespaces", "", "reports-bologna")
        assert reports is not None
        assert reports["status"]["phase"] == "Active"
        assert reports["metadata"]["annotations"] == {
            "liqo.io/managed-by-namespace-map": "liqo-tenant-bologna/rome",
            "liqo.io/original-name": "reports",
        }
        etl = sb.get("namespaces", "", "etl")  # EnforceSameName keeps the peer's name
        assert etl is not None and etl["metadata"]["annotations"]["liqo.io/original-name"] == "etl"
        assert sb.get("namespaces", "", "liqo-tenant-bologna") is not None


def test_a_withdrawn_twin_terminates_then_goes_and_a_new_one_appears() -> None:
    with Sandbox(scenario="demo", controller_delay=2.0) as sb:
        assert tenants.withdraw_here(sb.server, sb.liqo, "bologna", "reports") == "reports-bologna"
        terminating = sb.get("namespaces", "", "reports-bologna")
        assert terminating is not None and terminating["status"]["phase"] == "Terminating"
        sb.wait_idle(10)
        assert sb.get("namespaces", "", "reports-bologna") is None
        assert (
            tenants.offload_here(
                sb.server,
                sb.liqo,
                "turin",
                "builds",
                {"namespaceMappingStrategy": "SelectedName", "remoteNamespaceName": "turin-builds"},
            )
            == "turin-builds"
        )
        assert twins(sb)["turin-builds"] == "turin"


def test_only_a_consumer_offloads_here_and_only_its_own_twins_are_withdrawn() -> None:
    with Sandbox(scenario="demo") as sb:
        with pytest.raises(ValueError, match="'milan' has role 'Provider'"):
            tenants.offload_here(sb.server, sb.liqo, "milan", "orders")
        with pytest.raises(ValueError, match="no peer 'genoa'"):
            tenants.offload_here(sb.server, sb.liqo, "genoa", "orders")
        with pytest.raises(ValueError, match="not a twin of turin's 'etl'"):
            tenants.withdraw_here(
                sb.server, sb.liqo, "turin", "etl", {"namespaceMappingStrategy": "EnforceSameName"}
            )  # bologna's
        with pytest.raises(ValueError, match="not a valid namespace name"):
            tenants.offload_here(sb.server, sb.liqo, "turin", "x" * 60)  # x...x-turin is longer than 63 characters
        assert sb.get("namespaces", "", "etl") is not None


@pytest.mark.parametrize(
    ("peer", "entry", "message"),
    [
        ({"id": "genoa", "role": "Provider"}, "orders", "role 'Provider'"),
        ({"id": "genoa", "role": "Consumer"}, {"name": "orders", "podOffloadingStrategy": "Remote"}, "unknown field"),
        ({"id": "genoa", "role": "Consumer"}, 7, "give a namespace name"),
    ],
)
def test_a_scenario_offloading_here_from_a_non_consumer_or_badly_is_refused(
    peer: dict[str, object], entry: object, message: str
) -> None:
    data = copy.deepcopy(scenarios.load("minimal"))
    data["peers"].append({**peer, "offloadsHere": [entry]})
    with pytest.raises(ValueError, match=message):
        Sandbox(scenario=data).start()
