"""Managed clusters after registration (issue 28): an admin edits a registered cluster (URL, CA bundle,
new credentials that replace the stored ones) and removes it after a confirmation that names what goes
with it; the clusters of LIQO_DASH_CLUSTERS are read-only; every registration, edit, rotation and
removal is in the sealed audit trail with field names and never a secret; the pages work without the
encryption key; and the read-only RBAC of the dashboard's identity on a managed provider cluster
(deploy/managed-provider) grants exactly what the dashboard reads there."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from cryptography.fernet import Fernet
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from playwright.sync_api import expect

from access.models import Scope
from offloading.audit.trail import verify
from offloading.choices import AuditAction
from offloading.cluster import managed as managedclient
from offloading.cluster import remote
from offloading.models import AuditEvent, ClusterOffloading, ManagedCluster, Namespace, SnapshotState
from offloading.models.managed import Credentials, ensure_configured
from sandbox import Sandbox
from sandbox.rbac import ADMIN_TOKEN, ADMIN_USER
from tests.browser import login
from tests.fixtures.personas import ADMIN_PASSWORD
from tests.fixtures.waits import free_port
from tests.test_deploy import KUBECTL, KUBERNETES_VERSION, by_kind, checkov, needs_kubectl, render
from tests.test_layout import _axe, context  # noqa: F401 - context: the fixture of a CSP-free browser context (axe)
from tests.test_managed_clusters import _client_pair

pytestmark = pytest.mark.usefixtures("fresh_clients")  # tests/fixtures/managed.py

LIST = "offloading:managed_cluster_list"
REGISTER = "offloading:managed_cluster_register"
EDIT = "offloading:managed_cluster_edit"
REMOVE = "offloading:managed_cluster_remove"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.first-secret-token-value"
NEW_TOKEN = "eyJhbGciOiJSUzI1NiJ9.second-secret-token-value"
ROOT = Path(__file__).resolve().parent.parent
PROVIDER = ROOT / "deploy" / "managed-provider"


def nowhere() -> str:
    """An API server URL where nothing listens: the first look after a change fails at once."""
    return f"http://127.0.0.1:{free_port()}"


def registered(name: str = "prod-eu", url: str | None = None, token: str = TOKEN, **fields: Any) -> ManagedCluster:
    cluster = ManagedCluster(name=name, source="credentials", api_server_url=url or nowhere(), **fields)
    cluster.set_credentials(Credentials(token=token))
    cluster.save()
    return cluster


def events(action: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=action).order_by("seq"))


def sealed_text() -> str:
    """Every audit event as the seal covers it, as one text."""
    return "\n".join(json.dumps(event.payload()) for event in AuditEvent.objects.order_by("seq"))


def pem_body(pem: str) -> str:
    return "".join(line for line in pem.splitlines() if not line.startswith("-----"))


# --- editing ----------------------------------------------------------------------------------------


def test_a_new_url_or_ca_needs_the_credentials_again_and_audits_the_field_names(admin_client: Any, key: str) -> None:
    cluster = registered()
    stored = cluster.credentials_encrypted
    page = admin_client.get(reverse(EDIT, args=[cluster.name])).content.decode()
    assert cluster.api_server_url in page  # the URL is not a secret: the form starts with it
    assert "Stored now: a bearer token (stored encrypted)" in page
    assert TOKEN not in page and stored not in page

    certificate, _ = _client_pair()
    url = nowhere()
    # The stored token is never sent to a server it was not registered for: a new URL or CA needs it again.
    for change in ({"api_server_url": url, "ca_bundle": cluster.ca_bundle}, {"ca_bundle": certificate}):
        refused = admin_client.post(
            reverse(EDIT, args=[cluster.name]), {"api_server_url": cluster.api_server_url, **change}
        )
        assert refused.status_code == 400 and "needs the credentials again" in refused.content.decode()
        assert ManagedCluster.objects.get(pk=cluster.pk).credentials_encrypted == stored
    assert events(AuditAction.CLUSTER_UPDATED) == []

    response = admin_client.post(
        reverse(EDIT, args=[cluster.name]), {"api_server_url": url, "ca_bundle": certificate, "token": NEW_TOKEN}
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    row = ManagedCluster.objects.get(pk=cluster.pk)
    assert (row.api_server_url, row.ca_bundle) == (url, certificate) and row.credentials_encrypted != stored
    assert row.credentials() == Credentials(token=NEW_TOKEN)
    assert row.health == "unreachable"  # looked at once after the change

    (event,) = events(AuditAction.CLUSTER_UPDATED)
    assert (event.user_name, event.outcome, event.namespace) == ("admin", "updated", "")
    assert event.after["cluster"] == "prod-eu" and event.after["changed"] == ["api_server_url", "ca_bundle"]
    assert event.before["api_server_url"] == cluster.api_server_url and event.after["api_server_url"] == url
    assert event.before["ca_bundle"] == [] and event.after["ca_bundle"][0].startswith("sha256:")
    assert pem_body(certificate)[:40] not in sealed_text()  # the bundle by its fingerprint, not its PEM
    (rotated,) = events(AuditAction.CLUSTER_CREDENTIALS_ROTATED)
    assert rotated.after == {"cluster": "prod-eu", "credentials": ["token"]} and NEW_TOKEN not in sealed_text()
    assert verify().ok


def test_an_edit_that_changes_nothing_writes_nothing(admin_client: Any, key: str) -> None:
    cluster = registered()
    response = admin_client.post(reverse(EDIT, args=[cluster.name]), {"api_server_url": cluster.api_server_url})
    assert response.status_code == 302
    assert "Nothing changed" in admin_client.get(response["Location"]).content.decode()
    assert AuditEvent.objects.count() == 0


def test_rotating_credentials_takes_effect_and_no_secret_reaches_the_trail_or_a_page(
    admin_client: Any, sandbox: Any, key: str
) -> None:
    # Registered with a token the sandbox refuses, then rotated to the right one, then to a client
    # certificate: each replaces the stored credentials whole, and the cluster answers after the second.
    response = admin_client.post(reverse(REGISTER), {"name": "rome-eu", "api_server_url": sandbox.url, "token": TOKEN})
    assert response.status_code == 302
    assert ManagedCluster.objects.get(name="rome-eu").health == "unreachable"
    edit = reverse(EDIT, args=["rome-eu"])
    response = admin_client.post(edit, {"api_server_url": sandbox.url, "token": ADMIN_TOKEN})
    assert response.status_code == 302
    cluster = ManagedCluster.objects.get(name="rome-eu")
    assert cluster.credentials() == Credentials(token=ADMIN_TOKEN)
    assert (cluster.health, cluster.liqo_cluster_id) == ("reachable", "rome")
    assert "credentials rotated" in admin_client.get(response["Location"]).content.decode()

    certificate, private_key = _client_pair()
    # A certificate without its key: refused, and neither is sent back.
    refused = admin_client.post(edit, {"api_server_url": sandbox.url, "client_certificate": certificate})
    assert refused.status_code == 400
    assert list(refused.context["form"].errors) == ["client_key"]
    assert pem_body(certificate)[:40] not in refused.content.decode()
    response = admin_client.post(
        edit, {"api_server_url": sandbox.url, "client_certificate": certificate, "client_key": private_key}
    )
    assert response.status_code == 302
    assert ManagedCluster.objects.get(name="rome-eu").credentials() == Credentials("", certificate, private_key)

    registered_event, *rotations = events(AuditAction.CLUSTER_REGISTERED) + events(
        AuditAction.CLUSTER_CREDENTIALS_ROTATED
    )
    assert registered_event.after == {"cluster": "rome-eu", "api_server_url": sandbox.url, "ca_bundle": []} | {
        "credentials": ["token"]
    }
    assert [e.after for e in rotations] == [
        {"cluster": "rome-eu", "credentials": ["token"]},
        {"cluster": "rome-eu", "credentials": ["client_certificate", "client_key"]},
    ]
    assert all(e.user_name == "admin" and e.source == "web" for e in [registered_event, *rotations])
    assert events(AuditAction.CLUSTER_UPDATED) == []  # the URL did not change

    secrets = [TOKEN, "first-secret-token-value", ADMIN_TOKEN, pem_body(private_key)[:40], "PRIVATE KEY"]
    trail = sealed_text()
    pages = [
        admin_client.get(reverse(LIST)),
        admin_client.get(edit),
        admin_client.get(reverse(REMOVE, args=["rome-eu"])),
        admin_client.get(reverse("offloading:audit_list")),
        admin_client.get(reverse("offloading:audit_list"), {"action": AuditAction.CLUSTER_CREDENTIALS_ROTATED}),
    ]
    audit_page = pages[3].content.decode()
    assert "Managed cluster credentials rotated" in audit_page and "rome-eu" in audit_page
    for secret in secrets:
        assert secret not in trail
        for page in pages:
            assert page.status_code == 200
            assert secret not in page.content.decode()
    assert verify().ok, verify().problem


def test_credentials_no_key_decrypts_are_replaced_by_new_ones(admin_client: Any, settings: Any, key: str) -> None:
    cluster = registered()
    settings.LIQO_DASH_CREDENTIALS_KEY = [Fernet.generate_key().decode()]  # the old key is gone
    edit = reverse(EDIT, args=[cluster.name])
    assert "no key of LIQO_DASH_CREDENTIALS_KEY decrypts them: give new ones" in admin_client.get(edit).content.decode()
    ManagedCluster.objects.filter(pk=cluster.pk).update(credentials_encrypted="not a Fernet token \u00e9")
    page = admin_client.get(edit)
    assert page.status_code == 200 and "give new ones" in page.content.decode()
    response = admin_client.post(edit, {"api_server_url": cluster.api_server_url, "token": NEW_TOKEN})
    assert response.status_code == 302
    assert ManagedCluster.objects.get(pk=cluster.pk).credentials() == Credentials(token=NEW_TOKEN)
    assert [e.action for e in AuditEvent.objects.all()] == [AuditAction.CLUSTER_CREDENTIALS_ROTATED]


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"api_server_url": "not a url"}, "api_server_url", "valid URL"),
        ({"api_server_url": "https://[::1"}, "api_server_url", "valid URL"),
        ({"api_server_url": "ftp://prod.example"}, "api_server_url", "starts with https://"),
        ({"api_server_url": ""}, "api_server_url", "required"),
        ({"ca_bundle": "not a certificate"}, "ca_bundle", "PEM certificates"),
        (
            {"ca_bundle": "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----"},
            "ca_bundle",
            "PEM certificates",
        ),
        ({"ca_bundle": "bad\x00bundle"}, "ca_bundle", "Null characters"),
        ({"client_certificate": "CERT"}, "client_certificate", "not a PEM certificate"),
        ({"client_key": "KEY"}, "client_key", "not an unencrypted PEM private key"),
    ],
)
def test_bad_input_gets_its_field_error_and_changes_nothing(
    admin_client: Any, key: str, data: dict[str, str], field: str, message: str
) -> None:
    cluster = registered()
    body = {"api_server_url": "https://prod.example:6443", "token": NEW_TOKEN, **data}
    response = admin_client.post(reverse(EDIT, args=[cluster.name]), body)
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert list(errors) == [field], errors
    assert message in " ".join(errors[field])
    page = response.content.decode()
    assert f'id="error-{field}"' in page
    assert NEW_TOKEN not in page  # a new token is not echoed either
    row = ManagedCluster.objects.get(pk=cluster.pk)
    assert (row.api_server_url, row.credentials_encrypted) == (cluster.api_server_url, cluster.credentials_encrypted)
    assert AuditEvent.objects.count() == 0


def test_unknown_clusters_are_404_and_only_post_changes(admin_client: Any, key: str) -> None:
    for route in (EDIT, REMOVE):
        for name in ("missing", "Not A Name", "x" * 300):
            url = reverse(route, args=[name])
            assert admin_client.get(url).status_code == 404
            assert admin_client.post(url, {"confirm": name, "api_server_url": nowhere()}).status_code == 404
    cluster = registered()
    for route in (EDIT, REMOVE):
        url = reverse(route, args=[cluster.name])
        assert admin_client.put(url).status_code == 405
        assert admin_client.delete(url).status_code == 405
    assert ManagedCluster.objects.filter(pk=cluster.pk).exists()


def test_changes_need_the_csrf_token(admin_user: Any, key: str) -> None:
    cluster = registered()
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(admin_user)
    url = reverse(REMOVE, args=[cluster.name])
    assert browser.post(url, {"confirm": cluster.name}).status_code == 403
    assert ManagedCluster.objects.filter(pk=cluster.pk).exists()
    page = browser.get(url).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert token is not None
    assert browser.post(url, {"confirm": cluster.name, "csrfmiddlewaretoken": token[1]}).status_code == 302
    assert not ManagedCluster.objects.filter(pk=cluster.pk).exists()


# --- who may, and what may not change --------------------------------------------------------------


def test_clusters_of_the_setting_are_read_only_and_say_why(admin_client: Any, key: str) -> None:
    (default,) = ensure_configured([])
    cluster = registered()
    listing = admin_client.get(reverse(LIST)).content.decode()
    default_row = listing[listing.index(f'id="cluster-{default.name}"') :].split("</tr>")[0]
    assert "read-only: from <code>LIQO_DASH_CLUSTERS</code>" in default_row
    assert reverse(EDIT, args=[default.name]) not in listing
    row = listing[listing.index(f'id="cluster-{cluster.name}"') :].split("</tr>")[0]
    assert reverse(EDIT, args=[cluster.name]) in row and reverse(REMOVE, args=[cluster.name]) in row

    for route in (EDIT, REMOVE):
        url = reverse(route, args=[default.name])
        page = admin_client.get(url)
        assert page.status_code == 200
        assert "comes from the LIQO_DASH_CLUSTERS setting" in page.content.decode()
        assert "<form" not in page.content.decode().split('id="read-only"')[1]
        refused = admin_client.post(url, {"confirm": default.name, "api_server_url": "https://evil.example"})
        assert refused.status_code == 409
        assert "would not last" in refused.content.decode()
    assert ManagedCluster.objects.get(pk=default.pk).api_server_url == ""
    assert AuditEvent.objects.count() == 0


def test_a_context_the_setting_no_longer_lists_can_be_removed_not_edited(
    admin_client: Any, settings: Any, key: str
) -> None:
    settings.LIQO_DASH_CLUSTERS = ["kind-rome", "kind-old"]
    default, old = ensure_configured()
    settings.LIQO_DASH_CLUSTERS = ["kind-rome"]  # kind-old's row outlives its line in the setting
    listing = admin_client.get(reverse(LIST)).content.decode()
    row = listing[listing.index(f'id="cluster-{old.name}"') :].split("</tr>")[0]
    assert reverse(REMOVE, args=[old.name]) in row and reverse(EDIT, args=[old.name]) not in row
    assert "no longer in <code>LIQO_DASH_CLUSTERS</code>" in row
    edit = admin_client.get(reverse(EDIT, args=[old.name]))
    assert edit.status_code == 200 and "nothing to edit here" in edit.content.decode()
    assert admin_client.post(reverse(EDIT, args=[old.name]), {"api_server_url": nowhere()}).status_code == 409
    # The listed one stays read-only.
    assert admin_client.post(reverse(REMOVE, args=[default.name]), {"confirm": default.name}).status_code == 409

    page = admin_client.get(reverse(REMOVE, args=[old.name])).content.decode()
    assert (
        "context kind-old, which <code>LIQO_DASH_CLUSTERS</code> no longer lists" in page
        and 'id="credentials"' not in page
    )
    response = admin_client.post(reverse(REMOVE, args=[old.name]), {"confirm": old.name})
    assert response.status_code == 302
    assert list(ManagedCluster.objects.values_list("name", flat=True)) == [default.name]
    (event,) = events(AuditAction.CLUSTER_REMOVED)
    assert (
        event.before["context"] == "kind-old"
        and event.message == f"Removed managed cluster {old.name} (context kind-old)"
    )
    assert verify().ok


def test_non_admins_can_neither_edit_nor_remove(client: Any, django_user_model: Any, key: str) -> None:
    cluster = registered()
    for route in (EDIT, REMOVE):
        anonymous = client.get(reverse(route, args=[cluster.name]))
        assert anonymous.status_code == 302 and "login" in anonymous["Location"]
    for name, role in (("vera", "viewer"), ("oscar", "operator")):
        user = django_user_model.objects.create_user(name, password=ADMIN_PASSWORD)
        user.groups.add(Group.objects.get(name=role))
        client.force_login(user)
        for route in (EDIT, REMOVE):
            url = reverse(route, args=[cluster.name])
            assert client.get(url).status_code == 403
            refused = client.post(url, {"confirm": cluster.name, "api_server_url": nowhere(), "token": "t"})
            assert refused.status_code == 403 and "Admins only" in refused.content.decode()
            # A cluster that does not exist gets the same answer: no name can be probed.
            assert client.get(reverse(route, args=["no-such-cluster"])).status_code == 403
        listing = client.get(reverse(LIST)).content.decode()
        assert reverse(EDIT, args=[cluster.name]) not in listing
    row = ManagedCluster.objects.get(pk=cluster.pk)
    assert (row.api_server_url, row.credentials_encrypted) == (cluster.api_server_url, cluster.credentials_encrypted)
    assert AuditEvent.objects.count() == 0


# --- removing ---------------------------------------------------------------------------------------


def test_removal_names_what_goes_with_it_and_needs_the_typed_name(
    admin_client: Any, django_user_model: Any, key: str
) -> None:
    cluster = registered(liqo_cluster_id="milan-1a2b", liqo_version="v1.2.0")
    namespace = Namespace.objects.create(name="reports", offloaded=True)
    ClusterOffloading.objects.create(namespace=namespace, cluster_id="milan-1a2b", selected=True, state="Ready")
    alice = django_user_model.objects.create_user("alice", password=ADMIN_PASSWORD)
    Scope.objects.create(user=alice, kind="glob", value="prod-eu/team-a-*")
    Scope.objects.create(user=alice, kind="glob", value="other/team-a-*")
    url = reverse(REMOVE, args=[cluster.name])

    page = admin_client.get(url).content.decode()
    goes = page[page.index('id="goes-with-it"') :]
    assert "its stored credentials" in goes and "Revoke them on the cluster" in goes
    assert "<code>milan-1a2b</code>" in page and "<code>reports</code>" in goes
    assert "user alice: prod-eu/team-a-*" in page and "other/team-a-*" not in page
    assert 'data-confirm-name="prod-eu"' in page and 'id="blockers"' not in page
    assert TOKEN not in page

    wrong = admin_client.post(url, {"confirm": "prod-e"})
    assert wrong.status_code == 400 and 'id="error-confirm"' in wrong.content.decode()
    assert ManagedCluster.objects.filter(pk=cluster.pk).exists() and AuditEvent.objects.count() == 0

    response = admin_client.post(url, {"confirm": "prod-eu"})
    assert response.status_code == 302
    assert not ManagedCluster.objects.filter(name="prod-eu").exists()
    assert Scope.objects.filter(value="prod-eu/team-a-*").exists()  # kept, and the page said so
    assert ClusterOffloading.objects.filter(cluster_id="milan-1a2b").exists()  # the offloading is untouched
    (event,) = events(AuditAction.CLUSTER_REMOVED)
    assert event.before == {
        "cluster": "prod-eu",
        "api_server_url": cluster.api_server_url,
        "ca_bundle": [],
        "liqo_cluster_id": "milan-1a2b",
    }
    assert (event.user_name, event.outcome, event.after) == ("admin", "removed", None)
    assert TOKEN not in sealed_text() and cluster.credentials_encrypted not in sealed_text()
    assert "Removed prod-eu" in admin_client.get(response["Location"]).content.decode()
    assert verify().ok
    assert admin_client.get(url).status_code == 404  # gone: its pages too


# --- without the key --------------------------------------------------------------------------------


def test_without_the_key_the_pages_say_so_and_do_not_fail(admin_client: Any, settings: Any, key: str) -> None:
    cluster = registered()
    stored = cluster.credentials_encrypted
    settings.LIQO_DASH_CREDENTIALS_KEY = []

    listing = admin_client.get(reverse(LIST))
    assert listing.status_code == 200
    assert 'id="no-key"' in listing.content.decode() and "cannot be read" in listing.content.decode()
    edit = reverse(EDIT, args=[cluster.name])
    page = admin_client.get(edit)
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="no-key"' in text and "cannot be read without LIQO_DASH_CREDENTIALS_KEY" in text
    assert '<fieldset id="rotate" disabled>' in text

    refused = admin_client.post(edit, {"api_server_url": cluster.api_server_url, "token": NEW_TOKEN})
    assert refused.status_code == 400
    assert "New credentials need an encryption key" in refused.content.decode()
    assert NEW_TOKEN not in refused.content.decode()
    assert ManagedCluster.objects.get(pk=cluster.pk).credentials_encrypted == stored

    # Nor can the URL change: the stored credentials would go to the new server (they need giving again,
    # which needs the key). The cluster can still be removed.
    url = nowhere()
    moved = admin_client.post(edit, {"api_server_url": url})
    assert moved.status_code == 400 and "needs the credentials again" in moved.content.decode()
    row = ManagedCluster.objects.get(pk=cluster.pk)
    assert (row.api_server_url, row.credentials_encrypted) == (cluster.api_server_url, stored)
    assert admin_client.get(reverse(REMOVE, args=[cluster.name])).status_code == 200
    assert admin_client.post(reverse(REMOVE, args=[cluster.name]), {"confirm": cluster.name}).status_code == 302
    assert [e.action for e in AuditEvent.objects.order_by("seq")] == ["cluster_removed"]  # the refused edits left none
    assert verify().ok


# --- the dashboard's identity on a managed provider ------------------------------------------------

# What the dashboard calls on a managed cluster other than through kube.py: the twins' reads (remote.py)
# and the discovery (managed.py), each method with the permission it needs (namespaced: where).
PROVIDER_CALLS = {
    "read_namespace": ("", "namespaces", "get", "*"),
    "list_namespaced_pod": ("", "pods", "list", "*"),
    "list_namespaced_config_map": ("", "configmaps", "list", "*"),
    "list_namespaced_service": ("", "services", "list", "*"),
    "list_namespaced_secret": ("", "secrets", "list", "*"),
    "list_namespaced_deployment": ("apps", "deployments", "list", "liqo"),
    "list_cluster_custom_object": ("core.liqo.io", "foreignclusters", "list", "*"),
}
NOT_GRANTED = {("", "secrets", "list", "*")}  # the twins' Secrets list: refused on purpose


def provider_calls() -> set[tuple[str, str, str, str]]:
    """The permissions the provider-side code needs, from the client methods remote.py, twins.py and managed.py
    name (get_code is /version, which every authenticated identity may read)."""
    found = set()
    for module in ("offloading/cluster/remote.py", "offloading/cluster/twins.py", "offloading/cluster/managed.py"):
        # The calls of a Kubernetes client API: core.<method> (remote.py's CoreV1Api) or
        # client.<Kind>Api(api).<method>.
        for method in re.findall(
            r"(?:(?<![.\w\"'])core|\bclient\.\w+Api\([^()]*\))\.(\w+)", (ROOT / module).read_text()
        ):
            if method == "get_code":
                continue
            assert method in PROVIDER_CALLS, f"{module} calls {method}: teach this test its permission"
            found.add(PROVIDER_CALLS[method])
    assert len(found) >= 6, found  # the regular expression did find the calls
    return found


@needs_kubectl
def test_the_provider_role_grants_exactly_what_the_dashboard_reads_there() -> None:

    docs = render(str(PROVIDER))
    for doc in docs:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    granted = set()
    for kind, where in (("ClusterRole", "*"), ("Role", "liqo")):
        (role,) = by_kind(docs, kind).values()
        assert role["metadata"].get("namespace", "*") == where
        for rule in role["rules"]:
            assert "resourceNames" not in rule
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        granted.add((group, resource, verb, where))
    for group, resource, verb, _ in granted:
        assert "*" not in (group, resource, verb), "no wildcards"
        assert verb in ("get", "list"), f"read-only: {verb} {resource}"
        assert resource not in ("secrets", "users", "groups", "serviceaccounts")
    needed = provider_calls()
    assert needed >= NOT_GRANTED  # the exclusion is of something the code does ask for
    assert granted == needed - NOT_GRANTED
    subject = [{"kind": "ServiceAccount", "name": "liqo-dash-reader", "namespace": "liqo-dash"}]
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        (binding,) = by_kind(docs, kind).values()
        assert binding["subjects"] == subject and binding["roleRef"]["name"] == "liqo-dash-reader"
    (account,) = by_kind(docs, "ServiceAccount").values()
    assert account["automountServiceAccountToken"] is False


READER_TOKEN = "liqo-dash-reader-token"


def provider_policy(docs: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    """The sandbox's RBAC policy for the rendered roles: the admin, and the reader bound to them alone."""
    rules = []
    for kind, namespaces in (("ClusterRole", None), ("Role", ["liqo"])):
        (role,) = by_kind(docs, kind).values()
        for rule in role["rules"]:
            where = {"namespaces": namespaces} if namespaces else {}
            rules.append({"subjects": [{"kind": "User", "name": "liqo-dash-reader"}], **rule, **where})
    users = [
        {"name": ADMIN_USER, "token": ADMIN_TOKEN, "groups": ["system:masters"]},
        {"name": "liqo-dash-reader", "token": READER_TOKEN, "groups": []},
    ]
    return {"anonymous": None, "users": users, "rules": rules}


@needs_kubectl
def test_the_provider_role_is_enough_for_discovery_and_the_twins_and_no_more(key: str, db: Any, tmp_path: Path) -> None:
    with Sandbox(scenario="minimal", controller_delay=0.0, port=0, rbac=provider_policy(render(str(PROVIDER)))) as sb:
        admin = k8s_config.new_client_from_config(config_file=str(sb.write_kubeconfig(tmp_path / "admin")))
        core = k8s_client.CoreV1Api(admin)
        core.create_namespace({"metadata": {"name": "reports-rome", "labels": {"liqo.io/remote-cluster-id": "rome"}}})
        core.create_namespaced_config_map("reports-rome", {"metadata": {"name": "settings"}, "data": {"a": "b"}})
        core.create_namespaced_secret("reports-rome", {"metadata": {"name": "db-password"}, "stringData": {"p": "q"}})

        cluster = registered("provider", url=sb.url, token=READER_TOKEN)
        found = managedclient.refresh(cluster)
        assert (found.health, found.liqo_cluster_id, found.liqo_version, found.last_error) == (
            "reachable",
            "rome",
            "v1.2.0",
            "",
        )
        reading = remote.read_remote(cluster, "reports-rome")
        assert (reading.state, reading.owner, reading.pods, reading.error) == ("Active", "rome", (), "")
        objects = {o.kind: o for o in reading.objects}
        assert (objects["configmaps"].names, objects["configmaps"].error) == (("settings",), "")
        assert objects["services"].error == ""
        assert objects["secrets"].names == () and "forbidden" in objects["secrets"].error  # refused on purpose
        assert remote.read_remote(cluster, "absent").state == "missing"

        # Nothing else: no write, no Secret, no impersonation.
        reader = k8s_client.CoreV1Api(managedclient.api_client_for(cluster))
        apps = k8s_client.AppsV1Api(managedclient.api_client_for(cluster))
        for attempt in (
            lambda: reader.create_namespace({"metadata": {"name": "mine"}}),
            lambda: reader.patch_namespace("reports-rome", {"metadata": {"labels": {"x": "y"}}}),
            lambda: reader.read_namespaced_secret("db-password", "reports-rome"),
            lambda: apps.list_namespaced_deployment("reports-rome"),  # Deployments in Liqo's namespace only
            lambda: reader.list_namespaced_pod("reports-rome", _headers={"Impersonate-User": ADMIN_USER}),
        ):
            with pytest.raises(k8s_client.ApiException) as refused:
                attempt()
            assert refused.value.status == 403
        admin.close()


@needs_kubectl
def test_checkov_finds_nothing_in_the_provider_manifest(tmp_path: Path) -> None:
    assert KUBECTL is not None
    manifest = tmp_path / "managed-provider.yaml"
    manifest.write_text(
        subprocess.run([KUBECTL, "kustomize", str(PROVIDER)], capture_output=True, text=True, check=True).stdout
    )
    report = checkov(manifest)
    failed = [f"{c['check_id']} {c['resource']}: {c['check_name']}" for c in report["results"]["failed_checks"]]
    assert failed == [], "\n".join(failed)
    assert report["results"]["skipped_checks"] == []
    assert report["summary"]["passed"] >= 20  # it did scan the roles, bindings and the account


# --- in the browser ---------------------------------------------------------------------------------

DOCS_SCREENSHOTS = ROOT / "docs" / "screenshots"


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_pages_in_the_browser(context: Any, live_server: Any, admin_user: Any, key: str) -> None:  # noqa: F811
    """The list, the edit page (a bad URL gets its error in place) and the removal (its button waits for
    the typed name, its access page) in Chromium, with axe; screenshots in docs/screenshots/managed-*.png."""

    now = timezone.now()  # the watcher's mark of a good sync: no stale banner over the pages
    SnapshotState.get()
    SnapshotState.touch(None, last_success_at=now, last_attempt_at=now, last_error="")
    ensure_configured([])
    ManagedCluster.objects.filter(is_default=True).update(
        liqo_cluster_id="rome", liqo_version="v1.2.0", health="reachable", last_checked_at=timezone.now()
    )
    prod = registered(
        "prod-eu",
        url="https://prod-eu.example:6443",
        liqo_cluster_id="prod-eu-7f3a",
        liqo_version="v1.2.0",
        health="reachable",
        last_checked_at=timezone.now(),
    )
    registered(
        "edge-lab",
        url="https://10.20.0.7:6443",
        health="unreachable",
        last_checked_at=timezone.now(),
        last_error="cannot reach the Kubernetes API: connection refused",
    )
    for name in ("reports", "etl"):
        namespace = Namespace.objects.create(name=name, offloaded=True)
        ClusterOffloading.objects.create(namespace=namespace, cluster_id=prod.liqo_cluster_id, selected=True)
    Scope.objects.create(user=admin_user, kind="glob", value="prod-eu/team-a-*")
    DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    page = context.new_page()
    page.set_viewport_size({"width": 1440, "height": 900})
    login(page, live_server)
    page.goto(f"{live_server.url}{reverse(LIST)}")
    expect(page.locator("#cluster-default .read-only")).to_contain_text("read-only")
    expect(page.locator("#cluster-prod-eu")).to_contain_text("Edit")
    assert _axe(page) == []
    page.screenshot(path=str(DOCS_SCREENSHOTS / "managed-list.png"), full_page=True)

    page.locator("#cluster-prod-eu a", has_text="Edit").click()
    page.wait_for_url(f"{live_server.url}{reverse(EDIT, args=['prod-eu'])}")
    expect(page.locator("#id_api_server_url")).to_have_value("https://prod-eu.example:6443")
    expect(page.locator("#id_token")).to_have_value("")
    expect(page.locator("#stored-credentials")).to_contain_text("a bearer token")
    assert _axe(page) == []
    page.screenshot(path=str(DOCS_SCREENSHOTS / "managed-edit.png"), full_page=True)
    page.fill("#id_api_server_url", "https://[::1")
    page.fill("#id_token", NEW_TOKEN)
    page.click("main form button[type=submit]")
    expect(page.locator("#error-api_server_url")).to_contain_text("valid URL")
    expect(page.locator("#id_token")).to_have_value("")  # not sent back
    assert NEW_TOKEN not in page.content()
    page.screenshot(path=str(DOCS_SCREENSHOTS / "managed-edit-error.png"), full_page=True)

    # Its access: impersonation off there, and its own group for operators.
    page.goto(f"{live_server.url}{reverse(LIST)}")
    page.locator("#cluster-prod-eu a", has_text="Access").click()
    page.wait_for_url(f"{live_server.url}{reverse('offloading:managed_cluster_access', args=['prod-eu'])}")
    expect(page.locator("#in-force-impersonation")).to_contain_text("on")
    page.select_option("#id_impersonation", "off")
    page.fill("#id_impersonation_groups", "operator=prod-eu:offloaders")
    page.click("main form button[type=submit]")
    expect(page.locator("main")).to_contain_text("Saved the access of prod-eu")
    expect(page.locator("#in-force-impersonation")).to_contain_text("off")
    expect(page.locator("#in-force-groups")).to_contain_text("prod-eu:offloaders")
    assert _axe(page) == []
    page.screenshot(path=str(DOCS_SCREENSHOTS / "managed-access.png"), full_page=True)

    page.goto(f"{live_server.url}{reverse(REMOVE, args=['prod-eu'])}")
    button = page.locator("#remove button[type=submit]")
    expect(button).to_be_disabled()
    expect(page.locator("#goes-with-it")).to_contain_text("reports")
    expect(page.locator("#scopes")).to_contain_text("prod-eu/team-a-*")
    page.fill("#id_confirm", "prod-eu")
    expect(button).to_be_enabled()
    assert _axe(page) == []
    page.screenshot(path=str(DOCS_SCREENSHOTS / "managed-remove.png"), full_page=True)
    button.click()
    page.wait_for_url(f"{live_server.url}{reverse(LIST)}")
    expect(page.locator("main")).to_contain_text("Removed prod-eu")
    expect(page.locator("#cluster-prod-eu")).to_have_count(0)
    assert [e.action for e in AuditEvent.objects.order_by("seq")] == ["cluster_updated", "cluster_removed"]
    assert verify().ok


def test_the_removal_page_counts_the_clusters_snapshot_rows(admin_client: Any, key: str) -> None:
    """The snapshot tables' keys have no reverse accessor: the page still counts what goes with them."""
    cluster = registered()
    Namespace.objects.create(name="shop", managed=cluster)
    Namespace.objects.create(name="etl", managed=cluster)
    page = admin_client.get(reverse(REMOVE, args=[cluster.name])).content.decode()
    assert "2 namespaces: deleted with it" in page
