"""The namespace list says who manages an offloading from Git, as the namespace page does, without a
query per row: the facts come with the row's other values, and the badge is the same with 1 or 40
managed namespaces on the page."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from offloading.gitops.detect import facts
from offloading.models import Namespace
from offloading.views import rows
from tests.fixtures.snapshot import READY_SPEC
from tests.gitops.test_override import WHO, _flux

pytestmark = pytest.mark.django_db


def _row(body: str, name: str) -> str:
    start = body.index(f'href="/namespaces/{name}/"')
    return body[start : body.index("</tr>", start)]


def _list(client: Any, **headers: str) -> tuple[str, int]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/namespaces/", **headers)
    assert response.status_code == 200
    return response.content.decode(), len(queries)


def test_the_list_shows_the_badge_without_a_query_per_row(admin_client: Any, fleet: Any) -> None:
    for i in range(40):
        Namespace.objects.create(name=f"team-{i:02d}", offloaded=True, offloading_spec=READY_SPEC)
    body, plain_queries = _list(admin_client)
    assert "Managed by" not in body

    Namespace.objects.filter(name="shop").update(gitops_facts=facts(_flux()))
    body, one_queries = _list(admin_client)
    shop = _row(body, "shop")
    # The tool, and the namespace page's headline and evidence as its title
    assert ">Flux</span>" in shop and f'title="{WHO}' in shop and "kustomize.toolkit.fluxcd.io/name=apps" in shop
    assert WHO not in _row(body, "payments") and WHO not in _row(body, "team-00")

    Namespace.objects.filter(name__startswith="team-").update(gitops_facts=facts(_flux()))
    body, many_queries = _list(admin_client)
    assert WHO in _row(body, "team-39")
    assert plain_queries == one_queries == many_queries

    partial = admin_client.get("/namespaces/", HTTP_HX_REQUEST="true").content.decode()
    assert WHO in _row(partial, "shop")


def test_a_namespace_no_longer_offloaded_shows_no_badge(admin_client: Any, fleet: Any) -> None:
    Namespace.objects.filter(name="payments").update(gitops_facts=facts(_flux()))  # stale facts, not offloaded
    body, _ = _list(admin_client)
    assert WHO not in _row(body, "payments")


def test_the_badges_are_computed_once_per_distinct_facts() -> None:
    rows.gitops_badges.cache_clear()
    text = Namespace(gitops_facts=facts(_flux())).gitops_facts
    first = rows.gitops_badges(json.dumps(text))
    assert first and first[0][:2] == ("Flux", False) and first[0][2].startswith(WHO + "\n")
    rows.gitops_badges(json.dumps(text))
    assert rows.gitops_badges.cache_info().hits == 1
    assert rows.gitops_badges("{}") == () and rows.gitops_badges("") == ()
