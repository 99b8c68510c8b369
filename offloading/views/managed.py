"""Pages of the managed clusters (issue 28): the list (every signed-in user: name, how each is reached,
its Liqo cluster id, health and Liqo version) and, for admins only, the form that registers a cluster
by its API server URL, CA bundle and a bearer token (or a client certificate and key). The credentials
are stored encrypted (``offloading.models.managed``); without LIQO_DASH_CREDENTIALS_KEY the form is
refused with the reason and nothing is stored. Once registered, the cluster is looked at once, at a
short timeout, so the list shows at once whether it answers and who it is."""

from __future__ import annotations

import re
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from access import roles
from offloading.cluster import managed
from offloading.models.managed import (
    NAME_LENGTH,
    Credentials,
    CredentialsKeyMissing,
    ManagedCluster,
    ManagedClusterHealth,
    ManagedClusterSource,
    can_store_credentials,
    ensure_configured,
)

ADMINS_ONLY = "Admins only: registering a managed cluster gives the dashboard credentials to its API server."
# The first look at a newly registered cluster happens inside the request: it must not hold the page long.
REGISTER_TIMEOUT = 3.0
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class SecretTextarea(forms.Textarea):
    """A textarea that never sends its value back to the browser (a form shown again after an error)."""

    def format_value(self, value: Any) -> str | None:
        return None


class RegisterForm(forms.Form):
    name = forms.CharField(
        max_length=NAME_LENGTH,
        help_text="Lower-case letters, digits and dashes (a DNS label): how pages, URLs and scopes name it.",
    )
    api_server_url = forms.URLField(
        label="API server URL", max_length=2048, assume_scheme="https", help_text="e.g. https://prod-eu.example:6443"
    )
    ca_bundle = forms.CharField(
        label="CA bundle (PEM)",
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="The certificates that sign the API server's; empty: the system's trusted CAs.",
    )
    token = forms.CharField(
        label="Bearer token",
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="A service account token, for example. Stored encrypted, never shown again.",
    )
    client_certificate = forms.CharField(
        label="Client certificate (PEM)",
        required=False,
        widget=SecretTextarea(attrs={"rows": 3}),
        help_text="Instead of a token: a client certificate and its key.",
    )
    client_key = forms.CharField(
        label="Client key (PEM)", required=False, widget=SecretTextarea(attrs={"rows": 3, "autocomplete": "off"})
    )

    def clean_name(self) -> str:
        name = str(self.cleaned_data["name"]).strip()
        if not _DNS_LABEL.match(name):
            raise forms.ValidationError(
                "Use lower-case letters, digits and dashes, starting and ending with a letter or digit."
            )
        if ManagedCluster.objects.filter(name=name).exists():
            raise forms.ValidationError(f"A managed cluster is already named {name}.")
        return name

    def clean_api_server_url(self) -> str:
        url = str(self.cleaned_data["api_server_url"])
        if not url.startswith(("https://", "http://")):
            raise forms.ValidationError("The API server URL starts with https:// (or http://).")
        return url.rstrip("/")

    def clean_ca_bundle(self) -> str:
        text = str(self.cleaned_data.get("ca_bundle") or "").strip()
        if text:
            try:
                x509.load_pem_x509_certificates(text.encode())
            except ValueError:
                raise forms.ValidationError("This is not a bundle of PEM certificates (-----BEGIN CERTIFICATE-----).")
        return text + "\n" if text else ""  # PEM ends with a newline

    def clean_client_certificate(self) -> str:
        text = str(self.cleaned_data.get("client_certificate") or "").strip()
        if text:
            try:
                x509.load_pem_x509_certificate(text.encode())
            except ValueError:
                raise forms.ValidationError("This is not a PEM certificate (-----BEGIN CERTIFICATE-----).")
        return text + "\n" if text else ""

    def clean_client_key(self) -> str:
        text = str(self.cleaned_data.get("client_key") or "").strip()
        if text:
            try:
                serialization.load_pem_private_key(text.encode(), password=None)
            except (ValueError, TypeError):
                raise forms.ValidationError("This is not an unencrypted PEM private key.")
        return text + "\n" if text else ""

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not can_store_credentials():
            raise forms.ValidationError(CredentialsKeyMissing.MESSAGE, code="no_key")
        token, cert, key = (data.get(k) for k in ("token", "client_certificate", "client_key"))
        pair = bool(cert or key) or self.has_error("client_certificate") or self.has_error("client_key")
        if not pair:
            if not token:
                self.add_error("token", "Give a bearer token, or a client certificate and its key.")
        elif cert and not key and not self.has_error("client_key"):
            self.add_error("client_key", "A client certificate needs its key.")
        elif key and not cert and not self.has_error("client_certificate"):
            self.add_error("client_certificate", "A client key needs its certificate.")
        return data

    def credentials(self) -> Credentials:
        data = self.cleaned_data
        return Credentials(
            token=data.get("token") or "",
            client_certificate=data.get("client_certificate") or "",
            client_key=data.get("client_key") or "",
        )


def _is_admin(request: HttpRequest) -> bool:
    return roles.role_of(request.user) == roles.ADMIN


@login_required
@require_GET
def managed_list(request: HttpRequest) -> HttpResponse:
    ensure_configured()  # the rows of LIQO_DASH_CLUSTERS, before the first refresh has run
    return render(
        request,
        "offloading/managed/list.html",
        {
            "clusters": list(ManagedCluster.objects.all()),
            "is_admin": _is_admin(request),
            "health": ManagedClusterHealth,
        },
    )


@login_required
@require_http_methods(["GET", "POST"])
def managed_register(request: HttpRequest) -> HttpResponse:
    if not _is_admin(request):
        context = {"reason": ADMINS_ONLY, "action": "register", "namespace": None}
        return render(request, "offloading/forbidden.html", context, status=403)
    form = RegisterForm(request.POST or None)
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
        except CredentialsKeyMissing as exc:
            form.add_error(None, str(exc))
        except IntegrityError:
            form.add_error("name", f"A managed cluster is already named {cluster.name}.")
        else:
            cluster = managed.refresh(cluster, timeout=REGISTER_TIMEOUT)
            if cluster.health == ManagedClusterHealth.REACHABLE:
                messages.success(request, f"Registered {cluster.name}: it answers.")
            else:
                messages.warning(
                    request,
                    f"Registered {cluster.name}, but it does not answer: {cluster.last_error}",
                    extra_tags="warn",
                )
            return redirect(reverse("offloading:managed_cluster_list") + f"#cluster-{cluster.name}")
    return render(
        request,
        "offloading/managed/register.html",
        {"form": form, "can_store": can_store_credentials()},
        status=400 if request.method == "POST" else 200,
    )
