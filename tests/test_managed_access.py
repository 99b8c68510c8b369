"""Access per managed cluster (issue 28): which identity each cluster sees (access.impersonation: its own
impersonation and role-to-group map, else the installation's; the default cluster always the
installation's), and the admins' Access page that sets them (offloading/views/managed_access.py),
audited. Against real clusters: tests/test_fleet_access_sandbox.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse

from access import roles
from access.conf import RoleConfigError, cluster_access
from access.impersonation import Identity, identity_for
from offloading.choices import AuditAction
from offloading.models import AuditEvent, ManagedCluster
from offloading.models.managed import ensure_configured

pytestmark = pytest.mark.django_db

GROUPS = "viewer=milan:readers,operator=milan:offloaders,admin=milan:owners"


@pytest.fixture
def clusters() -> tuple[ManagedCluster, ManagedCluster]:
    (default,) = ensure_configured([])
    return default, ManagedCluster.objects.create(name="milan", context="milan")


@pytest.fixture
def olga(django_user_model: Any) -> Any:
    user = django_user_model.objects.create_user("olga", password="olga-pass")
    user.groups.add(Group.objects.get(name=roles.OPERATOR))
    return user


def _access_url(name: str) -> str:
    return reverse("offloading:managed_cluster_access", args=[name])


@pytest.mark.usefixtures("olga")
def test_a_cluster_inherits_the_installations_settings_until_it_has_its_own(
    clusters: tuple[ManagedCluster, ManagedCluster], settings: Any
) -> None:
    default, milan = clusters
    installation = Identity("liqo-dash:olga", ("liqo-dash:operators",))
    assert identity_for("olga") == identity_for("olga", default) == identity_for("olga", milan) == installation
    milan.impersonation_groups = GROUPS
    assert identity_for("olga", milan) == Identity("liqo-dash:olga", ("milan:offloaders",))
    milan.impersonation_groups = "viewer=milan:readers"  # operators unmapped there: no group at all
    assert identity_for("olga", milan) == Identity("liqo-dash:olga", ())
    milan.impersonation = "off"
    assert identity_for("olga", milan) is None and identity_for("olga") == installation
    settings.KUBE_IMPERSONATE = False
    milan.impersonation, milan.impersonation_groups = "on", GROUPS
    assert identity_for("olga", milan) == Identity("liqo-dash:olga", ("milan:offloaders",))
    assert identity_for("olga") is None and identity_for("olga", default) is None


@pytest.mark.usefixtures("olga")
def test_the_default_cluster_follows_the_installation_whatever_its_row_says(
    clusters: tuple[ManagedCluster, ManagedCluster],
) -> None:
    default, _ = clusters
    default.impersonation, default.impersonation_groups = "off", GROUPS  # (the page never writes these)
    assert identity_for("olga", default) == Identity("liqo-dash:olga", ("liqo-dash:operators",))


def test_an_admin_sets_a_clusters_access_and_the_trail_records_it(
    admin_client: Client, clusters: tuple[ManagedCluster, ManagedCluster]
) -> None:
    _, milan = clusters
    page = admin_client.get(_access_url("milan")).content.decode()
    assert 'id="in-force-impersonation">Impersonation: <strong>on</strong>' in page
    assert "(from KUBE_IMPERSONATE_GROUPS)" in page
    answer = admin_client.post(
        _access_url("milan"), {"impersonation": "off", "impersonation_groups": " operator = milan:offloaders , "}
    )
    assert answer.status_code == 302
    milan.refresh_from_db()
    assert (milan.impersonation, milan.impersonation_groups) == ("off", "operator=milan:offloaders")
    event = AuditEvent.objects.get(action=AuditAction.CLUSTER_UPDATED)
    assert event.before == {"cluster": "milan", "impersonation": "", "impersonation_groups": ""}
    assert event.after == {
        "cluster": "milan",
        "changed": ["impersonation", "impersonation_groups"],
        "impersonation": "off",
        "impersonation_groups": "operator=milan:offloaders",
    }
    page = admin_client.get(_access_url("milan")).content.decode()
    assert 'Impersonation: <strong>off</strong> <small class="muted">(from this cluster)</small>' in page
    listed = admin_client.get(reverse("offloading:managed_cluster_list")).content.decode()
    assert f'href="{_access_url("milan")}"' in listed and "own access: impersonation off" in listed
    # The same values again: nothing saved, nothing audited.
    again = admin_client.post(
        _access_url("milan"), {"impersonation": "off", "impersonation_groups": "operator=milan:offloaders"}
    )
    assert again.status_code == 302 and AuditEvent.objects.filter(action=AuditAction.CLUSTER_UPDATED).count() == 1
    # Emptied: inherits again.
    assert admin_client.post(_access_url("milan"), {"impersonation": "", "impersonation_groups": ""}).status_code == 302
    milan.refresh_from_db()
    assert (milan.impersonation, milan.impersonation_groups) == ("", "")


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("impersonation_groups", "operator", "is not ROLE=GROUP"),
        ("impersonation_groups", "auditor=x", "unknown role 'auditor'"),
        ("impersonation_groups", "viewer=a,viewer=b", "role 'viewer' appears twice"),
        ("impersonation_groups", "admin=system:masters", "a system: group is never impersonated"),
        ("impersonation_groups", "viewer=two words", "a group name has no spaces"),
        ("impersonation_groups", "x" * 1025, "at most 1024 characters"),
        ("impersonation", "maybe", "Select a valid choice"),
    ],
)
def test_a_bad_value_is_a_field_error_and_nothing_changes(
    admin_client: Client, clusters: tuple[ManagedCluster, ManagedCluster], field: str, value: str, error: str
) -> None:
    data = {"impersonation": "", "impersonation_groups": "", field: value}
    answer = admin_client.post(_access_url("milan"), data)
    assert answer.status_code == 400
    assert error in answer.content.decode().replace("&#x27;", "'")
    milan = ManagedCluster.objects.get(name="milan")
    assert (milan.impersonation, milan.impersonation_groups) == ("", "")
    assert not AuditEvent.objects.filter(action=AuditAction.CLUSTER_UPDATED).exists()


def test_the_default_clusters_page_says_it_follows_the_installation(
    admin_client: Client, clusters: tuple[ManagedCluster, ManagedCluster]
) -> None:
    default, _ = clusters
    page = admin_client.get(_access_url(default.name))
    assert page.status_code == 200 and 'id="default-follows"' in page.content.decode()
    assert '<form method="post" action="' + _access_url(default.name) not in page.content.decode()
    refused = admin_client.post(_access_url(default.name), {"impersonation": "off"})
    assert refused.status_code == 409
    default.refresh_from_db()
    assert default.impersonation == "" and not AuditEvent.objects.exists()


def test_only_admins_see_or_change_a_clusters_access(
    olga: Any, clusters: tuple[ManagedCluster, ManagedCluster], admin_client: Client
) -> None:
    client = Client()
    client.force_login(olga)
    for method in ("get", "post"):
        for name in ("milan", "nowhere"):  # refused alike: an operator learns nothing of the names
            answer = getattr(client, method)(_access_url(name), {"impersonation": "off"})
            assert answer.status_code == 403 and "Admins only" in answer.content.decode()
    assert ManagedCluster.objects.get(name="milan").impersonation == ""
    assert admin_client.get(_access_url("nowhere")).status_code == 404


def test_the_setting_reads_each_contexts_access_and_refuses_what_it_cannot() -> None:
    text = "milan => impersonation=off; eks:arn:aws:x => groups=viewer=r , operator=o impersonation=on ;"
    # (a group map has no spaces: "viewer=r , operator=o" is the map "viewer=r," then a word that is no setting)
    with pytest.raises(RoleConfigError, match="neither impersonation"):
        cluster_access(text)
    assert cluster_access("milan => impersonation=off; eks:arn:aws:x => impersonation=on groups=viewer=r ;") == {
        "milan": {"impersonation": "off"},
        "eks:arn:aws:x": {"impersonation": "on", "impersonation_groups": "viewer=r"},
    }
    assert cluster_access("a => groups=viewer=r,operator=o") == {"a": {"impersonation_groups": "viewer=r,operator=o"}}
    assert cluster_access("") == {}
    for bad, message in (
        ("milan", "is not CONTEXT => SETTINGS"),
        ("milan => impersonation=maybe", "neither impersonation=on|off nor groups"),
        ("milan => colour=blue", "neither impersonation=on|off nor groups"),
        ("milan =>", "nothing set"),
        ("milan => impersonation=on; milan => impersonation=off", "appears twice"),
        ("milan => groups=admin=system:masters", "a system: group is never impersonated"),
        ("milan => groups=auditor=x", "unknown role 'auditor'"),
    ):
        with pytest.raises(RoleConfigError, match=re.escape(message)):
            cluster_access(bad)


def test_the_setting_writes_a_contexts_access_and_its_page_is_read_only(
    admin_client: Client, settings: Any, olga: Any
) -> None:
    settings.LIQO_DASH_CLUSTERS = ["rome", "milan"]
    settings.LIQO_DASH_CLUSTER_ACCESS = cluster_access("milan => impersonation=off groups=operator=milan:ops")
    rome, milan = ensure_configured()
    assert rome.is_default and (milan.impersonation, milan.impersonation_groups) == ("off", "operator=milan:ops")
    assert identity_for("olga", milan) is None and identity_for("olga", rome) is not None
    page = admin_client.get(_access_url(milan.name))
    assert 'id="from-setting"' in page.content.decode() and "(from LIQO_DASH_CLUSTER_ACCESS)" in page.content.decode()
    assert admin_client.post(_access_url(milan.name), {"impersonation": "on"}).status_code == 409
    settings.LIQO_DASH_CLUSTER_ACCESS = cluster_access("milan => groups=operator=milan:ops")  # on: inherited again
    (_, milan) = ensure_configured()
    assert (milan.impersonation, milan.impersonation_groups) == ("", "operator=milan:ops")
    assert identity_for("olga", milan) == Identity("liqo-dash:olga", ("milan:ops",))
    settings.LIQO_DASH_CLUSTER_ACCESS = {}  # left to the page: the row keeps its values, editable again
    assert admin_client.post(_access_url(milan.name), {"impersonation": "off"}).status_code == 302
    milan.refresh_from_db()
    assert milan.impersonation == "off"


def test_the_settings_refuse_an_access_for_the_default_or_an_unlisted_context() -> None:
    for clusters, access in (
        ("rome,milan", "rome => impersonation=off"),
        ("rome,milan", "naples => impersonation=off"),
    ):
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "liqo_dash.settings",
            "LIQO_DASH_CLUSTERS": clusters,
            "LIQO_DASH_CLUSTER_ACCESS": access,
        }
        done = subprocess.run(
            [sys.executable, "-c", "import django; django.setup()"], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode != 0 and "not a context of LIQO_DASH_CLUSTERS after the first" in done.stderr, (
            done.stderr
        )
