"""Delivery of alerts to ALERT_WEBHOOK_URL: the Slack-compatible JSON body, the POST (stdlib urllib, a
timeout, no redirects), retries with backoff or the receiver's Retry-After, and the lease that keeps two
senders from telling the same thing at once.

An alert row is its own outbox: the webhook is owed a message while ``state != notified_state``. Whoever
wants it sent first reserves the row (``lease_token`` = the id of the Celery task it queues), so one task
at a time owns it; the task keeps the lease across its quick retries (Celery keeps the task id). When
the quick retries are spent, or the wait is long, or the task or its message is lost, the lease runs
out and the periodic check (``send_due``) queues a new task. Delivery is at least once: a worker killed
between the receiver's answer and the row's update sends again; the ``id`` field lets a receiver tell.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import logging
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from offloading.choices import AlertState
from offloading.models import Alert
from offloading.queue import enqueue_alert

log = logging.getLogger(__name__)

RESERVE = 120.0  # s a queued delivery holds its alert before the periodic check may queue another
LEASE_SLACK = 10.0  # s beyond the POST's timeout (or the retry's wait) that a sender keeps the lease
QUICK_RETRIES = 5  # retries by the task itself; then the periodic check takes over
QUICK_RETRY_MAX = 60.0  # a longer wait (a large Retry-After) is left to the periodic check
RETRY_BASE, RETRY_CAP = 2.0, 300.0  # backoff: 2, 4, 8 ... s, at most 5 min between two attempts
RETRY_AFTER_CAP = 3600.0  # a Retry-After beyond an hour is read as an hour
BATCH = 50  # alerts the periodic check queues at most per run (receivers limit their rate)


class DeliveryError(Exception):
    """The receiver did not take the message: why, how long it asked us to wait, whether retrying soon
    can help (a redirect, or a 4xx other than 408, 425 and 429, cannot: the URL or the body is wrong)."""

    def __init__(self, message: str, retry_after: float | None = None, permanent: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after
        self.permanent = permanent


@dataclass(frozen=True)
class Outcome:
    status: str  # delivered | failed | skipped | off
    retry_in: float | None = None  # the task retries itself after this many seconds


def webhook_url() -> str:
    return str(settings.LIQO_DASH.get("ALERT_WEBHOOK_URL") or "")


def link(path: str) -> str:
    """The dashboard page at ``path``, absolute when ALERT_DASHBOARD_URL (or CSRF_TRUSTED_ORIGINS) is set."""
    base = str(settings.LIQO_DASH.get("ALERT_DASHBOARD_URL") or "").rstrip("/")
    return f"{base}{path}"


def _slack(text: str) -> str:
    """Slack reads &, < and > as markup: escaped as it asks."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def payload(alert: Alert, state: str) -> dict[str, Any]:
    """The JSON body telling ``state`` of ``alert``: Slack's ``text`` plus the same facts as fields."""
    firing = state == AlertState.OPEN
    at = alert.opened_at if firing else (alert.resolved_at or timezone.now())
    url = link(alert.path)
    managed = alert.managed
    # The default cluster's messages read as the single-cluster versions' did; another cluster is named.
    where = "" if managed.is_default else f" in managed cluster {managed.name}"
    if firing:
        text = f"[liqo-dash] {alert.severity.upper()}{where}: {alert.title}."
        if alert.detail:
            text += f" {alert.detail}"
    else:
        minutes = max(1, round((at - alert.opened_at).total_seconds() / 60))
        text = f"[liqo-dash] RESOLVED after {minutes} min{where}: {alert.title}."
    if url:
        text = f"{_slack(text)} {url}"
    else:
        text = _slack(text)
    return {
        "text": text,
        "id": f"liqo-dash-alert-{alert.pk}-{alert.transitions}",
        "kind": alert.kind,
        "status": "firing" if firing else "resolved",
        "key": alert.key,
        "severity": alert.severity,
        "namespace": alert.namespace,
        "cluster": alert.cluster,
        "managed_cluster": managed.name,
        "title": alert.title,
        "detail": alert.detail,
        "url": url,
        "at": at.isoformat(),
        "first_seen": alert.first_seen.isoformat(),
        "source": "liqo-dash",
    }


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A webhook that redirects is misconfigured: urllib would turn the POST into a GET without body."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def retry_after(value: str | None, now: Any = None) -> float | None:
    """Seconds asked by a Retry-After header (a number or an HTTP date), within [0, RETRY_AFTER_CAP]."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            return None
        seconds = (when - (now or timezone.now())).total_seconds()
    return min(max(seconds, 0.0), RETRY_AFTER_CAP)


def post(url: str, body: dict[str, Any], timeout: float) -> int:
    """POST ``body`` as JSON; the status of a 2xx answer, or DeliveryError."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "User-Agent": f"liqo-dash/{settings.LIQO_DASH_VERSION}"},
    )
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            response.read(65536)
            return int(response.status)
    except urllib.error.HTTPError as exc:
        with exc:
            wait = retry_after(exc.headers.get("Retry-After")) if exc.code in (429, 503) else None
            permanent = 300 <= exc.code < 500 and exc.code not in (408, 425, 429)
            raise DeliveryError(f"HTTP {exc.code} {exc.reason}".strip(), wait, permanent) from None
    except urllib.error.URLError as exc:
        raise DeliveryError(f"no answer: {exc.reason}") from None
    except (OSError, http.client.HTTPException) as exc:
        raise DeliveryError(f"no answer: {exc or type(exc).__name__}") from None


def backoff(attempts: int) -> float:
    return float(min(RETRY_CAP, RETRY_BASE * 2 ** max(0, attempts - 1)))


def _owed() -> Any:
    return Alert.objects.exclude(state=F("notified_state"))


def _free(now: Any) -> Q:
    return Q(lease_until__isnull=True) | Q(lease_until__lt=now)


def new_token() -> str:
    """The id of a delivery task to be queued, which names the lease it holds."""
    return uuid.uuid4().hex


def reserve(alert_id: int, now: Any = None) -> str | None:
    """Take the lease of an owed alert for a task yet to be queued: its id, or None when someone has it."""
    now = now or timezone.now()
    token = new_token()
    taken = (
        _owed().filter(_free(now), pk=alert_id).update(lease_token=token, lease_until=now + timedelta(seconds=RESERVE))
    )
    return token if taken else None


def reserve_and_send(alert_id: int) -> bool:
    token = reserve(alert_id)
    if token is not None:
        enqueue_alert(alert_id, token)
    return token is not None


def send_due(now: Any = None) -> int:
    """Queue the owed alerts whose time has come and whose lease is free (the oldest first, BATCH at most)."""
    if not webhook_url():
        return 0
    now = now or timezone.now()
    due = _owed().filter(_free(now), next_attempt_at__lte=now).order_by("next_attempt_at", "id")
    return sum(reserve_and_send(pk) for pk in list(due.values_list("pk", flat=True)[:BATCH]))


def deliver(alert_id: int, token: str, retries: int = 0) -> Outcome:
    """Tell the webhook the current state of an owed alert, as the holder of lease ``token`` (the task's
    id). ``retries``: the task's retries so far; the answer says when it should retry itself."""
    url = webhook_url()
    if not url:
        return Outcome("off")
    now = timezone.now()
    timeout = float(settings.LIQO_DASH["ALERT_WEBHOOK_TIMEOUT"])
    token = token or new_token()
    claimed = (
        _owed()
        .filter(_free(now) | Q(lease_token=token), pk=alert_id)
        .update(lease_token=token, lease_until=now + timedelta(seconds=timeout + LEASE_SLACK), last_attempt_at=now)
    )
    if not claimed:
        return Outcome("skipped")
    alert = Alert.objects.get(pk=alert_id)
    mine = Alert.objects.filter(pk=alert_id, lease_token=token)
    told = alert.state
    try:
        post(url, payload(alert, told), timeout)
    except DeliveryError as exc:
        return _failed(alert, mine, exc, retries, timeout)
    mine.update(
        notified_state=told,
        delivered_at=timezone.now(),
        attempts=F("attempts") + 1,
        last_error="",
        lease_token="",
        lease_until=None,
    )
    log.info("alert %s (%s) delivered", alert.key, told)
    if _owed().filter(pk=alert_id).exists():
        reserve_and_send(alert_id)  # it changed while we were telling the old state
    return Outcome("delivered")


def _failed(alert: Alert, mine: Any, exc: DeliveryError, retries: int, timeout: float) -> Outcome:
    attempts = alert.attempts + 1
    if exc.retry_after is not None:
        wait = exc.retry_after
    elif exc.permanent:
        wait = RETRY_CAP
    else:
        wait = backoff(attempts)
    quick = not exc.permanent and retries < QUICK_RETRIES and wait <= QUICK_RETRY_MAX
    now = timezone.now()
    fields: dict[str, Any] = {
        "attempts": F("attempts") + 1,
        "last_error": exc.message[:500],
        "next_attempt_at": now + timedelta(seconds=wait),
    }
    if quick:  # the task keeps the lease while it waits to retry
        fields["lease_until"] = now + timedelta(seconds=wait + timeout + LEASE_SLACK)
    else:
        fields.update(lease_token="", lease_until=None)
    mine.update(**fields)
    log.warning("alert %s not delivered (attempt %s): %s; next in %.0f s", alert.key, attempts, exc.message, wait)
    return Outcome("failed", wait if quick else None)
