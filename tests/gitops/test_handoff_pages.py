"""The "Hand off to Git" button of the change and bulk pages, with Django's test client: the button
posts to the hand-off page, which commits to a real `git daemon` on loopback and then shows the commit;
a failure is a banner with the API's status code; a viewer sees no button and is refused the POST."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group

from offloading.choices import AuditAction
from offloading.models import AuditEvent, BulkRequest, ChangeRequest, Namespace
from tests.fixtures.waits import free_port
from tests.gitops.gitserver import GitDaemon, git
from tests.gitops.test_handoff import SPEC, configure

pytestmark = pytest.mark.django_db


def _change(api: Any) -> ChangeRequest:
    response = api.put(
        "/api/v1/namespaces/shop/offloading/", {"clusterSelector": SPEC["clusterSelector"]}, format="json"
    )
    assert response.status_code == 202, response.content
    return ChangeRequest.objects.get(pk=response.json()["id"])


def _heads(daemon: GitDaemon) -> dict[str, str]:
    out = git(
        "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads", cwd=Path(daemon.root) / "fleet.git"
    )
    return dict(line.split(" ") for line in out.splitlines())


def test_the_change_page_hands_off_and_shows_the_commit(
    api: Any, admin_client: Any, fleet: Any, daemon: GitDaemon, settings: Any
) -> None:
    configure(settings, daemon.url())
    change = _change(api)
    url = f"/changes/{change.pk}/handoff/"
    page = admin_client.get(f"/changes/{change.pk}/").content.decode()
    assert f'action="{url}"' in page and "Hand off to Git" in page

    before = admin_client.get(url)
    assert before.status_code == 200 and "Not handed off to Git yet" in before.content.decode()
    assert daemon.url() in before.content.decode()

    done = admin_client.post(url)
    assert done.status_code == 302 and done["Location"] == url
    sha = _heads(daemon)[f"liqo-dash/change-{change.pk}"]
    shown = admin_client.get(url).content.decode()
    assert 'id="handoff-latest"' in shown and sha in shown and f"liqo-dash/change-{change.pk}" in shown
    assert f"clusters/prod/liqo/change-{change.pk}/shop/namespaceoffloading.yaml" in shown
    event = AuditEvent.objects.get(action=AuditAction.HANDED_OFF)
    assert event.change == change and event.source == "web" and f"audit event #{event.seq}" in shown

    # Again: the branch exists; the page says so (409), nothing more is recorded, the commit still shows.
    again = admin_client.post(url)
    assert again.status_code == 409
    text = again.content.decode()
    assert 'id="handoff-error"' in text and "BranchExists" in text and "already has branch" in text and sha in text
    assert AuditEvent.objects.filter(action=AuditAction.HANDED_OFF).count() == 1


def test_the_bulk_page_hands_off(api: Any, admin_client: Any, fleet: Any, daemon: GitDaemon, settings: Any) -> None:
    configure(settings, daemon.url())
    Namespace.objects.filter(name__in=["shop", "payments"]).update(labels={"env": "prod"})
    body = {"action": "offload", "namespaceSelector": "env=prod", "spec": SPEC, "confirm": True}
    assert api.post("/api/v1/bulk/", body, format="json").status_code == 201
    bulk = BulkRequest.objects.get()
    url = f"/bulk/{bulk.pk}/handoff/"
    assert f'action="{url}"' in admin_client.get(f"/bulk/{bulk.pk}/").content.decode()
    assert admin_client.post(url).status_code == 302
    ids = sorted(bulk.changes.values_list("pk", flat=True))
    branch = "liqo-dash/changes-" + "-".join(str(i) for i in ids)
    shown = admin_client.get(url).content.decode()
    assert _heads(daemon)[branch] in shown and all(f'href="/changes/{i}/"' in shown for i in ids)


def test_an_unreachable_server_and_no_repository_on_the_page(
    api: Any, admin_client: Any, fleet: Any, settings: Any
) -> None:
    change = _change(api)
    url = f"/changes/{change.pk}/handoff/"
    configure(settings, f"git://127.0.0.1:{free_port()}/fleet.git")
    failed = admin_client.post(url)
    assert failed.status_code == 503 and "cannot be reached" in failed.content.decode()
    settings.LIQO_DASH_GITOPS = {"REPO_URL": ""}
    page = admin_client.get(url).content.decode()
    assert "No Git repository is usable" in page and "LIQO_DASH_GITOPS_REPO_URL" in page
    refused = admin_client.post(url)
    assert refused.status_code == 409 and "LIQO_DASH_GITOPS_REPO_URL" in refused.content.decode()
    assert not AuditEvent.objects.filter(action=AuditAction.HANDED_OFF).exists()


def test_a_viewer_sees_no_button_and_may_not_post(
    api: Any, client: Any, fleet: Any, daemon: GitDaemon, settings: Any, django_user_model: Any
) -> None:
    configure(settings, daemon.url())
    change = _change(api)
    viewer = django_user_model.objects.create_user("vera", password="pw-for-vera-1234")
    viewer.groups.add(Group.objects.get_or_create(name="viewer")[0])
    client.force_login(viewer)
    page = client.get(f"/changes/{change.pk}/").content.decode()
    assert "Hand off to Git</button>" not in page and f'href="/changes/{change.pk}/handoff/"' in page
    refused = client.post(f"/changes/{change.pk}/handoff/")
    assert refused.status_code == 403 and "viewer" in refused.content.decode()
    assert f"liqo-dash/change-{change.pk}" not in _heads(daemon)
