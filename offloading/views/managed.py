"""Pages of the managed clusters (issue 28): the list (every signed-in user: name, how each is reached,
its Liqo cluster id, health and Liqo version) and, for admins only, registering a cluster by its API
server URL, CA bundle and a bearer token (or a client certificate and key), editing a registered one
(its URL, its CA bundle, new credentials that replace the stored ones) and removing it after a typed
confirmation that names what goes with it. The forms are in ``offloading.views.managed_forms``.

The credentials are stored encrypted (``offloading.models.managed``); without LIQO_DASH_CREDENTIALS_KEY
nothing new is stored and the pages say why. The clusters of LIQO_DASH_CLUSTERS (kubeconfig contexts)
are read-only here: the setting makes them, and every process makes them again.

Every registration, edit, credential rotation and removal writes an event into the sealed audit trail
(``offloading.audit.events.record``), in the transaction that makes the change: who, which cluster, the
names of the fields that changed and the new non-secret values, never a credential. After a
registration or a change of the connection details, the cluster is looked at once, at a short timeout,
so the list shows at once whether it answers and who it is."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import IntegrityError, models, transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from access import roles, scopes
from access.models import Scope
from offloading.audit import events
from offloading.choices import AuditAction
from offloading.cluster import managed
from offloading.context import current_actor
from offloading.models import AuditEvent, ClusterOffloading
from offloading.models.managed import (
    CredentialsKeyMissing,
    CredentialsUnreadable,
    ManagedCluster,
    ManagedClusterHealth,
    ManagedClusterSource,
    can_store_credentials,
    configured,
)
from offloading.views.managed_forms import EditForm, RegisterForm, RemoveForm, ca_fingerprints

ADMINS_ONLY = "Admins only: registering a managed cluster gives the dashboard credentials to its API server."
ADMINS_ONLY_EDIT = (
    "Admins only: a managed cluster's connection details and credentials are the dashboard's access to it."
)
ADMINS_ONLY_REMOVE = "Admins only: removing a managed cluster ends the dashboard's access to it."
# The first look at a newly registered cluster happens inside the request: it must not hold the page long.
REGISTER_TIMEOUT = 3.0
# How many namespaces offloaded to a cluster the removal page names (the rest are counted).
NAMED_NAMESPACES = 20


def _is_admin(request: HttpRequest) -> bool:
    return roles.role_of(request.user) == roles.ADMIN


def _forbidden(request: HttpRequest, action: str, reason: str) -> HttpResponse:
    context = {"reason": reason, "action": action, "namespace": None}
    return render(request, "offloading/forbidden.html", context, status=403)


def _list_url(cluster: ManagedCluster | None = None) -> str:
    url = reverse("offloading:managed_cluster_list")
    return url + f"#cluster-{cluster.name}" if cluster is not None else url


def read_only_reason(cluster: ManagedCluster, action: str = "edit") -> str:
    """Why the pages may not ``action`` ("edit" or "remove") ``cluster`` ("" when they may). A context
    the setting no longer lists may be removed (its row outlived it), not edited (nothing to edit)."""
    if cluster.source == ManagedClusterSource.CONTEXT:
        where = f"kubeconfig context {cluster.context}" if cluster.context else "the current kubeconfig context"
        if cluster.is_default or cluster.context in settings.LIQO_DASH_CLUSTERS:
            return (
                f"{cluster.name} comes from the LIQO_DASH_CLUSTERS setting ({where}): change it there or in the "
                "kubeconfig, not here. Every process makes the rows of that setting's contexts again, so an edit "
                "or a removal here would not last."
            )
        if action == "edit":
            return (
                f"{cluster.name} is reached through {where}, which LIQO_DASH_CLUSTERS no longer lists: there is "
                "nothing to edit here (the kubeconfig says how it is reached). It can be removed."
            )
        return ""
    if cluster.is_default:
        return f"{cluster.name} is the default cluster: the single-cluster pages and URLs address it."
    return ""


def unlisted(cluster: ManagedCluster) -> bool:
    """A context's row that LIQO_DASH_CLUSTERS no longer lists (removable, not editable)."""
    return (
        cluster.source == ManagedClusterSource.CONTEXT
        and not cluster.is_default
        and cluster.context not in settings.LIQO_DASH_CLUSTERS
    )


def stored_credentials(cluster: ManagedCluster) -> str:
    """What kind of credentials are stored, for the edit page (never a value)."""
    if not cluster.credentials_encrypted:
        return "none"
    try:
        credentials = cluster.credentials()
    except CredentialsKeyMissing:
        return "stored encrypted; they cannot be read without LIQO_DASH_CREDENTIALS_KEY"
    except (CredentialsUnreadable, ValueError):  # ValueError: a stored value that is not a Fernet token at all
        return "stored encrypted, but no key of LIQO_DASH_CREDENTIALS_KEY decrypts them: give new ones"
    kinds = []
    if credentials.token:
        kinds.append("a bearer token")
    if credentials.client_certificate and credentials.client_key:
        kinds.append("a client certificate and its key")
    return " and ".join(kinds) + " (stored encrypted)" if kinds else "none"


def _connection(cluster: ManagedCluster) -> dict[str, Any]:
    """The non-secret connection settings as the audit trail keeps them (the CA bundle by fingerprints)."""
    return {"api_server_url": cluster.api_server_url, "ca_bundle": ca_fingerprints(cluster.ca_bundle)}


def _audit(action: str, *, outcome: str, message: str, before: Any = None, after: Any = None) -> AuditEvent:
    """One event of the sealed trail about a managed cluster (``before`` and ``after`` name it), by
    whoever is signed in. No namespace: the event is about the cluster itself."""
    return events.record(current_actor(), action, "", outcome=outcome, before=before, after=after, message=message)


def _first_look(request: HttpRequest, cluster: ManagedCluster, done: str) -> None:
    """Look at ``cluster`` once (short timeout) and say what was found after ``done``."""
    if not can_store_credentials():
        messages.warning(
            request,
            f"{done}. It was not looked at: without LIQO_DASH_CREDENTIALS_KEY its credentials cannot be read.",
            extra_tags="warn",
        )
        return
    cluster = managed.refresh(cluster, timeout=REGISTER_TIMEOUT)
    if cluster.health == ManagedClusterHealth.REACHABLE:
        messages.success(request, f"{done}: it answers.")
    else:
        messages.warning(request, f"{done}, but it does not answer: {cluster.last_error}", extra_tags="warn")


@login_required
@require_GET
def managed_list(request: HttpRequest) -> HttpResponse:
    clusters = configured(ManagedCluster.objects.all())  # LIQO_DASH_CLUSTERS' rows, before the first refresh has run
    return render(
        request,
        "offloading/managed/list.html",
        {
            "clusters": [(c, read_only_reason(c, "remove"), unlisted(c)) for c in clusters],
            "is_admin": _is_admin(request),
            "health": ManagedClusterHealth,
            "can_store": can_store_credentials(),
            "registered": sum(1 for c in clusters if c.source == ManagedClusterSource.CREDENTIALS),
        },
    )


@login_required
@require_http_methods(["GET", "POST"])
def managed_register(request: HttpRequest) -> HttpResponse:
    if not _is_admin(request):
        return _forbidden(request, "register", ADMINS_ONLY)
    form = RegisterForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        cluster = ManagedCluster(
            name=form.cleaned_data["name"],
            source=ManagedClusterSource.CREDENTIALS,
            api_server_url=form.cleaned_data["api_server_url"],
            ca_bundle=form.cleaned_data["ca_bundle"],
        )
        try:
            cluster.set_credentials(form.credentials())
            with transaction.atomic():
                cluster.save()
                _audit(
                    AuditAction.CLUSTER_REGISTERED,
                    outcome="registered",
                    after={"cluster": cluster.name, **_connection(cluster), "credentials": form.credential_fields()},
                    message=f"Registered managed cluster {cluster.name} at {cluster.api_server_url}",
                )
        except CredentialsKeyMissing as exc:
            form.add_error(None, str(exc))
        except IntegrityError:
            form.add_error("name", f"A managed cluster is already named {cluster.name}.")
        else:
            _first_look(request, cluster, f"Registered {cluster.name}")
            return redirect(_list_url(cluster))
    return render(
        request,
        "offloading/managed/register.html",
        {"form": form, "can_store": can_store_credentials()},
        status=400 if request.method == "POST" else 200,
    )


def _read_only(request: HttpRequest, cluster: ManagedCluster, reason: str, action: str) -> HttpResponse:
    """The page of a cluster these pages may not change: why, and nothing else (409 to a POST)."""
    context = {"cluster": cluster, "reason": reason, "action": action}
    return render(
        request, "offloading/managed/read_only.html", context, status=409 if request.method == "POST" else 200
    )


def _changeable(request: HttpRequest, name: str, action: str, refusal: str) -> ManagedCluster | HttpResponse:
    """The cluster ``name`` when the user may ``action`` it here, or the answer that says why not. Admins
    only, asked first: whoever else asks learns nothing, not even whether the cluster exists."""
    if not _is_admin(request):
        return _forbidden(request, action, refusal)
    cluster = get_object_or_404(ManagedCluster, name=name)
    reason = read_only_reason(cluster, action)
    return _read_only(request, cluster, reason, action) if reason else cluster


@login_required
@require_http_methods(["GET", "POST"])
def managed_edit(request: HttpRequest, name: str) -> HttpResponse:
    cluster = _changeable(request, name, "edit", ADMINS_ONLY_EDIT)
    if isinstance(cluster, HttpResponse):
        return cluster
    form = EditForm(request.POST if request.method == "POST" else None, cluster=cluster)
    if request.method == "POST" and form.is_valid():
        changed, rotated = form.changed_settings(), form.given_credentials()
        if not changed and not rotated:
            messages.info(request, f"Nothing changed: {cluster.name} keeps its settings and credentials.")
            return redirect(_list_url(cluster))
        try:
            with transaction.atomic():
                # 404 when it was removed meanwhile
                row = get_object_or_404(ManagedCluster.objects.select_for_update(), pk=cluster.pk)
                before = _connection(row)
                for name_ in changed:
                    setattr(row, name_, form.cleaned_data[name_])
                if rotated:
                    row.set_credentials(form.credentials())
                row.save(update_fields=[*changed, *(["credentials_encrypted"] if rotated else []), "updated_at"])
                if changed:
                    after = _connection(row)
                    _audit(
                        AuditAction.CLUSTER_UPDATED,
                        outcome="updated",
                        before={"cluster": row.name, **{k: before[k] for k in changed}},
                        after={"cluster": row.name, "changed": changed, **{k: after[k] for k in changed}},
                        message=f"Edited managed cluster {row.name}: {', '.join(changed)}",
                    )
                if rotated:
                    _audit(
                        AuditAction.CLUSTER_CREDENTIALS_ROTATED,
                        outcome="rotated",
                        after={"cluster": row.name, "credentials": form.credential_fields()},
                        message=f"Replaced the credentials of managed cluster {row.name} "
                        f"({', '.join(form.credential_fields())})",
                    )
        except CredentialsKeyMissing as exc:  # the key went away between the form's check and now
            form.add_error(None, str(exc))
        else:
            what = ", ".join([*changed, *(["credentials rotated"] if rotated else [])])
            _first_look(request, row, f"Saved {row.name} ({what})")
            return redirect(_list_url(row))
    return render(
        request,
        "offloading/managed/edit.html",
        {
            "cluster": cluster,
            "form": form,
            "can_store": can_store_credentials(),
            "stored": stored_credentials(cluster),
        },
        status=400 if request.method == "POST" else 200,
    )


@dataclass
class Removal:
    """What goes with a managed cluster when it is removed, and what stops it."""

    attached: list[tuple[str, int, str]] = field(default_factory=list)  # (what, how many, what happens)
    blockers: list[str] = field(default_factory=list)
    scopes: list[str] = field(default_factory=list)  # access scopes naming the cluster
    offloaded: list[str] = field(default_factory=list)  # namespaces offloaded to it, first few
    offloaded_count: int = 0


def removal_of(cluster: ManagedCluster) -> Removal:
    """What hangs on ``cluster``: the rows that point at it (counted; one level), the access scopes that
    name it, the namespaces of the default cluster offloaded to it (their twins there are no longer
    followed). A row that protects it, or an audit event that would go, stops the removal."""
    removal = Removal()
    for relation in ManagedCluster.relations():
        related, remote = relation.related_model, relation.field
        count = related._base_manager.filter(**{remote.name: cluster}).count()
        if not count:
            continue
        what = str(related._meta.verbose_name_plural)
        on_delete = remote.remote_field.on_delete
        if related is AuditEvent:
            removal.blockers.append(f"{count} {what} belong to it: the audit trail is append-only")
        elif on_delete in (models.PROTECT, models.RESTRICT) or on_delete is models.DO_NOTHING:
            removal.blockers.append(f"{count} {what} still belong to it")
        elif on_delete is models.CASCADE:
            removal.attached.append((what, count, "deleted with it"))
        else:
            removal.attached.append((what, count, "kept, no longer attached to a cluster"))
    for scope in Scope.objects.select_related("user", "group").order_by("value"):
        if scopes.split(scope.kind, scope.value).cluster == cluster.name:
            owner = f"user {scope.user}" if scope.user_id else f"group {scope.group}"
            removal.scopes.append(f"{owner}: {scope.value}")
    if cluster.liqo_cluster_id:
        names = (
            ClusterOffloading.objects.of()  # the default cluster's namespaces (the docstring)
            .filter(cluster_id=cluster.liqo_cluster_id)
            .values_list("namespace__name", flat=True)
            .distinct()
            .order_by("namespace__name")
        )
        removal.offloaded_count = names.count()
        removal.offloaded = list(names[:NAMED_NAMESPACES])
    return removal


@login_required
@require_http_methods(["GET", "POST"])
def managed_remove(request: HttpRequest, name: str) -> HttpResponse:
    cluster = _changeable(request, name, "remove", ADMINS_ONLY_REMOVE)
    if isinstance(cluster, HttpResponse):
        return cluster
    removal = removal_of(cluster)
    form = RemoveForm(request.POST if request.method == "POST" else None, cluster=cluster)
    status = 200
    if request.method == "POST":
        status = 409 if removal.blockers else 400
        if form.is_valid() and not removal.blockers:
            try:
                with transaction.atomic():
                    # Locked, and a 404 when another admin removed it meanwhile (one event per removal).
                    cluster = get_object_or_404(ManagedCluster.objects.select_for_update(), pk=cluster.pk)
                    _audit(
                        AuditAction.CLUSTER_REMOVED,
                        outcome="removed",
                        before={
                            "cluster": cluster.name,
                            **_connection(cluster),
                            "liqo_cluster_id": cluster.liqo_cluster_id,
                            **({"context": cluster.context} if cluster.source == ManagedClusterSource.CONTEXT else {}),
                        },
                        message=f"Removed managed cluster {cluster.name} ({cluster.where})"
                        + (" and its stored credentials" if cluster.credentials_encrypted else ""),
                    )
                    cluster.delete()
            except (models.ProtectedError, models.RestrictedError):
                form.add_error(None, "Rows that belong to it appeared meanwhile: nothing was removed.")
                status = 409
            else:
                messages.success(
                    request,
                    f"Removed {cluster.name} and its stored credentials. Revoke them on the cluster itself "
                    "too: removing them here does not invalidate them."
                    if cluster.credentials_encrypted
                    else f"Removed {cluster.name}.",
                )
                return redirect(_list_url())
    context = {"cluster": cluster, "form": form, "removal": removal}
    return render(request, "offloading/managed/remove.html", context, status=status)
