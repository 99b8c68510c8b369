"""Write the audit trail's head (sequence number and seal) outside the database: AUDIT_ANCHOR, an
append-only JSON-lines file by default or configmap:NAMESPACE/NAME. Beat runs it every minute."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from offloading.audit.trail import anchor


class Command(BaseCommand):
    help = "Anchor the audit trail's head to AUDIT_ANCHOR."

    def handle(self, *args: Any, **options: Any) -> None:
        record = anchor()
        self.stdout.write(f"anchored {json.dumps(record, sort_keys=True)} to {settings.AUDIT_ANCHOR}")
