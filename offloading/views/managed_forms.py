"""Forms of the managed clusters' pages (issue 28): registering a cluster, editing a registered one
(its API server URL, its CA bundle, and new credentials that replace the stored ones: a rotation), the
typed confirmation of its removal, and its access (impersonation and the roles' groups there).

A secret is never sent back to the browser: the token field is a password input that does not render
its value, the client certificate and key are textareas that do not either, and an edit form starts
with every credential field empty (empty on submit: the stored credentials are kept as they are)."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from django import forms

from access.conf import RoleConfigError, impersonation_groups
from offloading.models.managed import (
    NAME_LENGTH,
    Credentials,
    CredentialsKeyMissing,
    Impersonation,
    ManagedCluster,
    can_store_credentials,
)

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Generous bounds: a CA bundle of a few dozen certificates, a long service account token.
PEM_MAX = 64 * 1024
TOKEN_MAX = 16 * 1024
CREDENTIAL_FIELDS = ("token", "client_certificate", "client_key")
NO_KEY_FOR_NEW_CREDENTIALS = (
    "New credentials need an encryption key: set LIQO_DASH_CREDENTIALS_KEY (a Fernet key) in the environment. "
    "Nothing was stored."
)


class SecretTextarea(forms.Textarea):
    """A textarea that never sends its value back to the browser (a form shown again after an error)."""

    def format_value(self, value: Any) -> str | None:
        return None


def _pem(text: Any) -> str:
    text = str(text or "").strip()
    return text + "\n" if text else ""  # PEM ends with a newline


def clean_ca_bundle(value: Any) -> str:
    text = _pem(value)
    if text:
        try:
            x509.load_pem_x509_certificates(text.encode())
        except ValueError:
            raise forms.ValidationError("This is not a bundle of PEM certificates (-----BEGIN CERTIFICATE-----).")
    return text


def ca_fingerprints(bundle: str) -> list[str]:
    """The SHA-256 fingerprints of a CA bundle's certificates, for the audit trail (not the PEM itself)."""
    if not bundle.strip():
        return []
    try:
        certificates = x509.load_pem_x509_certificates(bundle.encode())
    except ValueError:
        return ["sha256:" + hashlib.sha256(bundle.encode()).hexdigest()]  # stored before validation existed
    return ["sha256:" + certificate.fingerprint(hashes.SHA256()).hex() for certificate in certificates]


class ConnectionForm(forms.Form):
    """The connection details every registered cluster has: its URL, its CA bundle, its credentials."""

    api_server_url = forms.URLField(
        label="API server URL", max_length=2048, assume_scheme="https", help_text="e.g. https://prod-eu.example:6443"
    )
    ca_bundle = forms.CharField(
        label="CA bundle (PEM)",
        required=False,
        max_length=PEM_MAX,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="The certificates that sign the API server's; empty: the system's trusted CAs.",
    )
    token = forms.CharField(
        label="Bearer token",
        required=False,
        strip=True,
        max_length=TOKEN_MAX,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="A service account token, for example. Stored encrypted, never shown again.",
    )
    client_certificate = forms.CharField(
        label="Client certificate (PEM)",
        required=False,
        max_length=PEM_MAX,
        widget=SecretTextarea(attrs={"rows": 3}),
        help_text="Instead of a token: a client certificate and its key.",
    )
    client_key = forms.CharField(
        label="Client key (PEM)",
        required=False,
        max_length=PEM_MAX,
        widget=SecretTextarea(attrs={"rows": 3, "autocomplete": "off"}),
    )

    # Whether the credentials must be given (registering) or may be left empty (editing: kept).
    credentials_required = True

    def clean_api_server_url(self) -> str:
        url = str(self.cleaned_data["api_server_url"])
        if not url.startswith(("https://", "http://")):
            raise forms.ValidationError("The API server URL starts with https:// (or http://).")
        return url.rstrip("/")

    def clean_ca_bundle(self) -> str:
        return clean_ca_bundle(self.cleaned_data.get("ca_bundle"))

    def clean_client_certificate(self) -> str:
        text = _pem(self.cleaned_data.get("client_certificate"))
        if text:
            try:
                x509.load_pem_x509_certificate(text.encode())
            except ValueError:
                raise forms.ValidationError("This is not a PEM certificate (-----BEGIN CERTIFICATE-----).")
        return text

    def clean_client_key(self) -> str:
        text = _pem(self.cleaned_data.get("client_key"))
        if text:
            try:
                serialization.load_pem_private_key(text.encode(), password=None)
            except (ValueError, TypeError):
                raise forms.ValidationError("This is not an unencrypted PEM private key.")
        return text

    def given_credentials(self) -> bool:
        """Whether any credential field was filled in (valid or not)."""
        return any(str(self.data.get(name) or "").strip() for name in CREDENTIAL_FIELDS)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not self.credentials_required and not self.given_credentials():
            return data  # editing without new credentials: the stored ones stay
        if not can_store_credentials():
            message = CredentialsKeyMissing.MESSAGE if self.credentials_required else NO_KEY_FOR_NEW_CREDENTIALS
            raise forms.ValidationError(message, code="no_key")
        token, cert, key = (data.get(k) for k in CREDENTIAL_FIELDS)
        pair = bool(cert or key) or self.has_error("client_certificate") or self.has_error("client_key")
        if not pair:
            if not token and not self.has_error("token"):
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

    def credential_fields(self) -> list[str]:
        """The names of the credential fields given (for the audit trail: names, never values)."""
        return [name for name in CREDENTIAL_FIELDS if self.cleaned_data.get(name)]


class RegisterForm(ConnectionForm):
    name = forms.CharField(
        max_length=NAME_LENGTH,
        help_text="Lower-case letters, digits and dashes (a DNS label): how pages, URLs and scopes name it.",
    )
    field_order = ["name", "api_server_url", "ca_bundle", *CREDENTIAL_FIELDS]

    def clean_name(self) -> str:
        name = str(self.cleaned_data["name"]).strip()
        if not _DNS_LABEL.match(name):
            raise forms.ValidationError(
                "Use lower-case letters, digits and dashes, starting and ending with a letter or digit."
            )
        if ManagedCluster.objects.filter(name=name).exists():
            raise forms.ValidationError(f"A managed cluster is already named {name}.")
        return name


class EditForm(ConnectionForm):
    """A registered cluster's connection details; empty credential fields keep the stored credentials,
    filled ones replace them all (a token replaces a certificate pair and the other way round)."""

    credentials_required = False

    def __init__(self, *args: Any, cluster: ManagedCluster, **kwargs: Any) -> None:
        kwargs.setdefault("initial", {"api_server_url": cluster.api_server_url, "ca_bundle": cluster.ca_bundle})
        super().__init__(*args, **kwargs)
        self.cluster = cluster
        self.fields["token"].label = "New bearer token"
        self.fields["token"].help_text = "Leave empty to keep the stored credentials. Stored encrypted, never shown."
        self.fields["client_certificate"].label = "New client certificate (PEM)"
        self.fields["client_certificate"].help_text = "Instead of a token: a new client certificate and its key."
        self.fields["client_key"].label = "New client key (PEM)"

    def changed_settings(self) -> list[str]:
        """The names of the connection settings (not credentials) whose value differs from the row's."""
        data = self.cleaned_data
        return [name for name in ("api_server_url", "ca_bundle") if data[name] != getattr(self.cluster, name)]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        moved = [name for name in ("api_server_url", "ca_bundle") if name in data and not self.has_error(name)]
        if (
            not self.given_credentials()
            and self.cluster.credentials_encrypted
            and [name for name in moved if data[name] != getattr(self.cluster, name)]
        ):
            # The stored credentials are sent only where they were registered to go: a new address (or a
            # new CA, which decides who may answer for it) needs them given again, so that no edit can
            # have the dashboard hand another admin's token to a server of the editor's choosing.
            self.add_error(
                "token",
                "A new API server URL or CA bundle needs the credentials again: the stored ones are "
                "never sent to a server they were not registered for.",
            )
        return data


class RemoveForm(forms.Form):
    confirm = forms.CharField(label="Type the cluster's name to confirm", max_length=NAME_LENGTH + 10)

    def __init__(self, *args: Any, cluster: ManagedCluster, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cluster = cluster

    def clean_confirm(self) -> str:
        typed = str(self.cleaned_data["confirm"]).strip()
        if typed != self.cluster.name:
            raise forms.ValidationError(f"Type {self.cluster.name} exactly to remove it.")
        return typed


class AccessForm(forms.Form):
    """How the dashboard's users reach one managed cluster: impersonation on or off, and the Kubernetes
    group of each role there; empty inherits the installation's settings."""

    impersonation = forms.ChoiceField(
        choices=Impersonation.choices,
        required=False,
        help_text="Off: changes reach this cluster as the dashboard itself, so only the dashboard's roles and "
        "scopes guard it.",
    )
    impersonation_groups = forms.CharField(
        label="Groups of the roles",
        required=False,
        max_length=1024,
        help_text="viewer=GROUP,operator=GROUP,admin=GROUP: the group each role is impersonated with here "
        "(a role left out gets none). Empty: KUBE_IMPERSONATE_GROUPS.",
    )

    def __init__(self, *args: Any, cluster: ManagedCluster, **kwargs: Any) -> None:
        kwargs.setdefault(
            "initial", {"impersonation": cluster.impersonation, "impersonation_groups": cluster.impersonation_groups}
        )
        super().__init__(*args, **kwargs)
        self.cluster = cluster

    def clean_impersonation_groups(self) -> str:
        try:
            return impersonation_groups(str(self.cleaned_data.get("impersonation_groups") or ""), "Groups of the roles")
        except RoleConfigError as exc:
            raise forms.ValidationError(str(exc)) from None

    def changed(self) -> list[str]:
        """The names of the settings whose value differs from the row's."""
        return [
            name
            for name in ("impersonation", "impersonation_groups")
            if self.cleaned_data[name] != getattr(self.cluster, name)
        ]
