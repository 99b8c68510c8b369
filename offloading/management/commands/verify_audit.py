"""Verify the audit trail: exit 0 and print the count and head when it is intact; otherwise exit 1 and
name the first thing wrong (an edited, deleted, inserted or reordered row, a row sealed with another
key, deleted newest events).

Only the database (and the anchor) are needed: the verdict is also kept in the shared cache for the
pages and /metrics, but an auditor checking a restored backup may have no Redis at all. ``--no-cache``
skips that step; an unreachable cache is reported on stderr and changes neither the output nor the
exit status."""

from __future__ import annotations

from typing import Any

import redis
from django.core.management.base import BaseCommand, CommandError, CommandParser

from offloading.audit.events import remember
from offloading.audit.trail import verify


class Command(BaseCommand):
    help = "Verify every seal of the audit trail, its head and its last anchor."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--no-cache",
            action="store_true",
            help="do not keep the verdict in the shared cache (for /metrics and the pages): no Redis needed",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        verdict = verify()
        if not options["no_cache"]:
            try:
                remember(verdict)  # the pages and /metrics show the newest verdict
            except (redis.RedisError, OSError) as exc:
                self.stderr.write(
                    f"the verdict is not kept for /metrics and the pages: the cache is unreachable ({exc})"
                )
        if not verdict.ok:
            raise CommandError(verdict.describe(), returncode=1)
        self.stdout.write(verdict.describe())
