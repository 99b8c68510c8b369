"""Verify the audit trail: exit 0 and print the count and head when it is intact; otherwise exit 1 and
name the first thing wrong (an edited, deleted, inserted or reordered row, a row sealed with another
key, deleted newest events)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from offloading.changes.audit import verify_and_remember


class Command(BaseCommand):
    help = "Verify every seal of the audit trail, its head and its last anchor."

    def handle(self, *args: Any, **options: Any) -> None:
        from offloading.changes.audittrail import verify

        verdict = verify()
        verify_and_remember()  # the pages and /metrics show the newest verdict
        if not verdict.ok:
            raise CommandError(verdict.describe(), returncode=1)
        self.stdout.write(verdict.describe())
