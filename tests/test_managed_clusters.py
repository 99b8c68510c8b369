"""Managed clusters (issue 28, first part): the default cluster a migration creates, clusters from
kubeconfig contexts (LIQO_DASH_CLUSTERS) and registered by an admin with credentials kept encrypted,
the discovery of each one's Liqo cluster id, version and health against the sandbox's API server (the
real kubernetes client over HTTP), and who may register one."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.fernet import Fernet
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from django.contrib.auth.models import Group
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse
from kubernetes import client as k8s_client

from offloading import tasks
from offloading.cluster import kube
from offloading.cluster import managed as managedclient
from offloading.models import ManagedCluster, Namespace
from offloading.models.managed import (
    Credentials,
    CredentialsKeyMissing,
    CredentialsUnreadable,
    ensure_configured,
    name_for_context,
    rotate_credentials,
)
from sandbox.rbac import ADMIN_TOKEN
from tests.fixtures.waits import free_port

pytestmark = pytest.mark.usefixtures("fresh_clients")  # tests/fixtures/managed.py

REGISTER = "offloading:managed_cluster_register"
LIST = "offloading:managed_cluster_list"


@pytest.fixture
def default_cluster(db: Any) -> ManagedCluster:
    """The default cluster: migration 0021 made it, ensure_configured makes it again after a flush."""
    (default,) = ensure_configured([])
    return default


def _user(django_user_model: Any, name: str, role: str | None) -> Any:
    user = django_user_model.objects.create_user(name, password=f"{name}-password-123")
    if role is not None:
        user.groups.add(Group.objects.get(name=role))
    return user


def _client_pair() -> tuple[str, str]:
    """A client key and its self-signed certificate, in PEM (an EC key: fast to make)."""
    private = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "liqo-dash-test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(private, hashes.SHA256())
    )
    key_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return cert.public_bytes(serialization.Encoding.PEM).decode(), key_pem


def _raw_row(pk: int) -> str:
    """Every column of the row as the database holds it, read with a plain SQL cursor."""
    table = connection.ops.quote_name(ManagedCluster._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {table} WHERE id = %s", [pk])  # noqa: S608 - the table name is ours
        row = cursor.fetchone()
    assert row is not None
    return "\n".join(str(value) for value in row)


def test_the_default_cluster_exists_after_migrate(transactional_db: Any) -> None:
    # Migrate the app back to before the managed clusters, then forward again: 0021 creates the table and
    # the default row (a test database may have been flushed by an earlier transactional test).
    executor = MigrationExecutor(connection)
    leaves = executor.loader.graph.leaf_nodes("offloading")
    executor.migrate([("offloading", "0020_audit_outcome_length")])
    assert "offloading_managedcluster" not in connection.introspection.table_names()
    executor = MigrationExecutor(connection)
    executor.migrate(leaves)
    default = ManagedCluster.objects.get(is_default=True)
    assert (default.name, default.source, default.context, default.health) == ("default", "context", "", "unknown")
    assert default.where == "current context"
    # With no LIQO_DASH_CLUSTERS, the configured clusters are that row alone: nothing else is created.
    assert ensure_configured([]) == [default]
    assert ManagedCluster.objects.count() == 1


def test_the_default_cluster_comes_back_when_its_row_is_missing(db: Any) -> None:
    ManagedCluster.objects.all().delete()
    (default,) = ensure_configured([])
    assert (default.name, default.is_default, default.context) == ("default", True, "")


def test_the_default_cluster_does_not_move_away_from_its_rows(db: Any) -> None:
    """A setting that names another context first later (``a,b`` becomes ``b,a``) would leave the
    snapshot under a cluster no page addresses: the default holding rows stays, the other is made."""
    (first, _) = ensure_configured(["rome", "milan"])
    assert first.is_default and first.context == "rome"
    again = ensure_configured(["milan", "rome"])  # nothing hangs on rome yet: the default follows the setting
    assert again[0].context == "milan" and again[0].is_default
    Namespace.objects.create(name="shop")  # a snapshot row of the default cluster (milan now)
    kept = ensure_configured(["rome", "milan"])
    default = ManagedCluster.objects.get(is_default=True)
    assert default.context == "milan" and kept[0] == default
    assert Namespace.objects.get(name="shop").managed_id == default.pk
    assert {row.context for row in kept} == {"rome", "milan"}


def test_the_relations_include_the_snapshot_tables_hidden_keys() -> None:
    tables = {relation.related_model._meta.db_table for relation in ManagedCluster.relations()}
    assert {"offloading_namespace", "offloading_snapshotstate", "offloading_pod"} <= tables


def test_the_default_cluster_talks_through_the_process_client(sandbox: Any, default_cluster: ManagedCluster) -> None:
    default = default_cluster
    assert managedclient.api_client_for(default) is kube.api_client()
    # The process's client is configured as before the helpers were shared with the managed clusters'.
    cfg = kube.api_client().configuration
    assert (cfg.host, cfg.retries, cfg.api_key["BearerToken"]) == (sandbox.url, 1, f"Bearer {ADMIN_TOKEN}")
    assert cfg.connection_pool_maxsize >= 32
    found = managedclient.refresh(default)
    assert (found.health, found.liqo_cluster_id, found.liqo_version, found.last_error) == (
        "reachable",
        "rome",
        "v1.2.0",
        "",
    )
    assert found.last_checked_at is not None


def test_registering_with_a_token_discovers_the_cluster_id_and_version(
    admin_client: Any, sandbox: Any, key: str
) -> None:
    response = admin_client.post(
        reverse(REGISTER), {"name": "rome-eu", "api_server_url": sandbox.url, "token": ADMIN_TOKEN}
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    cluster = ManagedCluster.objects.get(name="rome-eu")
    assert (cluster.source, cluster.api_server_url, cluster.is_default) == ("credentials", sandbox.url, False)
    assert (cluster.health, cluster.liqo_cluster_id, cluster.liqo_version, cluster.last_error) == (
        "reachable",
        "rome",
        "v1.2.0",
        "",
    )
    page = admin_client.get(response["Location"]).content.decode()
    row = page[page.index('id="cluster-rome-eu"') :].split("</tr>")[0]
    for shown in ("rome-eu", sandbox.url, "<code>rome</code>", "v1.2.0", "reachable"):
        assert shown in row
    assert ADMIN_TOKEN not in page
    assert "Registered rome-eu: it answers." in page
    assert reverse(REGISTER) in page  # admins get the link to register another


def test_liqo_cluster_id_configmap_wins_over_what_the_peers_say(sandbox: Any, k8s: Any, key: str, db: Any) -> None:
    # As a Helm install of Liqo does: a ConfigMap in Liqo's namespace, found by its label.
    k8s.core.create_namespaced_config_map(
        "liqo",
        k8s_client.V1ConfigMap(
            metadata=k8s_client.V1ObjectMeta(
                name="liqo-clusterid-configmap", labels={"app.kubernetes.io/name": "clusterid-configmap"}
            ),
            data={"CLUSTER_ID": "rome-7f3a"},
        ),
    )
    cluster = ManagedCluster(name="rome", source="credentials", api_server_url=sandbox.url)
    cluster.set_credentials(Credentials(token=ADMIN_TOKEN))
    cluster.save()
    assert managedclient.refresh(cluster).liqo_cluster_id == "rome-7f3a"


def test_a_wrong_token_marks_the_cluster_unreachable_with_the_error(admin_client: Any, sandbox: Any, key: str) -> None:
    response = admin_client.post(
        reverse(REGISTER), {"name": "rome-bad", "api_server_url": sandbox.url, "token": "wrong-token"}
    )
    assert response.status_code == 302
    cluster = ManagedCluster.objects.get(name="rome-bad")
    assert cluster.health == "unreachable"
    assert "refused the credentials" in cluster.last_error and "401" in cluster.last_error
    assert (cluster.liqo_cluster_id, cluster.liqo_version) == ("", "")
    page = admin_client.get(response["Location"]).content.decode()
    row = page[page.index('id="cluster-rome-bad"') :].split("</tr>")[0]
    assert "unreachable" in row and "refused the credentials" in row
    assert "does not answer" in page  # the banner after registering


def test_a_server_that_does_not_answer_is_unreachable_and_keeps_what_was_known(key: str, db: Any) -> None:
    cluster = ManagedCluster(
        name="gone",
        source="credentials",
        api_server_url=f"http://127.0.0.1:{free_port()}",
        liqo_cluster_id="gone-1",
        liqo_version="v1.0.0",
    )
    cluster.set_credentials(Credentials(token="t"))
    cluster.save()
    found = managedclient.refresh(cluster, timeout=2.0)
    assert found.health == "unreachable"
    assert "cannot reach the Kubernetes API" in found.last_error
    assert (found.liqo_cluster_id, found.liqo_version) == ("gone-1", "v1.0.0")


def test_the_refresh_closes_the_client_of_a_removed_cluster(key: str, db: Any) -> None:
    clusters = []
    for name in ("kept", "removed"):
        cluster = ManagedCluster(name=name, source="credentials", api_server_url=f"http://127.0.0.1:{free_port()}")
        cluster.set_credentials(Credentials(token="t"))
        cluster.save()
        clusters.append(cluster)
    kept, removed = clusters
    kept_api, removed_api = managedclient.api_client_for(kept), managedclient.api_client_for(removed)
    assert managedclient.api_client_for(removed) is removed_api  # one client per process and cluster
    assert set(managedclient._clients) == {kept.pk, removed.pk}
    removed.delete()
    managedclient.refresh_all(timeout=0.5)
    assert set(managedclient._clients) == {kept.pk}
    assert managedclient.api_client_for(kept) is kept_api


def test_the_database_alone_does_not_reveal_the_credentials(key: str, settings: Any, db: Any) -> None:
    certificate, private_key = _client_pair()
    token = "eyJhbGciOiJSUzI1NiJ9.secret-service-account-token"
    cluster = ManagedCluster(name="secret", source="credentials", api_server_url="https://secret.example:6443")
    cluster.set_credentials(Credentials(token=token, client_certificate=certificate, client_key=private_key))
    cluster.save()

    raw = _raw_row(cluster.pk)
    assert "https://secret.example:6443" in raw  # the read is the row: the URL is kept in the clear
    key_body = "".join(line for line in private_key.splitlines() if not line.startswith("-----"))
    cert_body = "".join(line for line in certificate.splitlines() if not line.startswith("-----"))
    for secret in (token, "secret-service-account-token", key_body, key_body[:40], cert_body[:40], "PRIVATE KEY"):
        assert secret not in raw
    assert cluster.credentials_encrypted and cluster.credentials_encrypted in raw
    assert token not in repr(cluster.credentials())

    # The configured key reads them back; another key alone does not.
    assert ManagedCluster.objects.get(pk=cluster.pk).credentials() == Credentials(token, certificate, private_key)
    other = Fernet.generate_key().decode()
    settings.LIQO_DASH_CREDENTIALS_KEY = [other]
    with pytest.raises(CredentialsUnreadable):
        ManagedCluster.objects.get(pk=cluster.pk).credentials()

    # Rotation: the new key first, the old one still accepted; after rotate_credentials the old key can go.
    settings.LIQO_DASH_CREDENTIALS_KEY = [other, key]
    assert rotate_credentials() == 1
    settings.LIQO_DASH_CREDENTIALS_KEY = [other]
    assert ManagedCluster.objects.get(pk=cluster.pk).credentials().token == token
    assert token not in _raw_row(cluster.pk)


def test_without_a_key_registering_is_refused_and_nothing_is_stored(admin_client: Any, settings: Any) -> None:
    settings.LIQO_DASH_CREDENTIALS_KEY = []
    page = admin_client.get(reverse(REGISTER)).content.decode()
    assert 'id="no-key"' in page and "LIQO_DASH_CREDENTIALS_KEY" in page
    response = admin_client.post(
        reverse(REGISTER), {"name": "plain", "api_server_url": "https://plain.example:6443", "token": "plain-token"}
    )
    assert response.status_code == 400
    assert "needs an encryption key" in response.content.decode()
    assert not ManagedCluster.objects.filter(name="plain").exists()
    cluster = ManagedCluster(name="plain", source="credentials", api_server_url="https://plain.example:6443")
    with pytest.raises(CredentialsKeyMissing):
        cluster.set_credentials(Credentials(token="plain-token"))
    assert cluster.credentials_encrypted == ""


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"name": "Prod_EU"}, "name", "lower-case letters"),
        ({"name": "default"}, "name", "already named default"),
        ({"api_server_url": "ftp://prod.example"}, "api_server_url", "starts with https://"),
        ({"api_server_url": "not a url"}, "api_server_url", "valid URL"),
        ({"ca_bundle": "not a certificate"}, "ca_bundle", "PEM certificates"),
        ({"token": ""}, "token", "bearer token, or a client certificate"),
        ({"token": "", "client_certificate": "CERT"}, "client_certificate", "not a PEM certificate"),
        ({"token": "", "client_key": "KEY"}, "client_key", "not an unencrypted PEM private key"),
    ],
)
def test_a_wrong_field_gets_its_error(
    admin_client: Any, key: str, default_cluster: ManagedCluster, data: dict[str, str], field: str, message: str
) -> None:
    body = {"name": "prod-eu", "api_server_url": "https://prod.example:6443", "token": "t", **data}
    response = admin_client.post(reverse(REGISTER), body)
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert list(errors) == [field], errors
    assert message in " ".join(errors[field])
    assert f'id="error-{field}"' in response.content.decode()
    assert not ManagedCluster.objects.filter(name="prod-eu").exists()


def test_a_certificate_needs_its_key_and_the_pair_is_accepted(admin_client: Any, key: str) -> None:
    certificate, private_key = _client_pair()
    body = {"name": "by-cert", "api_server_url": f"http://127.0.0.1:{free_port()}", "token": ""}
    response = admin_client.post(reverse(REGISTER), {**body, "client_certificate": certificate})
    assert response.status_code == 400
    assert list(response.context["form"].errors) == ["client_key"]
    assert private_key not in response.content.decode()
    response = admin_client.post(
        reverse(REGISTER), {**body, "client_certificate": certificate, "client_key": private_key}
    )
    assert response.status_code == 302
    stored = ManagedCluster.objects.get(name="by-cert")
    assert stored.credentials() == Credentials("", certificate, private_key)
    assert stored.health == "unreachable"  # nothing listens there


def test_non_admins_are_refused(client: Any, django_user_model: Any, key: str) -> None:
    body = {"name": "sneaky", "api_server_url": "https://sneaky.example:6443", "token": "t"}
    anonymous = client.get(reverse(REGISTER))
    assert anonymous.status_code == 302 and "login" in anonymous["Location"]
    for name, role in (("vera", "viewer"), ("oscar", "operator"), ("nora", None)):
        client.force_login(_user(django_user_model, name, role))
        assert client.get(reverse(REGISTER)).status_code == 403
        refused = client.post(reverse(REGISTER), body)
        assert refused.status_code == 403
        # Without a role, the access middleware refuses every page before the view.
        assert ("Admins only" if role else "no role") in refused.content.decode()
        if role is not None:
            listing = client.get(reverse(LIST))
            assert listing.status_code == 200
            assert reverse(REGISTER) not in listing.content.decode()
    assert not ManagedCluster.objects.filter(name="sneaky").exists()


def test_configured_contexts_are_managed_and_refreshed_by_the_task(
    sandbox: Any, settings: Any, tmp_path: Path, default_cluster: ManagedCluster
) -> None:
    document = yaml.safe_load(Path(sandbox.kubeconfig_path).read_text())
    document["users"].append({"name": "wrong", "user": {"token": "wrong-token"}})
    document["contexts"].append({"name": "sandbox-wrong", "context": {"cluster": "sandbox", "user": "wrong"}})
    kubeconfig = tmp_path / "two-contexts"
    kubeconfig.write_text(yaml.safe_dump(document))
    settings.LIQO_DASH = {**settings.LIQO_DASH, "KUBECONFIG": str(kubeconfig)}
    settings.LIQO_DASH_CLUSTERS = ["sandbox", "sandbox-wrong"]
    default_pk = default_cluster.pk

    assert tasks.refresh_managed_clusters.delay().get() == {"reachable": 1, "unreachable": 1}

    default = ManagedCluster.objects.get(is_default=True)
    # The current context's row now names its context: same row, same name (what hangs on it stays).
    assert (default.pk, default.name, default.context) == (default_pk, "default", "sandbox")
    assert (default.health, default.liqo_cluster_id, default.liqo_version) == ("reachable", "rome", "v1.2.0")
    wrong = ManagedCluster.objects.get(context="sandbox-wrong")
    assert (wrong.name, wrong.is_default, wrong.health) == ("sandbox-wrong", False, "unreachable")
    assert "401" in wrong.last_error
    # Listing the contexts again changes nothing.
    assert [c.pk for c in ensure_configured()] == [default.pk, wrong.pk]
    assert ManagedCluster.objects.count() == 2


def test_a_client_is_kept_until_the_connection_details_change(key: str, db: Any) -> None:
    cluster = ManagedCluster(name="kept", source="credentials", api_server_url="https://kept.example:6443")
    cluster.set_credentials(Credentials(token="one"))
    cluster.save()
    first = managedclient.api_client_for(cluster)
    assert managedclient.api_client_for(cluster) is first
    assert first.configuration.host == "https://kept.example:6443"
    assert first.configuration.api_key["BearerToken"] == "Bearer one"
    assert first.configuration.connection_pool_maxsize >= 32 and first.configuration.retries == 1
    cluster.set_credentials(Credentials(token="two"))
    cluster.save()
    second = managedclient.api_client_for(cluster)
    assert second is not first and second.configuration.api_key["BearerToken"] == "Bearer two"


def test_a_context_gets_a_free_dns_label_as_its_name() -> None:
    assert (
        name_for_context("arn:aws:eks:eu-west-1:123456789012:cluster/prod_eu", set())
        == "arn-aws-eks-eu-west-1-123456789012-cluster-prod-eu"
    )
    assert name_for_context("gke_proj_europe-west8_prod", set()) == "gke-proj-europe-west8-prod"
    assert name_for_context("kind-rome", {"kind-rome", "kind-rome-2"}) == "kind-rome-3"
    long = name_for_context("x" * 80, {"x" * 63})
    assert long == "x" * 61 + "-2"
    assert name_for_context("::", set()) == "cluster"


def test_a_ca_bundle_and_a_client_certificate_reach_the_client_as_private_files(key: str, db: Any) -> None:
    certificate, private_key = _client_pair()
    cluster = ManagedCluster(
        name="tls", source="credentials", api_server_url="https://tls.example:6443", ca_bundle=certificate
    )
    cluster.set_credentials(Credentials(client_certificate=certificate, client_key=private_key))
    cluster.save()
    cfg = managedclient.api_client_for(cluster).configuration
    assert (cfg.host, cfg.verify_ssl) == ("https://tls.example:6443", True)
    assert Path(cfg.ssl_ca_cert).read_text() == certificate
    assert Path(cfg.cert_file).read_text() == certificate
    assert Path(cfg.key_file).read_text() == private_key
    assert Path(cfg.key_file).stat().st_mode & 0o077 == 0, "the key file is readable by its owner only"
    assert "BearerToken" not in cfg.api_key
