"""Operator scopes (per user or per group) and API tokens."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import IntegrityError, models, transaction
from django.utils import timezone

from access import scopes, tokens


class Scope(models.Model):
    """One namespace name glob or label selector an operator may change, for a user or for a group."""

    KIND_CHOICES = [(scopes.GLOB, "namespace name glob"), (scopes.SELECTOR, "namespace label selector")]

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="access_scopes"
    )
    group = models.ForeignKey(Group, null=True, blank=True, on_delete=models.CASCADE, related_name="access_scopes")
    kind = models.CharField(max_length=16, choices=KIND_CHOICES, default=scopes.GLOB)
    value = models.CharField(max_length=500, help_text="team-a-* (glob) or team=a (kubectl label selector)")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(user__isnull=False, group__isnull=True)
                | models.Q(user__isnull=True, group__isnull=False),
                name="access_scope_user_xor_group",
            ),
        ]
        ordering = ["kind", "value"]

    def __str__(self) -> str:
        owner = f"user {self.user}" if self.user_id else f"group {self.group}"
        return f"{owner}: {scopes.Scope(self.kind, self.value)}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.clean()
        super().save(*args, **kwargs)

    def clean(self) -> None:
        if bool(self.user_id) == bool(self.group_id):
            raise ValidationError("a scope belongs to exactly one user or one group")
        try:
            scopes.validate(self.kind, self.value)
        except scopes.ScopeError as exc:
            raise ValidationError({"value": str(exc)}) from exc


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def active(self) -> ApiTokenQuerySet:
        now = timezone.now()
        return self.filter(revoked__isnull=True).filter(models.Q(expires__isnull=True) | models.Q(expires__gt=now))


class ApiToken(models.Model):
    """A personal API token. Only a digest of the secret is kept; the token is shown once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=tokens.PREFIX_LENGTH, unique=True, editable=False)
    salt = models.CharField(max_length=32, editable=False)
    digest = models.CharField(max_length=64, editable=False)
    created = models.DateTimeField(auto_now_add=True)
    expires = models.DateTimeField(null=True, blank=True, help_text="empty: never")
    last_used = models.DateTimeField(null=True, blank=True, editable=False)
    revoked = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.name} ({tokens.TOKEN_MARK}{self.prefix}_…) of {self.user}"

    @classmethod
    def issue(cls, user: Any, name: str, expires_in_days: int | None = None) -> tuple[ApiToken, str]:
        """Create a token; returns the row and the token text (the only time it exists in clear).
        ``expires_in_days``: None for the default (API_TOKEN_DEFAULT_DAYS), 0 for never."""
        days = settings.API_TOKEN_DEFAULT_DAYS if expires_in_days is None else expires_in_days
        if days < 0:
            raise ValueError("the expiry must be 0 (never) or a positive number of days")
        expires = timezone.now() + timedelta(days=days) if days else None
        for _attempt in range(5):
            text, prefix, salt = tokens.generate()
            try:
                with transaction.atomic():
                    row = cls.objects.create(
                        user=user,
                        name=name,
                        prefix=prefix,
                        salt=salt,
                        digest=tokens.digest(text, salt),
                        expires=expires,
                    )
            except IntegrityError:
                continue  # the 48-bit prefix collided: draw another
            return row, text
        raise RuntimeError("could not draw a unique token prefix")

    @property
    def state(self) -> str:
        if self.revoked:
            return "revoked"
        if self.expires and self.expires <= timezone.now():
            return "expired"
        return "active"

    def matches(self, text: str) -> bool:
        return tokens.verify(text, self.salt, self.digest)

    def revoke(self) -> None:
        if self.revoked is None:
            self.revoked = timezone.now()
            self.save(update_fields=["revoked"])


class OidcIdentity(models.Model):
    """The single sign-on identity a dashboard user was created for: the provider's issuer and the
    account's ``sub``, the only claims an OpenID provider promises are stable and unique. A user signs
    in with SSO through this row alone, never by a matching username or email address."""

    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_identity")
    created = models.DateTimeField(auto_now_add=True)
    last_login = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="access_oidc_identity_unique")]
        verbose_name = "single sign-on identity"
        verbose_name_plural = "single sign-on identities"

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer} -> {self.user}"
