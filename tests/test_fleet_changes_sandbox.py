"""Issue 28, changes carry their cluster, against a sandbox domain of two API servers over HTTP (rome, the
default cluster, and milan, registered as the managed cluster ``milan-eu``), with the official kubernetes
client and eager Celery: a change of milan's "orders" is reviewed (SubjectAccessReview) and written by
milan's API server, never rome's, which has an "orders" too; milan's RBAC refusing the user refuses
milan's change with milan's reason while rome's goes; milan unreachable, its change waits while rome's
is applied, and milan's probe sends it once milan answers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from access import roles
from access.models import Scope
from liqo_rules.constants import GROUP, SCHEDULING_LABEL, VERSION
from offloading.changes.errors import ChangeRejected, Refusal
from offloading.changes.requests import request_offload
from offloading.choices import ChangeState, Source
from offloading.cluster import breaker as apihealth
from offloading.cluster import kube
from offloading.context import Actor
from offloading.models import ChangeRequest, ManagedCluster
from offloading.models.managed import ensure_configured
from offloading.snapshot import refresh as snapshot
from sandbox.domain import Domain
from sandbox.rbac import SERVICE_USER

pytestmark = pytest.mark.django_db(transaction=True)

SPEC = {"namespaceMappingStrategy": "DefaultName", "podOffloadingStrategy": "LocalAndRemote"}
PLURAL = "namespaceoffloadings"
SAR = "create subjectaccessreviews"


class Two:
    """The domain, both clusters' rows, a kubernetes client of each API server and the operator olga."""

    def __init__(self, domain: Domain, admin: Path, olga: Any) -> None:
        self.domain = domain
        (self.rome,) = ensure_configured([])  # the kubeconfig's current context: rome
        self.milan = ManagedCluster.objects.create(name="milan-eu", context="milan")
        self.clients = {
            name: k8s_config.new_client_from_config(config_file=str(admin), context=name) for name in ("rome", "milan")
        }
        self.olga = Actor(olga.pk, olga.username, Source.API, "req-olga")
        for name in ("rome", "milan"):
            k8s_client.CoreV1Api(self.clients[name]).create_namespace({"metadata": {"name": "orders"}})
        for managed in (self.rome, self.milan):
            assert snapshot.refresh(managed).ok

    def offloading(self, cluster: str) -> dict[str, Any] | None:
        custom = k8s_client.CustomObjectsApi(self.clients[cluster])
        try:
            return custom.get_namespaced_custom_object(GROUP, VERSION, "orders", PLURAL, "offloading")
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def calls(self, cluster: str) -> dict[str, int]:
        """The requests the dashboard (its own identity, the kubeconfig's user) made of ``cluster``'s API server
        (the domain's simulation of Liqo between the clusters is counted as another client)."""
        return self.domain[cluster].api.traffic.as_dict()["calls"].get(SERVICE_USER, {})

    def close(self) -> None:
        for api in self.clients.values():
            api.close()


@pytest.fixture
def two(tmp_path: Path, settings: Any, fresh_clients: None, django_user_model: Any) -> Iterator[Two]:
    settings.KUBE_IMPERSONATE = True
    settings.LIQO_DASH_CLUSTERS = []
    with Domain("domain:rome,milan", controller_delay=0.0, port=0) as dom:
        # The dashboard's own identity (reads, writes offloadings, impersonates); current context: rome.
        kubeconfig = dom.write_kubeconfig(tmp_path / "kubeconfig", user=SERVICE_USER)
        admin = dom.write_kubeconfig(tmp_path / "admin-kubeconfig")  # the test's own clients
        settings.LIQO_DASH = {
            **settings.LIQO_DASH,
            "KUBECONFIG": str(kubeconfig),
            "KUBE_CONFIG_MODE": "kubeconfig",
            "DRY_RUN_ON_SUBMIT": True,
        }
        kube.reset_client()
        olga = django_user_model.objects.create_user("olga", password="olga-password-123")
        olga.groups.add(Group.objects.get_or_create(name=roles.OPERATOR)[0])  # a flush removed the roles
        Scope.objects.create(user=olga, kind="glob", value="*/*")  # every namespace of every cluster
        running = Two(dom, admin, olga)
        try:
            yield running
        finally:
            running.close()
            kube.reset_client()


def test_a_change_of_milan_is_reviewed_and_written_by_milans_api_server_only(two: Two) -> None:
    # milan's "orders" already has the scheduling label (rome's has not): milan's snapshot says so.
    labelled = {"metadata": {"labels": {SCHEDULING_LABEL: "true"}}}
    k8s_client.CoreV1Api(two.clients["milan"]).patch_namespace("orders", labelled)
    assert snapshot.refresh(two.milan).ok
    for cluster in ("rome", "milan"):
        two.domain[cluster].api.traffic.reset()
    change = request_offload("orders", SPEC, two.olga, managed=two.milan.pk, label_namespace=True)
    assert change.managed_id == two.milan.pk
    assert two.calls("milan").get(SAR, 0) >= 1 and SAR not in two.calls("rome")
    assert two.calls("milan").get(f"create {PLURAL}", 0) >= 1  # the dry-run, then the push
    change.refresh_from_db()
    assert change.state == ChangeState.APPLIED, change.message
    written = two.offloading("milan")
    assert written is not None and written["metadata"]["annotations"]["liqo-dash.io/change-id"] == str(change.pk)
    assert two.offloading("rome") is None
    assert not any(call.endswith(PLURAL) for call in two.calls("rome")), two.calls("rome")
    # The label was read from milan's snapshot (there already): no patch of the namespace anywhere.
    assert "patch namespaces" not in two.calls("milan") and "patch namespaces" not in two.calls("rome")


def test_milans_rbac_refuses_milans_change_and_rome_still_takes_the_same_namespace(two: Two) -> None:
    policy = two.domain["milan"].api.policy
    # milan lets operators read, not write offloadings (a new list: the rules are shared dicts)
    policy.rules = [
        rule
        for rule in policy.rules
        if not (
            PLURAL in (rule.get("resources") or [])
            and any(s.get("name") == "liqo-dash:operators" for s in rule.get("subjects") or [])
        )
    ]
    with pytest.raises(ChangeRejected) as refused:
        request_offload("orders", SPEC, two.olga, managed=two.milan.pk)
    assert refused.value.refusal is Refusal.FORBIDDEN
    assert 'The cluster does not allow "liqo-dash:olga" to create namespaceoffloadings in "orders"' in str(
        refused.value.messages
    )
    assert not ChangeRequest.objects.filter(managed=two.milan).exists()
    change = request_offload("orders", SPEC, two.olga)  # rome's "orders", rome's RBAC
    change.refresh_from_db()
    assert change.state == ChangeState.APPLIED and two.offloading("rome") is not None
    assert two.offloading("milan") is None


def test_milan_unreachable_its_change_waits_while_romes_is_applied(two: Two) -> None:
    two.domain["milan"].faults.set(outage=True)  # every connection to milan dropped without an answer
    try:
        waiting = request_offload("orders", SPEC, two.olga, managed=two.milan.pk)  # review, dry-run: not asked
        applied = request_offload("orders", SPEC, two.olga)
        waiting.refresh_from_db()
        applied.refresh_from_db()
        assert waiting.state == ChangeState.QUEUED and waiting.waiting_reason == apihealth.WAITING_FOR_API
        assert applied.state == ChangeState.APPLIED and two.offloading("rome") is not None
        assert apihealth.outage(two.milan) is not None and apihealth.outage() is None
        assert not apihealth.probe(two.milan.pk)  # still down: it waits
    finally:
        two.domain["milan"].faults.clear()
    assert apihealth.probe(two.milan.pk)  # milan answers: its waiting change is sent (eagerly: applied)
    waiting.refresh_from_db()
    assert waiting.state == ChangeState.APPLIED, waiting.message
    assert two.offloading("milan") is not None and apihealth.outage(two.milan) is None
