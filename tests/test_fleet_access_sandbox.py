"""Access per managed cluster (issue 28) against a sandbox domain of two API servers over HTTP (rome, the
default cluster, and milan, the managed cluster ``milan-eu``: the fixture of tests/test_fleet_changes_sandbox.py):
a change pushed to milan impersonates, or not, by milan's own setting, with the group milan maps the
user's role to, while rome's follows the installation's settings. The sandbox counts every request by
whom it impersonated (``acting``: the Impersonate-User and Impersonate-Group headers received) and
enforces milan's RBAC on them."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client
from kubernetes import client as k8s_client

from access.impersonation import identity_per_cluster
from offloading.changes.bulk import request_bulk
from offloading.changes.errors import ChangeRejected, Refusal
from offloading.changes.requests import request_offload
from offloading.choices import ChangeAction, ChangeState
from offloading.cluster import remote
from offloading.models import ChangeRequest
from offloading.snapshot import refresh as snapshot
from sandbox.rbac import SERVICE_USER
from tests import test_fleet_changes_sandbox as changes_sandbox
from tests.test_fleet_changes_sandbox import PLURAL, SAR, SPEC, Two

two = changes_sandbox.two  # the fixture of rome, milan-eu and the operator olga (scope */*)

pytestmark = pytest.mark.django_db(transaction=True)

MILAN_GROUPS = "viewer=milan:readers,operator=milan:offloaders,admin=milan:owners"
WRITE = f"create {PLURAL}"


def _acting(two: Two, cluster: str) -> dict[str, dict[str, int]]:
    """Whom the dashboard impersonated on ``cluster``, and in which requests."""
    return dict(two.domain[cluster].api.traffic.as_dict()["acting"].get(SERVICE_USER, {}))


def _milan_rbac(two: Two, *, operators_write: bool, offloaders_write: bool) -> None:
    """milan's RBAC: whether liqo-dash:operators (the installation's operator group) may write offloadings
    there, and whether milan:offloaders (milan's own) may, which the dashboard may then impersonate."""
    policy = two.domain["milan"].api.policy
    rules = [
        rule
        for rule in policy.rules
        if operators_write
        or not (
            PLURAL in (rule.get("resources") or [])
            and any(s.get("name") == "liqo-dash:operators" for s in rule.get("subjects") or [])
        )
    ]
    if offloaders_write:
        service = [{"kind": "Group", "name": "liqo-dash:service"}]
        offloaders = [{"kind": "Group", "name": "milan:offloaders"}]
        rules += [
            {
                "subjects": service,
                "apiGroups": [""],
                "resources": ["groups"],
                "verbs": ["impersonate"],
                "resourceNames": ["milan:offloaders"],
            },
            {"subjects": offloaders, "apiGroups": ["offloading.liqo.io"], "resources": [PLURAL], "verbs": ["*"]},
            {"subjects": offloaders, "apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "patch"]},
        ]
    policy.rules = rules  # a new list: the rules are shared dicts


def _reset(two: Two) -> None:
    for cluster in ("rome", "milan"):
        two.domain[cluster].api.traffic.reset()


def _offload_orders_in_both(two: Two) -> None:
    """olga offloads orders in milan, then in rome (each API server's traffic counted afresh): both apply."""
    _reset(two)
    milans = request_offload("orders", SPEC, two.olga, managed=two.milan.pk)
    romes = request_offload("orders", SPEC, two.olga)
    for change in (milans, romes):
        change.refresh_from_db()
        assert change.state == ChangeState.APPLIED, change.message


def test_milan_maps_the_role_to_its_own_group_and_rome_keeps_the_installations(two: Two) -> None:
    _milan_rbac(two, operators_write=False, offloaders_write=True)
    two.milan.impersonation_groups = MILAN_GROUPS
    two.milan.save()
    _offload_orders_in_both(two)
    assert two.offloading("milan") is not None and two.offloading("rome") is not None
    # The headers each API server received: olga as milan maps operators there, as the installation at rome.
    milan, rome = _acting(two, "milan"), _acting(two, "rome")
    assert set(milan) == {"liqo-dash:olga [milan:offloaders]"}, milan
    assert milan["liqo-dash:olga [milan:offloaders]"].get(WRITE, 0) >= 1  # the dry-run and the push
    assert set(rome) == {"liqo-dash:olga [liqo-dash:operators]"}, rome
    assert rome["liqo-dash:olga [liqo-dash:operators]"].get(WRITE, 0) >= 1
    assert two.calls("milan").get(SAR, 0) >= 1  # milan was asked about milan's group


def test_milans_review_asks_about_milans_group(two: Two) -> None:
    # milan maps operators to a group its RBAC grants nothing: the review refuses up front, naming olga.
    two.milan.impersonation_groups = "operator=milan:nobody"
    two.milan.save()
    _milan_rbac(two, operators_write=True, offloaders_write=False)  # liqo-dash:operators may: not asked of it
    with pytest.raises(ChangeRejected) as refused:
        request_offload("orders", SPEC, two.olga, managed=two.milan.pk)
    assert refused.value.refusal is Refusal.FORBIDDEN
    assert 'does not allow "liqo-dash:olga" to create namespaceoffloadings' in str(refused.value.messages)
    assert two.offloading("milan") is None
    # Back to the installation's groups (an empty field inherits them): the same change goes.
    two.milan.impersonation_groups = ""
    two.milan.save()
    change = request_offload("orders", SPEC, two.olga, managed=two.milan.pk)
    change.refresh_from_db()
    assert change.state == ChangeState.APPLIED, change.message


def test_impersonation_off_on_milan_pushes_as_the_dashboard_there_only(two: Two) -> None:
    # Operators may not write on milan: impersonated, olga's change would be refused there.
    _milan_rbac(two, operators_write=False, offloaders_write=False)
    two.milan.impersonation = "off"
    two.milan.save()
    _offload_orders_in_both(two)
    assert _acting(two, "milan") == {}  # no Impersonate-* header reached milan
    assert two.calls("milan").get(WRITE, 0) >= 1 and SAR not in two.calls("milan")  # nothing to review there
    assert set(_acting(two, "rome")) == {"liqo-dash:olga [liqo-dash:operators]"}
    assert two.calls("rome").get(SAR, 0) >= 1


def test_impersonation_on_for_milan_when_the_installation_has_it_off(two: Two, settings: Any) -> None:
    settings.KUBE_IMPERSONATE = False
    two.milan.impersonation = "on"
    two.milan.impersonation_groups = MILAN_GROUPS
    two.milan.save()
    _milan_rbac(two, operators_write=False, offloaders_write=True)
    _reset(two)
    for managed in (two.milan.pk, None):
        change = request_offload("orders", SPEC, two.olga, managed=managed)
        change.refresh_from_db()
        assert change.state == ChangeState.APPLIED, change.message
    assert set(_acting(two, "milan")) == {"liqo-dash:olga [milan:offloaders]"}
    assert _acting(two, "rome") == {} and SAR not in two.calls("rome")


def test_a_bulk_on_milan_pushes_with_milans_group(two: Two) -> None:
    _milan_rbac(two, operators_write=False, offloaders_write=True)
    two.milan.impersonation_groups = MILAN_GROUPS
    two.milan.save()
    k8s_client.CoreV1Api(two.clients["milan"]).patch_namespace("orders", {"metadata": {"labels": {"team": "a"}}})
    assert snapshot.refresh(two.milan).ok
    _reset(two)
    bulk = request_bulk(ChangeAction.OFFLOAD, "team=a", SPEC, two.olga, managed=two.milan.pk)
    children = list(ChangeRequest.objects.filter(bulk=bulk))
    assert [c.namespace for c in children] == ["orders"]
    children[0].refresh_from_db()
    assert children[0].state == ChangeState.APPLIED, children[0].message  # pushed by the bulk's own task
    assert set(_acting(two, "milan")) == {"liqo-dash:olga [milan:offloaders]"}
    assert _acting(two, "rome") == {}


def test_a_managed_provider_is_read_as_it_sees_the_user(two: Two) -> None:
    """The reads of a namespace's twins and of remote-name collisions on the managed providers."""
    _milan_rbac(two, operators_write=False, offloaders_write=True)
    two.milan.impersonation_groups = MILAN_GROUPS
    two.milan.save()
    _reset(two)
    (reading,) = remote.read_many([(two.milan, "orders")], identity_per_cluster("olga"), full=False)
    assert reading.exists, reading
    assert _acting(two, "milan") == {"liqo-dash:olga [milan:offloaders]": {"get namespaces": 1}}
    two.milan.impersonation = "off"
    two.milan.save()
    cache.clear()  # the readings are cached per reader: a new reader is asked again anyway
    (reading,) = remote.read_many([(two.milan, "orders")], identity_per_cluster("olga"), full=False)
    assert reading.exists and two.calls("milan").get("get namespaces") == 2
    assert _acting(two, "milan") == {"liqo-dash:olga [milan:offloaders]": {"get namespaces": 1}}  # no new one


def test_the_reflection_section_reads_the_pages_cluster(two: Two, django_user_model: Any) -> None:
    """The namespace page's reflection section under /m/milan-eu/ reads milan's API server, and the default
    cluster's page rome's (it read the default cluster's for every cluster's page)."""
    browser = Client()
    browser.force_login(django_user_model.objects.get(username="olga"))

    def requests_by_cluster(prefix: str) -> dict[str, int]:
        _reset(two)
        response = browser.get(f"{prefix}/namespaces/orders/reflection/")
        assert response.status_code == 200 and "could not read" not in response.content.decode()
        return {
            cluster: sum(c["requests"] for c in two.domain[cluster].api.traffic.as_dict()["clients"].values())
            for cluster in ("rome", "milan")
        }

    milan = requests_by_cluster("/m/milan-eu")
    assert milan["milan"] > 0 and milan["rome"] == 0, milan
    rome = requests_by_cluster("")
    assert rome["rome"] > 0 and rome["milan"] == 0, rome
