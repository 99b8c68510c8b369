"""manage.py grant USERNAME --role {viewer,operator,admin} [--namespaces GLOB]...
[--namespace-selector SELECTOR]... [--password-stdin] [--revoke]"""

from __future__ import annotations

import sys
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from access import roles, scopes
from access.models import Scope


class Command(BaseCommand):
    help = (
        "Give a user a role and operator scopes (creating the user when missing), or take them away with "
        "--revoke; prints what the user may now do."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--role", choices=roles.ROLES, help="required unless --revoke")
        parser.add_argument(
            "--namespaces", action="append", default=[], metavar="GLOB", help="namespace name glob, e.g. team-a-*"
        )
        parser.add_argument(
            "--namespace-selector", action="append", default=[], metavar="SELECTOR", help="label selector, e.g. team=a"
        )
        parser.add_argument(
            "--password-stdin", action="store_true", help="read a password for a new user from standard input"
        )
        parser.add_argument(
            "--revoke",
            action="store_true",
            help="remove the given role and scopes instead (with neither: the role and every scope)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        wanted = [(scopes.GLOB, v) for v in options["namespaces"]]
        wanted += [(scopes.SELECTOR, v) for v in options["namespace_selector"]]
        for kind, value in wanted:
            try:
                scopes.validate(kind, value)
            except scopes.ScopeError as exc:
                raise CommandError(str(exc)) from exc
        role = options["role"]
        if options["revoke"]:
            user = get_user_model().objects.filter(username=options["username"]).first()
            if user is None:
                raise CommandError(f"no user {options['username']!r}")
            self._revoke(user, role, wanted)
        else:
            if role is None:
                raise CommandError("--role is required (or use --revoke)")
            user = self._grant(options["username"], role, wanted, options["password_stdin"])
        roles.forget(user)
        self.stdout.write(f"{user.get_username()}: {roles.summary(user)}")
        if wanted and roles.role_of(user) in (roles.VIEWER, roles.ADMIN) and not options["revoke"]:
            self.stdout.write("note: scopes limit operators only; this role is not limited by them")

    @transaction.atomic
    def _grant(self, username: str, role: str, wanted: list[tuple[str, str]], password_stdin: bool) -> Any:
        model = get_user_model()
        user = model.objects.filter(username=username).first()
        if user is None:
            user = model(username=username)
            if password_stdin:
                password = sys.stdin.readline().rstrip("\r\n")
                if not password:
                    raise CommandError("--password-stdin: standard input gave an empty password")
                user.set_password(password)
            else:
                user.set_unusable_password()
            user.save()
            self.stdout.write(f"created user {username}")
        elif password_stdin:
            raise CommandError(f"user {username!r} exists: --password-stdin only sets a new user's password")
        user.groups.remove(*Group.objects.filter(name__in=roles.ROLES).exclude(name=role))
        user.groups.add(Group.objects.get_or_create(name=role)[0])
        if wanted:
            Scope.objects.filter(user=user).delete()
            for kind, value in dict.fromkeys(wanted):
                Scope.objects.create(user=user, kind=kind, value=value)
        return user

    @transaction.atomic
    def _revoke(self, user: Any, role: str | None, wanted: list[tuple[str, str]]) -> None:
        if role is None and not wanted:
            user.groups.remove(*Group.objects.filter(name__in=roles.ROLES))
            Scope.objects.filter(user=user).delete()
            return
        if role is not None:
            user.groups.remove(*Group.objects.filter(name=role))
        for kind, value in wanted:
            Scope.objects.filter(user=user, kind=kind, value=value).delete()
