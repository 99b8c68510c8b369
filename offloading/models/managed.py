"""The clusters one installation manages (issue 28): each a consumer cluster with its own API server,
reached through a kubeconfig context (``settings.LIQO_DASH_CLUSTERS``) or through credentials an admin
registered in the UI, with what discovery last found there (Liqo cluster id, Liqo version, health).

Registered credentials (the bearer token, or the client certificate and key) are kept only encrypted,
with the Fernet keys of ``settings.LIQO_DASH_CREDENTIALS_KEY`` (the first encrypts, all decrypt: a new
key goes first, then :func:`rotate_credentials` re-encrypts every row with it). Without a key nothing is
stored: :class:`CredentialsKeyMissing`. The API server URL and the CA bundle are not secrets and stay in
the clear (the list page shows the URL).

This module does not talk to Kubernetes: ``offloading.cluster.managed`` builds the clients and runs the
discovery."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.db import IntegrityError, models, transaction
from django.db.models import QuerySet
from django.utils.text import slugify

log = logging.getLogger(__name__)

NAME_LENGTH = 63
DEFAULT_NAME = "default"


class CredentialsKeyMissing(RuntimeError):
    """No LIQO_DASH_CREDENTIALS_KEY: credentials can be neither stored nor read."""

    MESSAGE = (
        "Registering a cluster's credentials needs an encryption key: set LIQO_DASH_CREDENTIALS_KEY "
        "(a Fernet key) in the environment. Nothing was stored."
    )

    def __init__(self) -> None:
        super().__init__(self.MESSAGE)


class CredentialsUnreadable(RuntimeError):
    """The stored credentials do not decrypt with any configured key (a key was removed or changed)."""


@dataclass(frozen=True)
class Credentials:
    """What authenticates to a registered cluster: a bearer token, or a client certificate and key (PEM)."""

    token: str = field(default="", repr=False)
    client_certificate: str = field(default="", repr=False)
    client_key: str = field(default="", repr=False)

    def as_dict(self) -> dict[str, str]:
        return {k: v for k, v in vars(self).items() if v}


def _cipher() -> MultiFernet:
    keys = list(getattr(settings, "LIQO_DASH_CREDENTIALS_KEY", []) or [])
    if not keys:
        raise CredentialsKeyMissing()
    return MultiFernet([Fernet(key) for key in keys])


def can_store_credentials() -> bool:
    """Whether a key is configured (the register page says so before anyone types a token)."""
    return bool(getattr(settings, "LIQO_DASH_CREDENTIALS_KEY", []))


def encrypt_credentials(credentials: Credentials) -> str:
    return _cipher().encrypt(json.dumps(credentials.as_dict()).encode()).decode("ascii")


def decrypt_credentials(ciphertext: str) -> Credentials:
    try:
        data = json.loads(_cipher().decrypt(ciphertext.encode("ascii")))
    except InvalidToken:
        raise CredentialsUnreadable(
            "the stored credentials do not decrypt with any key of LIQO_DASH_CREDENTIALS_KEY"
        ) from None
    return Credentials(**{k: str(v) for k, v in data.items() if k in Credentials.__dataclass_fields__})


class ManagedClusterSource(models.TextChoices):
    CONTEXT = "context", "kubeconfig context"
    CREDENTIALS = "credentials", "registered credentials"


class ManagedClusterHealth(models.TextChoices):
    UNKNOWN = "unknown", "Unknown"
    REACHABLE = "reachable", "Reachable"
    UNREACHABLE = "unreachable", "Unreachable"


class Impersonation(models.TextChoices):
    """Whether pushes to a managed cluster impersonate the user who asked ("" inherits KUBE_IMPERSONATE)."""

    INHERIT = "", "as the installation (KUBE_IMPERSONATE)"
    ON = "on", "on: as the user who asked"
    OFF = "off", "off: as the dashboard itself"


class ManagedCluster(models.Model):
    """One managed consumer cluster. ``source`` says how it is reached: a kubeconfig ``context`` (an
    empty one: the process's own configuration, as ``offloading.cluster.client`` loads it: in-cluster,
    KUBE_CONTEXT or the kubeconfig's current context), or registered credentials (``api_server_url``,
    ``ca_bundle`` and the encrypted token or client certificate and key). Exactly one row at most is the
    default: the cluster the single-cluster pages and URLs address."""

    name = models.SlugField(max_length=NAME_LENGTH, unique=True)
    source = models.CharField(max_length=16, choices=ManagedClusterSource.choices, default=ManagedClusterSource.CONTEXT)
    context = models.CharField(max_length=253, blank=True)
    api_server_url = models.CharField(max_length=2048, blank=True)
    ca_bundle = models.TextField(blank=True)
    credentials_encrypted = models.TextField(blank=True)
    # What discovery found (offloading.cluster.managed.refresh); kept when the cluster stops answering.
    liqo_cluster_id = models.CharField(max_length=63, blank=True)
    liqo_version = models.CharField(max_length=64, blank=True)
    health = models.CharField(max_length=16, choices=ManagedClusterHealth.choices, default=ManagedClusterHealth.UNKNOWN)
    last_checked_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    is_default = models.BooleanField(default=False)
    # Access to this cluster where it differs from the installation's (access.impersonation reads them):
    # impersonation on or off ("" inherits KUBE_IMPERSONATE) and the Kubernetes group of each dashboard
    # role, "viewer=GROUP,operator=GROUP,admin=GROUP" ("" inherits KUBE_IMPERSONATE_GROUPS). The default
    # cluster always follows the installation's settings: they are its settings.
    impersonation = models.CharField(max_length=3, blank=True, choices=Impersonation.choices, default="")
    impersonation_groups = models.CharField(max_length=1024, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("-is_default", "name")
        constraints = [
            models.UniqueConstraint(
                fields=["is_default"], condition=models.Q(is_default=True), name="one_default_managed_cluster"
            ),
            models.UniqueConstraint(
                fields=["context"], condition=models.Q(source="context"), name="one_managed_cluster_per_context"
            ),
            models.CheckConstraint(
                condition=models.Q(source="context") | ~models.Q(api_server_url=""),
                name="managed_cluster_credentials_have_url",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def where(self) -> str:
        """How it is reached, for the pages (never a secret)."""
        if self.source == ManagedClusterSource.CREDENTIALS:
            return self.api_server_url
        return f"context {self.context}" if self.context else "current context"

    def set_credentials(self, credentials: Credentials) -> None:
        """Encrypt ``credentials`` into the row (not saved); raises CredentialsKeyMissing without a key."""
        self.credentials_encrypted = encrypt_credentials(credentials)

    def credentials(self) -> Credentials:
        """The decrypted credentials (empty for a context); raises CredentialsKeyMissing or
        CredentialsUnreadable."""
        if not self.credentials_encrypted:
            return Credentials()
        return decrypt_credentials(self.credentials_encrypted)

    @classmethod
    def relations(cls) -> list[Any]:
        """Every relation of another table to a managed cluster, the hidden ones included: the snapshot
        tables' keys have no reverse accessor (``related_name="+"``), so ``_meta.related_objects``
        leaves them out."""
        return [
            relation
            for relation in cls._meta.get_fields(include_hidden=True)
            if relation.auto_created and not relation.concrete and (relation.one_to_many or relation.one_to_one)
        ]

    def holds_rows(self) -> bool:
        """Whether any row of another table belongs to this cluster (its snapshot, to begin with)."""
        return any(
            relation.related_model._base_manager.filter(**{relation.field.name: self}).exists()
            for relation in self.relations()
        )


def rotate_credentials() -> int:
    """Re-encrypt every row's credentials with the first key (after a new key was put first); returns
    how many rows it rewrote."""
    cipher, count = _cipher(), 0
    rows = ManagedCluster.objects.exclude(credentials_encrypted="").values_list("pk", "credentials_encrypted")
    for pk, ciphertext in rows:
        try:
            rotated = cipher.rotate(ciphertext.encode("ascii")).decode("ascii")
        except InvalidToken:
            raise CredentialsUnreadable(f"managed cluster #{pk}: its credentials decrypt with no configured key")
        count += ManagedCluster.objects.filter(pk=pk, credentials_encrypted=ciphertext).update(
            credentials_encrypted=rotated
        )
    return count


def name_for_context(context: str, taken: set[str]) -> str:
    """A free slug for a kubeconfig context ("arn:aws:eks:...:cluster/prod" -> "arnawseks...cluster-prod")."""
    base = re.sub(r"[-_]+", "-", slugify(re.sub(r"[/:._@]", "-", context)))[:NAME_LENGTH].strip("-") or "cluster"
    name, n = base, 2
    while name in taken:
        suffix = f"-{n}"
        name, n = base[: NAME_LENGTH - len(suffix)] + suffix, n + 1
    return name


def ensure_configured(contexts: list[str] | None = None) -> list[ManagedCluster]:
    """Make the rows of the configured contexts exist (``settings.LIQO_DASH_CLUSTERS`` by default); the
    first context is the default cluster. With none configured, the default is the current context, as
    migration 0021 creates it. The default row keeps its primary key and name when the setting later
    names a context (it is repointed, not replaced): what hangs on it stays, its URLs keep working.
    Rows of contexts no longer listed, and registered clusters, are left as they are."""
    wanted = list(dict.fromkeys(settings.LIQO_DASH_CLUSTERS if contexts is None else contexts))
    with transaction.atomic():
        default = ManagedCluster.objects.select_for_update().filter(is_default=True).first()
        if not wanted:
            if default is None:
                default = ManagedCluster.objects.create(name=_free_name(DEFAULT_NAME), is_default=True)
            return [default]
        rows = []
        for index, context in enumerate(wanted):
            row = ManagedCluster.objects.filter(source=ManagedClusterSource.CONTEXT, context=context).first()
            if (
                row is None
                and index == 0
                and default is not None
                and default.source == "context"
                and not default.context
            ):
                default.context = context  # the current context, now named
                default.save(update_fields=["context", "updated_at"])
                row = default
            if row is None:
                try:
                    with transaction.atomic():
                        row = ManagedCluster.objects.create(name=_free_name(context), context=context)
                except IntegrityError:  # another process made it (or took the name) just now
                    row = ManagedCluster.objects.filter(source=ManagedClusterSource.CONTEXT, context=context).first()
                    if row is None:
                        row = ManagedCluster.objects.create(name=_free_name(context), context=context)
            rows.append(row)
        first = rows[0]
        if not first.is_default and default is not None and default.holds_rows():
            # The setting names another context first, but the default cluster holds the snapshot (and
            # what else hangs on it): moving the default would leave those rows under a cluster no page
            # addresses and start an empty snapshot beside them. It stays; say so.
            log.warning(
                "LIQO_DASH_CLUSTERS names %s first, but %s is the default managed cluster and holds rows: "
                "it stays the default (remove its rows, or the cluster, to move the default)",
                first.name,
                default.name,
            )
            return [default, *[row for row in rows if row.pk != default.pk]]
        if not first.is_default:
            ManagedCluster.objects.filter(is_default=True).update(is_default=False)
            first.is_default = True
            first.save(update_fields=["is_default", "updated_at"])
        for row in rows:
            _apply_access(row)
        return rows


def configured(clusters: QuerySet[ManagedCluster]) -> list[ManagedCluster]:
    """The rows of ``clusters``, after :func:`ensure_configured` when they lack what it would make: the
    default and a row per configured context, the first being the default. A page that lists the clusters
    pays no query more once they are there (ensure_configured takes the rows' lock and reads each
    context's row: ~1.4 ms per managed cluster at every request, bench/README "Fleet")."""
    rows = list(clusters)
    wanted = list(dict.fromkeys(settings.LIQO_DASH_CLUSTERS))
    default = next((row for row in rows if row.is_default), None)
    contexts = {row.context for row in rows if row.source == ManagedClusterSource.CONTEXT}
    done = default is not None and (
        not wanted
        or (default.source == ManagedClusterSource.CONTEXT and default.context == wanted[0] and set(wanted) <= contexts)
    )
    if done:
        return rows
    ensure_configured()
    return list(clusters.all())


def configured_access(cluster: ManagedCluster) -> dict[str, str] | None:
    """What LIQO_DASH_CLUSTER_ACCESS says of ``cluster``'s access (None: the setting leaves it to its
    Access page; the default cluster is never named there)."""
    if cluster.source != ManagedClusterSource.CONTEXT or cluster.is_default:
        return None
    found: dict[str, str] | None = getattr(settings, "LIQO_DASH_CLUSTER_ACCESS", {}).get(cluster.context)
    return found


def _apply_access(row: ManagedCluster) -> None:
    """Write what LIQO_DASH_CLUSTER_ACCESS says of the context's access into its row (what it leaves out:
    inherited), when it differs."""
    access = configured_access(row)
    if access is None:
        return
    wanted = {name: access.get(name, "") for name in ("impersonation", "impersonation_groups")}
    changed = [name for name, value in wanted.items() if getattr(row, name) != value]
    if changed:
        for name in changed:
            setattr(row, name, wanted[name])
        row.save(update_fields=[*changed, "updated_at"])


def _free_name(context: str) -> str:
    return name_for_context(context, set(ManagedCluster.objects.values_list("name", flat=True)))
