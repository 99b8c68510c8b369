"""The GitOps hand-off per managed cluster (issue 28), against a real `git daemon` on loopback: the same
namespace ("shop") edited in the default cluster and in turin lands in two places of the repository, the
default's where it always was (``<path>/change-<id>/``), turin's under its own directory
(``<path>/turin/change-<id>/``, its kustomization and commit naming the cluster), so neither overwrites the
other; a change or bulk is found only under its cluster's path (``/api/v1/m/turin/...``; the plain path is
the default cluster's: 404), audited under its cluster, and handed off only by someone whose scopes cover
it in that cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from rest_framework.test import APIClient

from access import roles
from access.models import ApiToken, Scope
from offloading.audit.trail import verify
from offloading.choices import AuditAction
from offloading.governance import policy
from offloading.models import AuditEvent, BulkRequest, ChangeRequest, ManagedCluster
from tests.fleet_snapshot import write_turin
from tests.gitops.gitserver import GitDaemon, git
from tests.gitops.test_handoff import GAINS, PATH, SPEC, configure

pytestmark = pytest.mark.django_db


@pytest.fixture
def turin(fleet: Any) -> ManagedCluster:
    policy._DEFAULT_CLUSTER.clear()
    return write_turin()


def _edit(api: APIClient, base: str = "") -> ChangeRequest:
    body = {"clusterSelector": GAINS, "confirm": True}
    response = api.put(f"/api/v1{base}/namespaces/shop/offloading/", body, format="json")
    assert response.status_code == 202, response.content
    return ChangeRequest.objects.get(pk=response.json()["id"])


def _show(daemon: GitDaemon, sha: str, path: str) -> str:
    return git("show", f"{sha}:{path}", cwd=Path(daemon.root) / "fleet.git")


def test_the_same_namespace_of_two_clusters_lands_in_two_directories(
    api: APIClient, turin: ManagedCluster, daemon: GitDaemon, settings: Any
) -> None:
    configure(settings, daemon.url())
    ours, theirs = _edit(api), _edit(api, "/m/turin")
    assert (ours.managed_id, theirs.managed_id) != (turin.pk, turin.pk) and theirs.managed_id == turin.pk

    # turin's change is not the default cluster's: not found on the plain path, nothing committed.
    missed = api.post(f"/api/v1/changes/{theirs.pk}/handoff/", format="json")
    assert missed.status_code == 404 and missed.json()["details"]["kind"] == "changerequests"

    mine = api.post(f"/api/v1/changes/{ours.pk}/handoff/", format="json")
    other = api.post(f"/api/v1/m/turin/changes/{theirs.pk}/handoff/", format="json")
    assert mine.status_code == 201 and other.status_code == 201, (mine.content, other.content)
    default_dir, turin_dir = f"{PATH}/change-{ours.pk}", f"{PATH}/turin/change-{theirs.pk}"
    assert mine.json()["path"] == default_dir and other.json()["path"] == turin_dir
    assert all(f.startswith(f"{turin_dir}/") for f in other.json()["files"])
    assert f"{turin_dir}/shop/namespaceoffloading.yaml" in other.json()["files"]
    assert f"{default_dir}/shop/namespaceoffloading.yaml" in mine.json()["files"]

    # In the repository: each overlay where it said, the files as files/ gives them under its cluster's path.
    files = api.get(f"/api/v1/m/turin/changes/{theirs.pk}/files/").json()["files"]
    for rel, text in files.items():
        assert _show(daemon, other.json()["sha"], f"{turin_dir}/{rel}") == text
    assert "# Managed cluster turin" in files["kustomization.yaml"]
    plain = api.get(f"/api/v1/changes/{ours.pk}/files/").json()["files"]
    assert "Managed cluster" not in plain["kustomization.yaml"]  # the default cluster's bytes as before
    assert _show(daemon, mine.json()["sha"], f"{default_dir}/kustomization.yaml") == plain["kustomization.yaml"]
    message = git("log", "-1", "--format=%B", other.json()["sha"], cwd=Path(daemon.root) / "fleet.git")
    assert f"Liqo-Dash-Change: {theirs.pk}\nLiqo-Dash-Cluster: turin" in message
    assert "Liqo-Dash-Cluster" not in git(
        "log", "-1", "--format=%B", mine.json()["sha"], cwd=Path(daemon.root) / "fleet.git"
    )

    events = AuditEvent.objects.filter(action=AuditAction.HANDED_OFF).order_by("seq")
    assert [(e.change_id, e.managed_id) for e in events] == [(ours.pk, ours.managed_id), (theirs.pk, turin.pk)]
    assert verify().ok


def test_a_clusters_bulk_is_handed_off_and_audited_under_it(
    api: APIClient, turin: ManagedCluster, daemon: GitDaemon, settings: Any
) -> None:
    configure(settings, daemon.url())
    created = api.post(
        "/api/v1/m/turin/bulk/",
        {"action": "offload", "namespaceSelector": "env=prod", "spec": SPEC, "confirm": True},
        format="json",
    )
    assert created.status_code == 201, created.content
    bulk = BulkRequest.objects.get()
    assert bulk.managed_id == turin.pk
    assert api.post(f"/api/v1/bulk/{bulk.pk}/handoff/", format="json").status_code == 404
    response = api.post(f"/api/v1/m/turin/bulk/{bulk.pk}/handoff/", format="json")
    assert response.status_code == 201, response.content
    assert response.json()["path"].startswith(f"{PATH}/turin/change")
    (event,) = AuditEvent.objects.filter(action=AuditAction.HANDED_OFF)
    assert event.change_id is None and event.managed_id == turin.pk
    assert isinstance(event.after, dict) and event.after["bulk"] == bulk.pk


def test_handing_off_needs_the_scope_of_the_changes_cluster(
    api: APIClient, turin: ManagedCluster, daemon: GitDaemon, settings: Any, django_user_model: Any
) -> None:
    configure(settings, daemon.url())
    theirs = _edit(api, "/m/turin")
    otto = django_user_model.objects.create_user("otto", password="otto-password-123")
    otto.groups.add(Group.objects.get_or_create(name=roles.OPERATOR)[0])
    Scope.objects.create(user=otto, kind="glob", value="shop")  # the default cluster's shop only
    roles.forget(otto)
    client = APIClient()
    _, token = ApiToken.issue(otto, "handoff")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    refused = client.post(f"/api/v1/m/turin/changes/{theirs.pk}/handoff/", format="json")
    assert refused.status_code == 403 and "out of scope" in refused.json()["message"]
    (event,) = AuditEvent.objects.filter(action=AuditAction.REFUSED)
    assert event.user_name == "otto" and event.managed_id == turin.pk
    assert not AuditEvent.objects.filter(action=AuditAction.HANDED_OFF).exists()
    # With turin's scope, the same hand-off lands.
    Scope.objects.create(user=otto, kind="glob", value="turin/shop")
    roles.forget(otto)
    assert client.post(f"/api/v1/m/turin/changes/{theirs.pk}/handoff/", format="json").status_code == 201


def test_the_hand_off_page_is_the_clusters_and_names_its_directory(
    api: APIClient, admin_client: Client, turin: ManagedCluster, daemon: GitDaemon, settings: Any
) -> None:
    configure(settings, daemon.url())
    ours, theirs = _edit(api), _edit(api, "/m/turin")
    moved = admin_client.get(f"/changes/{theirs.pk}/handoff/")
    assert moved.status_code == 302 and moved["Location"] == f"/m/turin/changes/{theirs.pk}/handoff/"
    page = admin_client.get(moved["Location"]).content.decode()
    assert f"directory <code>{PATH}/turin</code>" in page
    assert f"directory <code>{PATH}</code>" in admin_client.get(f"/changes/{ours.pk}/handoff/").content.decode()
    # A POST on the plain path of turin's change hands nothing off (it leads to turin's page).
    assert admin_client.post(f"/changes/{theirs.pk}/handoff/").status_code == 302
    assert not AuditEvent.objects.filter(action=AuditAction.HANDED_OFF).exists()
    landed = admin_client.post(f"/m/turin/changes/{theirs.pk}/handoff/")
    assert landed.status_code == 302 and landed["Location"] == f"/m/turin/changes/{theirs.pk}/handoff/"
    assert AuditEvent.objects.get(action=AuditAction.HANDED_OFF).managed_id == turin.pk
