"""Change governance per managed cluster (issue 28): a rule naming a cluster holds only that cluster's
changes (a freeze window on turin only) while a rule without one holds every cluster's; the Approvals page
and API under ``/m/<name>/`` list that cluster's approvals only, and a step on another cluster's change is
a 404 there; an approver is judged by the scopes of the change's cluster (``turin/team-a-*`` approves
turin's team-a namespaces, not the default cluster's), a refusal audited under that cluster; a bulk's
approval request is audited and alerted under its cluster; a released change goes to its cluster's queue.
The default cluster's plain paths answer as before. Two managed clusters: the ``fleet`` fixture's default
and ``turin`` (tests/fleet_snapshot.py), which share the names shop and payments."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from access import roles
from access.models import ApiToken
from offloading.changes.bulk import request_bulk
from offloading.changes.requests import request_offload, request_unoffload
from offloading.choices import AlertKind, AuditAction, ChangeAction, ChangeState
from offloading.governance import approvals, beat, clock, policy
from offloading.models import (
    Alert,
    Approval,
    ApprovalDecision,
    AuditEvent,
    ChangeRequest,
    ManagedCluster,
    Namespace,
    Schedule,
)
from tests.fixtures.snapshot import READY_SPEC
from tests.fleet_snapshot import write_turin
from tests.test_governance import actor, govern, person

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)  # a Wednesday
SATURDAY = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)
FREEZE = "turin/* => Sat-Sun 00:00-24:00 UTC"  # turin's changes wait for the weekend; nobody else's do


@pytest.fixture
def turin(fleet: Any) -> ManagedCluster:
    policy._DEFAULT_CLUSTER.clear()  # the default cluster's name is read again (another test may have named another)
    return write_turin()


@pytest.fixture
def sent(monkeypatch: Any) -> list[tuple[str, int, int | None]]:
    """What governance and the write path send to the worker, with the cluster queue they name."""
    found: list[tuple[str, int, int | None]] = []

    def apply(pk: int, countdown: float = 0, managed: int | None = None) -> None:
        found.append(("apply", pk, managed))

    def bulk(pk: int, *args: Any, managed: int | None = None) -> None:
        found.append(("bulk", pk, managed))

    for module in ("offloading.changes.requests", "offloading.governance.approvals", "offloading.governance.beat"):
        monkeypatch.setattr(f"{module}.enqueue_apply", apply)
    for module in ("offloading.changes.bulk", "offloading.governance.approvals"):
        monkeypatch.setattr(f"{module}.enqueue_bulk", bulk)
    return found


def api_as(user: Any) -> APIClient:
    client = APIClient()
    _, token = ApiToken.issue(user, "governance")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def both_waiting(turin: ManagedCluster, who: Any, name: str = "payments") -> tuple[ChangeRequest, ChangeRequest]:
    """An edit of namespace ``name`` asked in the default cluster and in turin, both awaiting approval."""
    ours = request_offload(name, READY_SPEC, actor(who), confirmed=True)
    theirs = request_offload(name, READY_SPEC, actor(who), confirmed=True, managed=turin.pk)
    assert (ours.state, theirs.state) == (ChangeState.AWAITING_APPROVAL,) * 2
    return ours, theirs


# ----------------------------------------------------------------------------------------------------
# Which rules hold a change


def test_a_freeze_window_on_one_cluster_holds_only_its_changes(
    turin: ManagedCluster, sent: Any, settings: Any, admin_user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    govern(settings, CHANGE_WINDOWS=FREEZE)
    with clock.frozen(T0), django_capture_on_commit_callbacks(execute=True):
        ours = request_offload("payments", READY_SPEC, actor(admin_user), confirmed=True)
        theirs = request_offload("payments", READY_SPEC, actor(admin_user), confirmed=True, managed=turin.pk)
    assert ours.state == ChangeState.QUEUED and ("apply", ours.pk, None) in sent
    assert theirs.state == ChangeState.SCHEDULED and not any(pk == theirs.pk for _, pk, _ in sent)
    theirs.refresh_from_db()
    assert theirs.schedule.not_before == datetime(2026, 11, 28, 0, 0, tzinfo=UTC)
    assert theirs.schedule.window == "Sat-Sun 00:00-24:00 UTC"
    assert Schedule.objects.of(turin).get().change_id == theirs.pk and not Schedule.objects.of(None).exists()
    scheduled = AuditEvent.objects.get(action=AuditAction.SCHEDULED)
    assert scheduled.change_id == theirs.pk and scheduled.managed_id == turin.pk
    # The beat releases it in its window, to its cluster's queue when per-cluster queues are configured.
    govern(settings, CLUSTER_QUEUE_PREFIX="liqo-dash-cluster-")
    with clock.frozen(T0), django_capture_on_commit_callbacks(execute=True):
        assert beat.release_due() == 0  # Wednesday: turin's window is closed
    with clock.frozen(SATURDAY), django_capture_on_commit_callbacks(execute=True):
        assert beat.release_due() == 1
    theirs.refresh_from_db()
    assert theirs.state == ChangeState.QUEUED and sent[-1] == ("apply", theirs.pk, turin.pk)


def test_a_rule_without_a_cluster_holds_every_clusters_changes_and_a_named_one_only_its_own(
    turin: ManagedCluster, sent: Any, settings: Any, admin_user: Any
) -> None:
    govern(settings, APPROVAL_POLICY="turin/shop => all; turin: label env=prod => destructive; payments => all")
    default = ManagedCluster.objects.get(is_default=True).name
    assert policy.approval_mode("payments", {}) == policy.ALL  # no cluster part: every cluster's
    assert policy.approval_mode("payments", {}, "turin") == policy.ALL
    assert policy.approval_mode("shop", {}, "turin") == policy.ALL
    assert policy.approval_mode("shop", {}) == policy.NONE and policy.approval_mode("shop", {}, default) == policy.NONE
    assert policy.approval_mode("web", {"env": "prod"}, "turin") == policy.DESTRUCTIVE
    assert policy.approval_mode("web", {"env": "prod"}) == policy.NONE
    # Through the request contract: turin's "shop" waits, the default cluster's "shop" does not.
    ours = request_unoffload("shop", actor(admin_user), confirmed=True)
    theirs = request_unoffload("shop", actor(admin_user), confirmed=True, managed=turin.pk)
    assert ours.state == ChangeState.QUEUED and theirs.state == ChangeState.AWAITING_APPROVAL
    assert "every change of namespace shop" in Approval.objects.get(change=theirs).reason


# ----------------------------------------------------------------------------------------------------
# Who may approve, and where it is audited


def test_a_clusters_scope_approves_that_clusters_namespaces_only(
    turin: ManagedCluster, sent: Any, settings: Any, django_user_model: Any, django_capture_on_commit_callbacks: Any
) -> None:
    govern(settings, APPROVAL_POLICY="team-a-* => all", CLUSTER_QUEUE_PREFIX="liqo-dash-cluster-")
    for managed in (ManagedCluster.objects.get(is_default=True), turin):
        Namespace.objects.create(managed=managed, name="team-a-web")
    ada = person(django_user_model, "ada", roles.ADMIN)
    tina = person(django_user_model, "tina", roles.OPERATOR, "turin/team-a-*")  # turin's team A only
    otto = person(django_user_model, "otto", roles.OPERATOR, "team-a-*")  # the default cluster's team A only
    ours, theirs = both_waiting(turin, ada, "team-a-web")

    # tina may not approve the default cluster's team-a-web: refused, audited under the default cluster.
    with pytest.raises(approvals.Refused) as refused:
        approvals.approve(actor(tina), change_id=ours.pk)
    assert refused.value.code == 403 and "out of scope" in refused.value.message
    # otto may not approve turin's: refused, and the refusal is turin's (the default's trail has none).
    with pytest.raises(approvals.Refused) as refused:
        approvals.approve(actor(otto), change_id=theirs.pk)
    assert refused.value.code == 403 and "out of scope" in refused.value.message
    trail = AuditEvent.objects.filter(action=AuditAction.REFUSED, namespace="team-a-web").order_by("seq")
    assert [(e.user_name, e.managed_id) for e in trail] == [("tina", ours.managed_id), ("otto", turin.pk)]

    # Each approves their own cluster's; the approval is audited under it, and turin's goes to turin's queue.
    with django_capture_on_commit_callbacks(execute=True):
        assert approvals.approve(actor(tina), change_id=theirs.pk).decision == ApprovalDecision.APPROVED
        assert approvals.approve(actor(otto), change_id=ours.pk).decision == ApprovalDecision.APPROVED
    approved = AuditEvent.objects.filter(action=AuditAction.APPROVED).order_by("seq")
    assert [(e.change_id, e.managed_id) for e in approved] == [(theirs.pk, turin.pk), (ours.pk, ours.managed_id)]
    assert sent == [("apply", theirs.pk, turin.pk), ("apply", ours.pk, None)]


def test_the_api_decides_in_the_clusters_path_only(
    turin: ManagedCluster, sent: Any, settings: Any, django_user_model: Any
) -> None:
    govern(settings, APPROVAL_POLICY="payments => all")
    ada = person(django_user_model, "ada", roles.ADMIN)
    tina = person(django_user_model, "tina", roles.OPERATOR, "turin/pay*")
    ours, theirs = both_waiting(turin, ada)
    api = api_as(tina)

    # Listed where they are: turin's under its path, with its name; none of turin's on the plain path.
    listed = api.get("/api/v1/m/turin/approvals/").json()
    assert [(a["change"], a["managedCluster"]) for a in listed] == [(theirs.pk, "turin")]
    assert api.get("/api/v1/approvals/").json() == []  # the default's: tina may decide on none of them
    admin = api_as(person(django_user_model, "root", roles.ADMIN))
    assert [a["change"] for a in admin.get("/api/v1/approvals/").json()] == [ours.pk]

    # A step on turin's change under the default cluster's path: not found there (as /changes/{id}/ is).
    wrong = api.post(f"/api/v1/changes/{theirs.pk}/approve/", {"comment": "ok"}, format="json")
    assert wrong.status_code == 404 and wrong.json()["details"]["kind"] == "changerequests"
    assert api.post(f"/api/v1/m/turin/changes/{ours.pk}/approve/", {}, format="json").status_code == 404
    assert Approval.objects.get(change=theirs).decision == ApprovalDecision.PENDING
    # Under its own path: approved with turin's scope.
    done = api.post(f"/api/v1/m/turin/changes/{theirs.pk}/approve/", {"comment": "ok"}, format="json")
    assert done.status_code == 200, done.content
    assert done.json()["managedCluster"] == "turin" and done.json()["state"] == ChangeState.QUEUED
    # The default cluster's change, on the plain path, as before: out of tina's scope there.
    refused = api.post(f"/api/v1/changes/{ours.pk}/approve/", {"comment": "ok"}, format="json")
    assert refused.status_code == 403 and "out of scope" in refused.json()["message"]


def _rows(html: str) -> list[str]:
    """The change links of the Approvals page's "awaiting you" list."""
    return re.findall(r'<strong>Change <a href="([^"]+)">', html)


def test_the_approvals_page_is_the_clusters(
    turin: ManagedCluster, sent: Any, settings: Any, django_user_model: Any
) -> None:
    govern(settings, APPROVAL_POLICY="payments => all")
    ada = person(django_user_model, "ada", roles.ADMIN)
    ours, theirs = both_waiting(turin, ada)
    client = Client()
    client.force_login(person(django_user_model, "root", roles.ADMIN))
    page = client.get("/m/turin/approvals/").content.decode()
    assert _rows(page) == [f"/m/turin/changes/{theirs.pk}/"]
    assert f'action="/m/turin/changes/{theirs.pk}/approve/"' in page and f"/changes/{ours.pk}/" not in page
    plain = client.get("/approvals/").content.decode()
    assert _rows(plain) == [f"/changes/{ours.pk}/"] and f"/changes/{theirs.pk}/" not in plain
    # The default cluster's page cannot decide on turin's change: nothing found there, nothing decided.
    missed = client.post(f"/changes/{theirs.pk}/approve/", {"comment": "ok"}, follow=True).content.decode()
    assert f"change {theirs.pk} does not exist" in missed
    assert Approval.objects.get(change=theirs).decision == ApprovalDecision.PENDING
    # Approving it through turin's page: done, and back on turin's Approvals page.
    response = client.post(f"/m/turin/changes/{theirs.pk}/approve/", {"comment": "ok"})
    assert response.status_code == 302 and response["Location"] == "/m/turin/approvals/"
    assert Approval.objects.get(change=theirs).decision == ApprovalDecision.APPROVED


def test_a_bulks_approval_request_is_its_clusters_in_the_trail_and_the_alert(
    turin: ManagedCluster, sent: Any, settings: Any, django_user_model: Any
) -> None:
    govern(settings, APPROVAL_POLICY="payments => all", ALERT_WEBHOOK_URL="http://127.0.0.1:9/hook")
    ada = person(django_user_model, "ada", roles.ADMIN)
    bulk = request_bulk(ChangeAction.OFFLOAD, "team=pay", READY_SPEC, actor(ada), confirmed=True, managed=turin.pk)
    assert bulk.managed_id == turin.pk and Approval.objects.of(turin).get().bulk_id == bulk.pk
    assert not Approval.objects.of(None).exists()  # the default cluster has none
    requested = AuditEvent.objects.get(action=AuditAction.APPROVAL_REQUESTED)
    assert requested.change_id is None and requested.managed_id == turin.pk
    alert = Alert.objects.get(kind=AlertKind.APPROVAL_NEEDED)
    assert alert.managed_id == turin.pk and alert.path == "/m/turin/approvals/"
    # Break glass on it: alerted with turin's bulk page, and sent to turin's bulk queue.
    govern(settings, CLUSTER_QUEUE_PREFIX="liqo-dash-cluster-")
    assert approvals.break_glass(actor(ada), bulk_id=bulk.pk, reason="outage", managed=turin.pk) >= 1
    broke = Alert.objects.get(kind=AlertKind.BROKE_GLASS)
    assert broke.managed_id == turin.pk and broke.path == f"/m/turin/bulk/{bulk.pk}/"


def test_the_default_clusters_governance_keeps_its_paths_and_queue(
    turin: ManagedCluster, sent: Any, settings: Any, django_user_model: Any
) -> None:
    govern(settings, APPROVAL_POLICY="payments => all", ALERT_WEBHOOK_URL="http://127.0.0.1:9/hook")
    ada = person(django_user_model, "ada", roles.ADMIN)
    change = request_offload("payments", READY_SPEC, actor(ada), confirmed=True)
    alert = Alert.objects.get(kind=AlertKind.APPROVAL_NEEDED)
    assert alert.path == "/approvals/" and alert.managed_id == change.managed_id
    approvals.approve(actor(person(django_user_model, "root", roles.ADMIN)), change_id=change.pk)
    assert Approval.objects.get(change=change).decision == ApprovalDecision.APPROVED


def test_the_openapi_schema_has_the_governance_paths_per_cluster(admin_user: Any) -> None:
    api = APIClient()
    api.force_authenticate(admin_user)
    paths = api.get("/api/schema/", {"format": "json"}).json()["paths"]
    for path in ("approvals/", "changes/{id}/approve/", "bulk/{id}/break-glass/", "changes/{id}/handoff/"):
        assert f"/api/v1/{path}" in paths and f"/api/v1/m/{{cluster}}/{path}" in paths, path
    listed = paths["/api/v1/m/{cluster}/approvals/"]["get"]["responses"]["200"]["content"]["application/json"]
    assert listed["schema"]["items"]["$ref"].endswith("/AwaitingApproval")
