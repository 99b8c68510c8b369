"""The Celery application; configuration comes from Django settings (CELERY_* names), plus the
broker-resilience options below."""

from __future__ import annotations

import contextlib
import logging
import logging.config
import os
from typing import Any

from celery import Celery, signals

from liqo_dash import logs
from liqo_dash.warmup import freeze_heap

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "liqo_dash.settings")

app = Celery("liqo_dash")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Survive Redis going away and coming back: retry the broker connection forever (at startup too),
# with keep-alives and health checks so a dead connection is noticed instead of hanging, and cancel
# the tasks that were running when the connection was lost (acks_late: Redis redelivers them, and the
# apply is idempotent).
app.conf.update(
    broker_connection_retry=True,
    broker_connection_retry_on_startup=True,
    broker_connection_max_retries=None,
    broker_connection_timeout=5,
    broker_heartbeat=None,  # not supported by the Redis transport; keep-alives and health checks instead
    broker_pool_limit=10,
    worker_cancel_long_running_tasks_on_connection_loss=True,
    beat_scheduler="liqo_dash.heartbeat:BeatScheduler",  # the default scheduler, touching beat's liveness heartbeat
    broker_transport_options={
        **(app.conf.broker_transport_options or {}),
        "socket_keepalive": True,
        "socket_connect_timeout": 5,
        "socket_timeout": 30,
        "retry_on_timeout": True,
        "health_check_interval": 10,
    },
)
app.autodiscover_tasks()

_tokens: dict[str, Any] = {}


@signals.setup_logging.connect
def _use_django_logging(**_: Any) -> None:
    """Workers and beat log exactly like the web (text or JSON lines), not in Celery's own format."""
    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)


@signals.worker_process_init.connect
def _freeze_startup_heap(**_: Any) -> None:
    """Each pool process, once forked: what it inherited lives as long as it does (liqo_dash.warmup)."""
    freeze_heap()


@signals.task_prerun.connect
def _bind_task_context(task_id: str | None = None, task: Any = None, args: Any = None, **_: Any) -> None:
    # The fields a task's records carry (the change and its namespace for a change's tasks) are named by
    # the app that defines the task (logs.describe_task): this app knows no model.
    if task_id:
        fields = logs.task_fields(task.name, tuple(args or ())) if task is not None else {}
        _tokens[task_id] = logs.bind(**fields)


@signals.task_postrun.connect
def _unbind_task_context(task_id: str | None = None, **_: Any) -> None:
    token = _tokens.pop(task_id or "", None)
    if token is not None:
        # ValueError: bound in another context (an eager task run inside a request).
        with contextlib.suppress(ValueError):
            logs.unbind(token)
