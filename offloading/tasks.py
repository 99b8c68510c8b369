"""Thin Celery wrappers around the services: ids in, no model instances."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from . import services


@shared_task(name="offloading.tasks.apply_change", acks_late=True)
def apply_change(change_id: int) -> str:
    return services.apply_change(change_id)


@shared_task(name="offloading.tasks.await_deletion", acks_late=True)
def await_deletion(change_id: int) -> str:
    return services.await_deletion(change_id)


@shared_task(name="offloading.tasks.refresh", acks_late=True)
def refresh() -> dict[str, Any] | None:
    report = services.refresh_once()
    return report.__dict__ if report else None


@shared_task(name="offloading.tasks.sweep", acks_late=True)
def sweep() -> int:
    services.trim_history()
    return services.sweep()
