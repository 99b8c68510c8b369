"""Whether the API server is reachable, known once for every process (a circuit breaker in the shared
cache, Redis in production).

The worker and the watcher report what their requests saw. While the API server is unreachable,
changes wait instead of spending their retry budget (:mod:`offloading.changes.apply` parks them), and
one probe a second asks the API server whether it is back; the first probe that gets an answer closes
the breaker and sends every waiting change again, oldest first. The pages, the API and the freshness
badge read :func:`outage` to say "API server unreachable since HH:MM".
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.core.cache import cache
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from offloading.choices import ChangeState
from offloading.cluster import kube
from offloading.models import ChangeRequest
from offloading.queue import enqueue_apply, enqueue_probe

log = logging.getLogger(__name__)

_OUTAGE = "liqo-dash:api-outage"  # {"since": iso, "error": str}
_LAST_OUTAGE = "liqo-dash:api-last-outage"  # {"since": iso, "until": iso}
_PROBE_SCHEDULED = "liqo-dash:api-probe-scheduled"
PROBE_INTERVAL = 1.0

WAITING_FOR_API = "api_unreachable"


@dataclass(frozen=True)
class Outage:
    since: datetime
    error: str
    until: datetime | None = None

    def describe(self) -> str:
        """In words a person reads: "unreachable since 10:02" or "unreachable from 10:02 to 10:17"."""
        since = timezone.localtime(self.since).strftime("%H:%M:%S")
        if self.until is None:
            return f"the API server is unreachable since {since}"
        until = timezone.localtime(self.until).strftime("%H:%M:%S")
        return f"the API server was unreachable from {since} to {until}"


def _read(key: str) -> Outage | None:
    value = cache.get(key)
    if not isinstance(value, dict):
        return None
    since = parse_datetime(str(value.get("since") or ""))
    if since is None:
        return None
    until = parse_datetime(str(value.get("until") or "")) if value.get("until") else None
    return Outage(since, str(value.get("error") or ""), until)


def outage() -> Outage | None:
    """The current outage, or None while the API server answers."""
    return _read(_OUTAGE)


def last_outage() -> Outage | None:
    """The most recent outage that ended (kept for a day, for messages about it)."""
    return _read(_LAST_OUTAGE)


def report_failure(error: kube.KubeError) -> Outage | None:
    """Record what a request saw; opens the breaker when the API server did not answer at all.
    Returns the outage in progress (None when the error was an answer, e.g. a 500)."""
    if not error.unreachable:
        return outage()
    now = timezone.now()
    # add(): the first process to notice sets "since"; later ones keep it.
    if cache.add(_OUTAGE, {"since": now.isoformat(), "error": error.message[:300]}, timeout=None):
        log.warning("the API server is unreachable: %s", error.message)
    schedule_probe()
    return outage()


def report_success() -> bool:
    """The API server answered: close the breaker. Returns True when it was open (the caller then
    resumes the waiting changes, see :func:`resume_waiting`)."""
    current = outage()
    if current is None:
        return False
    if not cache.delete(_OUTAGE):
        return False  # another process closed it first and resumes the changes
    ended = {"since": current.since.isoformat(), "until": timezone.now().isoformat()}
    cache.set(_LAST_OUTAGE, ended, timeout=86400)
    log.warning("the API server answers again (%s)", Outage(current.since, "", timezone.now()).describe())
    return True


def schedule_probe(countdown: float = PROBE_INTERVAL) -> None:
    """One probe at a time, across every worker."""
    if cache.add(_PROBE_SCHEDULED, 1, timeout=max(2, int(countdown * 5))):
        enqueue_probe(countdown=countdown)


def probe() -> bool:
    """Ask the API server whether it answers; on the first answer after an outage resume the waiting
    changes, otherwise probe again in a second. Returns whether it answered."""
    cache.delete(_PROBE_SCHEDULED)
    if outage() is None and not waiting_changes().exists():
        return True
    try:
        kube.probe()
    except kube.KubeError as exc:
        if exc.unreachable or exc.transient:
            report_failure(exc)
            schedule_probe()
            return False
    if report_success() or outage() is None:
        resume_waiting()
    return True


def waiting_changes() -> QuerySet[ChangeRequest]:
    return ChangeRequest.objects.filter(state=ChangeState.QUEUED, waiting_reason=WAITING_FOR_API)


def resume_waiting() -> int:
    """Send every change that waited for the API server again, oldest first. The worker's concurrency
    bounds how many push at once; a change behind an older one of its namespace is started by that one."""
    ids = list(waiting_changes().order_by("id").values_list("pk", flat=True))
    now = timezone.now()
    resumed = 0
    for pk in ids:
        if ChangeRequest.objects.filter(pk=pk, state=ChangeState.QUEUED, waiting_reason=WAITING_FOR_API).update(
            waiting_reason="", waiting_since=None, message="the API server is back: applying", updated_at=now
        ):
            enqueue_apply(pk)
            resumed += 1
    return resumed
