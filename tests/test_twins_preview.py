"""The previews of a new offloading check its remote name on the selected peers that are managed clusters
too (issue 28): a name a managed provider already has as a namespace that is not this cluster's twin is a
problem on the page preview and ``taken`` in the API preview's ``remoteNamespaceChecks`` (Liqo would fail
there with CreationLoopBackOff), and a submit of it is refused (409); a provider that cannot be asked is
a note that neither holds the preview past the deadline nor refuses the submit; an offloaded namespace
is not checked (Liqo's webhook keeps its remote name); without a managed provider nothing is asked.
Against the two-cluster sandbox domain of tests/test_twins.py (rome the default cluster, milan managed)."""

# ruff: noqa: F811 - the tests take the imported ``world`` fixture as a parameter of the same name

from __future__ import annotations

import time
from typing import Any

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from offloading.changes.bulk import plan_bulk
from offloading.changes.checks import refuse_remote_collisions
from offloading.choices import Source
from offloading.cluster import remote
from offloading.context import Actor
from offloading.models import ChangeRequest, ManagedCluster, Namespace
from offloading.models.managed import ensure_configured
from offloading.snapshot.refresh import refresh
from offloading.whatif.preview import preview

# world: the rome + milan domain fixture of tests/test_twins.py, used here as the tests' parameter.
from tests.test_twins import TO_MILAN, World, eventually, world  # noqa: F401

SAME_NAME = {"namespaceMappingStrategy": "EnforceSameName", "clusterSelector": TO_MILAN}
FORM = {
    "namespace_mapping_strategy": "EnforceSameName",
    "pod_offloading_strategy": "LocalAndRemote",
    "cluster_selector": "liqo.io/remote-cluster-id=milan",
}


def _page_preview(client: Any, namespace: str, form: dict[str, str] | None = None) -> tuple[str, float]:
    started = time.monotonic()
    response = client.post(reverse("offloading:namespace_offload_preview", args=[namespace]), form or FORM)
    elapsed = time.monotonic() - started
    assert response.status_code == 200
    return response.content.decode(), elapsed


def _api_preview(api: Any, namespace: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    response = api.post(f"/api/v1/namespaces/{namespace}/preview/", body or SAME_NAME, format="json")
    assert response.status_code == 200
    data = response.json()
    assert data["valid"], data
    return data


def _reports_in_both(world: World) -> None:
    """milan has a namespace "reports" of its own; rome has one of the same name, not offloaded."""
    world.milan.create_namespace({"metadata": {"name": "reports", "labels": {"owner": "milan"}}})
    world.rome.create_namespace({"metadata": {"name": "reports"}})
    refresh()
    assert Namespace.objects.filter(name="reports", offloaded=False).exists()


class Asked:
    """Counts the reads of a managed provider's API (``remote.read_remote``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        real = remote.read_remote

        def counted(cluster: ManagedCluster, name: str, *args: Any, **kwargs: Any) -> remote.Reading:
            self.calls.append(f"{cluster.name}/{name}")
            return real(cluster, name, *args, **kwargs)

        monkeypatch.setattr(remote, "read_remote", counted)


@pytest.mark.sandbox
def test_the_previews_show_a_name_milan_already_has(world: World, admin_client: Any, api: Any) -> None:
    _reports_in_both(world)
    page, _ = _page_preview(admin_client, "reports")
    (banner,) = [line for line in page.splitlines() if "data-remote-taken" in line]
    assert 'class="banner bad"' in banner
    assert "&quot;reports&quot; on milan (managed cluster milan-eu)" in banner
    assert "not made by Liqo" in banner and "CreationLoopBackOff" in banner
    assert "data-remote-unchecked" not in page

    data = _api_preview(api, "reports")
    (check,) = data["remoteNamespaceChecks"]
    assert check["clusterId"] == "milan" and check["managedCluster"] == "milan-eu"
    assert (check["remoteNamespaceName"], check["verdict"], check["fails"]) == ("reports", "taken", True)
    assert "CreationLoopBackOff" in check["message"]

    # The default name (reports-rome) is free there: said in the API, no banner on the page.
    cache.clear()
    page, _ = _page_preview(admin_client, "reports", {**FORM, "namespace_mapping_strategy": "DefaultName"})
    assert "data-remote-taken" not in page and "<code>reports-rome</code>" in page
    data = _api_preview(api, "reports", {"clusterSelector": TO_MILAN})
    assert [(c["remoteNamespaceName"], c["verdict"], c["fails"]) for c in data["remoteNamespaceChecks"]] == [
        ("reports-rome", "free", False)
    ]
    # Nothing selected on milan: nothing checked.
    elsewhere = {"clusterSelector": {"nodeSelectorTerms": [{"matchExpressions": [_no_milan()]}]}}
    assert _api_preview(api, "reports", {**SAME_NAME, **elsewhere})["remoteNamespaceChecks"] == []


def _no_milan() -> dict[str, Any]:
    return {"key": "liqo.io/remote-cluster-id", "operator": "NotIn", "values": ["milan"]}


@pytest.mark.sandbox
def test_a_submit_with_a_name_milan_has_is_refused(
    world: World, admin_client: Any, api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _reports_in_both(world)
    response = api.put("/api/v1/namespaces/reports/offloading/", SAME_NAME, format="json")
    assert response.status_code == 409, response.content.decode()
    causes = response.json()["details"]["causes"]
    assert [c["field"] for c in causes] == ["spec.namespaceMappingStrategy"]
    assert "milan-eu" in causes[0]["message"] and "CreationLoopBackOff" in causes[0]["message"]

    selected = {
        "namespaceMappingStrategy": "SelectedName",
        "remoteNamespaceName": "reports",
        "clusterSelector": TO_MILAN,
    }
    response = api.put("/api/v1/namespaces/reports/offloading/", selected, format="json")
    assert response.status_code == 409
    assert [c["field"] for c in response.json()["details"]["causes"]] == ["spec.remoteNamespaceName"]

    # The form: the refusal on the page, on the mapping strategy's field.
    page = admin_client.post(reverse("offloading:namespace_offload", args=["reports"]), FORM).content.decode()
    assert "CreationLoopBackOff" in page and "Fix before submitting" in page
    assert not ChangeRequest.objects.filter(namespace="reports").exists()

    # A free name goes through.
    response = api.put("/api/v1/namespaces/reports/offloading/", {"clusterSelector": TO_MILAN}, format="json")
    assert response.status_code == 202, response.content.decode()

    # A bulk never asks the providers per namespace: its children are planned without this check, a
    # name milan has included (Liqo then fails on that one, as the namespace page's twin section says).
    world.milan.create_namespace({"metadata": {"name": "reports2"}})
    world.rome.create_namespace({"metadata": {"name": "reports2", "labels": {"team": "bulk"}}})
    refresh()
    asked = Asked(monkeypatch)
    plan = plan_bulk("offload", "team=bulk", SAME_NAME, Actor(None, "bulk-test", Source.BULK, "r1"))
    assert [c.namespace for c in plan.changes] == ["reports2"] and asked.calls == []


@pytest.mark.sandbox
def test_milan_down_is_a_note_within_the_deadline_and_refuses_nothing(
    world: World, admin_client: Any, api: Any
) -> None:
    _reports_in_both(world)
    world.dom["milan"].faults.set(outage=True)
    cache.clear()
    page, elapsed = _page_preview(admin_client, "reports")
    (note,) = [line for line in page.splitlines() if "data-remote-unchecked" in line]
    assert 'class="muted small"' in note and "could not be checked: unreachable" in note and "milan-eu" in note
    assert "data-remote-taken" not in page and 'class="banner bad"' not in page
    assert elapsed < remote.DEADLINE

    # A milan that hangs: the preview gives up at the deadline, and says so.
    world.dom["milan"].faults.set(outage=False, timeout_rate=1.0, timeout_seconds=6.0)
    cache.clear()
    started = time.monotonic()
    data = _api_preview(api, "reports")
    elapsed = time.monotonic() - started
    (check,) = data["remoteNamespaceChecks"]
    assert (check["verdict"], check["fails"]) == ("unchecked", False)
    # The deadline says so; on a loaded machine the read's own timeout (1.5 s, sent again once by the
    # client) may run out first, at the same moment: either way it gave up at the deadline.
    assert f"no answer within {remote.DEADLINE:g} s" in check["message"] or "Read timed out" in check["message"]
    assert remote.DEADLINE - 0.2 < elapsed < remote.DEADLINE + 1.5

    # Unchecked never refuses: the submit (within the cached answer's seconds, so without waiting) is queued.
    started = time.monotonic()
    response = api.put("/api/v1/namespaces/reports/offloading/", SAME_NAME, format="json")
    assert response.status_code == 202, response.content.decode()
    assert time.monotonic() - started < 1.5
    world.dom["milan"].faults.set(timeout_rate=0.0)


@pytest.mark.sandbox
def test_an_offloaded_namespace_is_not_checked(
    world: World, admin_client: Any, api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.offload("web2", {"clusterSelector": TO_MILAN})
    eventually(lambda: world.phase("web2") == "Ready")
    refresh()
    # A namespace on milan named as web2's DefaultName twin would be, were it asked: it is not asked.
    asked = Asked(monkeypatch)
    data = _api_preview(api, "web2", {"clusterSelector": TO_MILAN, "podOffloadingStrategy": "Remote"})
    assert data["remoteNamespaceChecks"] == []
    page, _ = _page_preview(admin_client, "web2", {**FORM, "namespace_mapping_strategy": "DefaultName"})
    assert "data-remote-" not in page
    assert asked.calls == []
    # ... while a new namespace's preview does ask milan.
    world.rome.create_namespace({"metadata": {"name": "fresh"}})
    refresh()
    assert _api_preview(api, "fresh", {"clusterSelector": TO_MILAN})["remoteNamespaceChecks"][0]["verdict"] == "free"
    assert asked.calls == ["milan-eu/fresh-rome"]


# -- without a domain: no managed provider -----------------------------------------------------------------
def test_without_a_managed_provider_nothing_is_asked(
    fleet: Any, admin_client: Any, api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ensure_configured([])
    asked = Asked(monkeypatch)
    payments = Namespace.objects.get(name="payments")
    spec = {"namespaceMappingStrategy": "EnforceSameName"}
    with CaptureQueriesContext(connection) as plain:
        preview(payments, spec)
    with CaptureQueriesContext(connection) as checked:
        found = preview(payments, spec, providers=True)
    assert found.selected == ["milan", "naples"] and found.remote_checks == []
    assert len(checked) - len(plain) == 1  # the managed clusters, read once
    assert _api_preview(api, "payments", spec)["remoteNamespaceChecks"] == []
    page, elapsed = _page_preview(admin_client, "payments", {**FORM, "cluster_selector": ""})
    assert "data-remote-" not in page and elapsed < 1
    actor = Actor(None, "test", Source.API, "r1")
    with CaptureQueriesContext(connection) as refusal:
        refuse_remote_collisions(payments, spec, actor, "rome")
    assert len(refusal) == 1
    # A managed cluster that is none of the selected peers: still nothing asked.
    managed = ManagedCluster.objects.create(name="turin-eu", context="turin")
    ManagedCluster.objects.filter(pk=managed.pk).update(liqo_cluster_id="turin")
    assert preview(payments, spec, providers=True).remote_checks == []
    refuse_remote_collisions(payments, spec, actor, "rome")
    assert asked.calls == []
