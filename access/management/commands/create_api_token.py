"""manage.py create_api_token USERNAME [--name NAME] [--expires-in DAYS]: prints only the token."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from access.models import ApiToken


class Command(BaseCommand):
    help = "Create an API token for a user and print it (only the token, once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="cli", help="what the token is for (default: cli)")
        parser.add_argument(
            "--expires-in", type=int, default=None, metavar="DAYS", help="days until it expires; 0: never"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"no user {options['username']!r}")
        if options["expires_in"] is not None and options["expires_in"] < 0:
            raise CommandError("--expires-in must be 0 (never) or a positive number of days")
        _row, text = ApiToken.issue(user, options["name"], options["expires_in"])
        self.stdout.write(text)
