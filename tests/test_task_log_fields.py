"""The records a Celery task logs say what it is about: the app that defines a task names its fields
(liqo_dash.logs.describe_task), and the Celery app binds them around each run (liqo_dash.celery).
The Celery app itself knows no model: the change tasks describe themselves in offloading.tasks."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from celery import signals

from liqo_dash import logs
from liqo_dash.celery import app
from offloading.choices import ChangeAction
from offloading.models import ChangeRequest
from offloading.queue import APPLY_BULK, APPLY_CHANGE, AWAIT_DELETION


class _Task:
    def __init__(self, name: str) -> None:
        self.name = name


def _fields_seen_inside(task_name: str, args: tuple[Any, ...], task_id: str = "t-1") -> dict[str, Any]:
    """The context fields a record logged between the task's prerun and postrun signals carries."""
    record = logging.LogRecord("offloading.test", logging.INFO, __file__, 1, "inside", None, None)
    signals.task_prerun.send(sender=None, task_id=task_id, task=_Task(task_name), args=args)
    try:
        logs.ContextFilter().filter(record)
    finally:
        signals.task_postrun.send(sender=None, task_id=task_id)
    return {key: getattr(record, key) for key in logs.CONTEXT_FIELDS if getattr(record, key, None) is not None}


@pytest.mark.django_db
def test_a_change_task_logs_its_change_and_namespace() -> None:
    app.loader.import_default_modules()  # as a worker does at start: offloading.tasks describes its tasks
    change = ChangeRequest.objects.create(namespace="web-frontend", action=ChangeAction.OFFLOAD, requester_name="x")
    for name in (APPLY_CHANGE, AWAIT_DELETION):
        assert _fields_seen_inside(name, (change.pk,)) == {"change_id": change.pk, "namespace": "web-frontend"}
    # After the run nothing stays bound.
    after = logging.LogRecord("offloading.test", logging.INFO, __file__, 1, "after", None, None)
    logs.ContextFilter().filter(after)
    assert getattr(after, "change_id", None) is None and getattr(after, "namespace", None) is None


@pytest.mark.django_db
def test_a_change_that_is_gone_still_names_its_id_and_other_tasks_name_nothing() -> None:
    app.loader.import_default_modules()
    assert _fields_seen_inside(APPLY_CHANGE, (987654,)) == {"change_id": 987654}
    assert _fields_seen_inside(APPLY_BULK, (1,)) == {}


def test_a_describer_that_fails_gives_no_fields_and_never_breaks_the_task(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(args: tuple[Any, ...]) -> dict[str, Any]:
        raise RuntimeError("no database")

    monkeypatch.setattr(logs, "_task_fields", {})  # this test's describers only
    logs.describe_task("tests.broken", broken)
    assert logs.task_fields("tests.broken", (1,)) == {}
    assert logs.task_fields("tests.nobody-described-it", (1,)) == {}
