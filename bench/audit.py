"""The audit trail at 100,000 events: the audit page (first page, a filtered page, a deep page), the
API list, the streaming CSV export and verify_audit, in a throwaway SQLite database.

    python -m bench.audit [--events 100000] [--repeat 5]

Prints the median time of each, and which meet the page goal (200 ms)."""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench import harness

PAGE_GOAL_MS = 200.0


def _fill(count: int) -> None:
    """``count`` sealed events, written the way the product writes them (one seal after the other)."""
    from django.db import transaction

    from offloading.choices import AuditAction, Source
    from offloading.models import AuditEvent

    actions = [AuditAction.REQUESTED, AuditAction.APPLIED, AuditAction.DRIFT_UPDATED, AuditAction.REFUSED]
    with transaction.atomic():
        for i in range(count):
            AuditEvent(
                user_name=f"user-{i % 50}",
                source=Source.EXTERNAL if i % 4 == 2 else Source.WEB,
                action=actions[i % 4],
                namespace=f"team-{i % 400}-ns",
                before={"podOffloadingStrategy": "Local"},
                after={"podOffloadingStrategy": "Remote"},
                message="bench",
            ).save()


def _time(call: object, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()  # type: ignore[operator]
        runs.append((time.perf_counter() - start) * 1000)
    return statistics.median(runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.audit")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="liqo-dash-bench-audit-") as tmp:
        harness.setup_django(Path(tmp))
        from django.contrib.auth import get_user_model
        from django.test import Client

        from offloading.audit.trail import verify

        started = time.perf_counter()
        _fill(args.events)
        print(f"wrote {args.events} sealed events in {time.perf_counter() - started:.1f} s")
        admin = get_user_model().objects.create_superuser("bench", password="bench-password-123")
        client = Client()
        client.force_login(admin)

        def get(url: str) -> object:
            def call() -> None:
                response = client.get(url)
                assert response.status_code == 200, (url, response.status_code)
                if getattr(response, "streaming", False):
                    for _ in response.streaming_content:
                        pass

            return call

        last_page = args.events // 50
        figures = {
            "audit page, newest": _time(get("/audit/"), args.repeat),
            "audit page, actor + action filter": _time(get("/audit/?actor=user-7&action=drift_updated"), args.repeat),
            f"audit page {last_page} (the oldest)": _time(get(f"/audit/?page={last_page}"), args.repeat),
            "API list, namespace filter": _time(get("/api/v1/audit/?namespace=team-12-ns"), args.repeat),
        }
        export_ms = _time(get("/api/v1/audit/export/?format=csv"), 1)
        verify_ms = _time(lambda: verify(), 1)
        print(f"\n{'figure':45} {'median ms':>10}  goal")
        for name, ms in figures.items():
            print(f"{name:45} {ms:10.1f}  {'meets' if ms <= PAGE_GOAL_MS else 'MISSES'} {PAGE_GOAL_MS:.0f} ms")
        print(f"{'CSV export of every event (streamed)':45} {export_ms:10.1f}")
        print(f"{'verify_audit over every seal':45} {verify_ms:10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
