"""Scopes by cluster end to end (issue 28), on the whole installation of tests/fixtures/domain.py: an operator
scoped ``milan/team-*`` sees milan's team namespaces as hers to change and changes them, in Chromium and
through the API, and the worker writes them to milan's API server; everything of rome's (even a
``team-a`` of the same name) and milan's other namespaces are read only in the pages and refused
(403, naming her scopes) by the pages and the API, and nothing of them is queued or written."""

from __future__ import annotations

import re
from typing import Any

from django.contrib.auth.models import Group
from playwright.sync_api import expect
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from access import roles
from access.models import Scope
from offloading.choices import ChangeState
from offloading.models import ChangeRequest, Namespace
from tests.browser import sign_in

PASSWORD = "olga-password-123"
NAMESPACES = {"rome": ("team-a", "other"), "milan": ("team-a", "team-b", "other")}


def _olga(django_user_model: Any) -> Any:
    olga = django_user_model.objects.create_user("olga", password=PASSWORD)
    olga.groups.add(Group.objects.get_or_create(name=roles.OPERATOR)[0])
    Scope.objects.create(user=olga, kind="glob", value="milan/team-*")
    roles.forget(olga)
    return olga


def _action(page: Any, name: str) -> str:
    """The actions cell of a namespace's row in the list on screen."""
    row = page.locator("#namespace-table tbody tr", has=page.locator(f"td:first-child a:text-is('{name}')"))
    return str(row.locator("td.actions").inner_text()).strip()


def test_an_operator_scoped_to_milans_team_namespaces_changes_those_and_nothing_else(
    start_fleet: Any, live_server: Any, django_user_model: Any, browser_page: Any
) -> None:
    fleet = start_fleet(["rome", "milan"])
    for cluster, names in NAMESPACES.items():
        for name in names:
            fleet.create_namespace(cluster, name)
    fleet.until(
        lambda: all(
            Namespace.objects.filter(managed=fleet.managed[c], name=n).exists()
            for c, names in NAMESPACES.items()
            for n in names
        ),
        30,
        "both clusters' rows",
    )
    olga = _olga(django_user_model)
    rome, milan = (f"/m/{fleet.managed[c].name}" for c in ("rome", "milan"))
    page = browser_page
    sign_in(page, live_server, "olga", PASSWORD)

    # What she sees: milan's team namespaces hers to offload, the rest read only, rome's team-a too.
    page.goto(f"{live_server.url}{milan}/namespaces/")
    assert _action(page, "team-a") == "Offload" and _action(page, "team-b") == "Offload"
    assert _action(page, "other") == "read only"
    page.goto(f"{live_server.url}{rome}/namespaces/")
    assert _action(page, "team-a") == "read only" and _action(page, "other") == "read only"
    for url in (f"{rome}/namespaces/team-a/offload/", f"{milan}/namespaces/other/offload/"):
        response = page.goto(f"{live_server.url}{url}")
        assert response is not None and response.status == 403, url
        expect(page.locator("main")).to_contain_text("out of scope")
        expect(page.locator("main")).to_contain_text("milan/team-*")
        expect(page.locator("#offload-form")).to_have_count(0)

    # She offloads milan's team-a in the browser: the worker writes it to milan, never to rome's team-a.
    page.goto(f"{live_server.url}{milan}/namespaces/team-a/offload/")
    page.locator("#preview").get_by_text(re.compile(r"of \d+ clusters? selected")).wait_for()
    page.click("#offload-form button[type=submit]")
    page.wait_for_url(f"{live_server.url}{milan}/changes/*/")
    page.locator("#change-status .badge", has_text="applied").wait_for(timeout=40_000)
    browser_change = ChangeRequest.objects.get(requester_name="olga", namespace="team-a")
    assert browser_change.managed_id == fleet.managed["milan"].pk and browser_change.state == ChangeState.APPLIED
    assert fleet.offloading("milan", "team-a") is not None and fleet.offloading("rome", "team-a") is None

    # The API, with her token: milan's team-b is hers, the rest refused with a Status naming her scopes.
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=olga).key}")
    body = {"podOffloadingStrategy": "Remote"}
    for prefix, name in ((rome, "team-a"), (rome, "other"), (milan, "other")):
        refused = api.put(f"/api/v1{prefix}/namespaces/{name}/offloading/", body, format="json")
        assert refused.status_code == 403, (prefix, name, refused.content)
        status = refused.json()
        assert (
            status["kind"] == "Status" and "out of scope" in status["message"] and "milan/team-*" in status["message"]
        )
    unknown = api.get("/api/v1/m/nowhere/namespaces/team-a/")
    assert unknown.status_code == 404 and unknown.json()["kind"] == "Status"
    accepted = api.put(f"/api/v1{milan}/namespaces/team-b/offloading/", body, format="json")
    assert accepted.status_code == 202, accepted.json()
    pk = accepted.json()["id"]
    fleet.until(lambda: ChangeRequest.objects.get(pk=pk).state == ChangeState.APPLIED, 30, "her API change")
    assert fleet.offloading("milan", "team-b") is not None
    # Nothing refused was queued, and nothing of rome's or of milan's other was written.
    assert set(ChangeRequest.objects.values_list("managed_id", "namespace")) == {
        (fleet.managed["milan"].pk, "team-a"),
        (fleet.managed["milan"].pk, "team-b"),
    }
    for cluster, name in (("rome", "team-a"), ("rome", "other"), ("milan", "other")):
        assert fleet.offloading(cluster, name) is None, (cluster, name)
