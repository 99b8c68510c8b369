"""Create (or reset) the demo administrator and print its login."""

from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from liqo_dash import env


def demo_password() -> str:
    """LIQO_DASH_ADMIN_PASSWORD, else a random one generated once and kept in var/."""
    configured = env.string("LIQO_DASH_ADMIN_PASSWORD")
    if configured:
        return configured
    path = settings.VAR_DIR / "demo-admin-password"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(12))
        path.chmod(0o600)
    return path.read_text().strip()


class Command(BaseCommand):
    help = "Create or reset the demo administrator (username from LIQO_DASH_ADMIN_USER, default admin)."

    def handle(self, *args: Any, **options: Any) -> None:
        username = env.string("LIQO_DASH_ADMIN_USER", "admin")
        password = demo_password()
        user, created = get_user_model().objects.get_or_create(username=username)
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        self.stdout.write(f"{'created' if created else 'reset'} admin user {username!r}")
