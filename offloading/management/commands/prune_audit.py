"""Retention: delete the audit events older than a date, writing a checkpoint (the number and seal of
the last one deleted) so that what remains still verifies."""

from __future__ import annotations

from datetime import datetime, time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from offloading.audit.trail import prune


class Command(BaseCommand):
    help = "Delete audit events older than --before (YYYY-MM-DD), keeping the trail verifiable."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--before", required=True, help="a date, YYYY-MM-DD (events before it go)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            day = datetime.strptime(options["before"], "%Y-%m-%d").date()
        except ValueError as exc:
            raise CommandError(f"--before: {exc}; use YYYY-MM-DD") from exc
        before = timezone.make_aware(datetime.combine(day, time.min))
        checkpoint = prune(before)
        if checkpoint is None:
            self.stdout.write(f"nothing older than {day}")
            return
        self.stdout.write(f"pruned {checkpoint.pruned} events; the trail now starts after #{checkpoint.seq}")
