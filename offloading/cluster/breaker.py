"""Whether the API server is reachable, known once for every process (a circuit breaker in the shared
cache, Redis in production).

The worker and the watcher report what their requests saw. While the API server is unreachable,
changes wait instead of spending their retry budget (:mod:`offloading.changes.apply` parks them), and
one probe a second asks the API server whether it is back; the first probe that gets an answer closes
the breaker and sends every waiting change again, oldest first. The pages, the API and the freshness
badge read :func:`outage` to say "API server unreachable since HH:MM".

Per managed cluster (issue 28): every function takes the cluster (``managed``: a ManagedCluster, its
primary key, or None for the default one). The default cluster keeps the keys of single-cluster versions
(``liqo-dash:api-outage`` ...), another appends ``:<pk>``; its probe asks its own API server and resumes
only its own waiting changes. So a change of cluster B waits while B is unreachable, and A's go on.
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
from offloading.cluster.managed import talking_to
from offloading.models import ChangeRequest, ManagedCluster
from offloading.models.fleet import ManagedRef, is_default, managed_pk
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


def _key(base: str, managed: ManagedRef) -> str:
    """A cache key of ``managed``'s breaker: ``base`` for the default cluster, ``base:<pk>`` for another."""
    return base if is_default(managed) else f"{base}:{managed_pk(managed)}"


def _probe_arg(managed: ManagedRef) -> int | None:
    """What the probe task is sent with: nothing for the default cluster (as before), else its pk."""
    return None if is_default(managed) else managed_pk(managed)


def _read(key: str) -> Outage | None:
    value = cache.get(key)
    if not isinstance(value, dict):
        return None
    since = parse_datetime(str(value.get("since") or ""))
    if since is None:
        return None
    until = parse_datetime(str(value.get("until") or "")) if value.get("until") else None
    return Outage(since, str(value.get("error") or ""), until)


def outage(managed: ManagedRef = None) -> Outage | None:
    """The current outage of ``managed``'s API server (None: the default cluster's), or None while it answers."""
    return _read(_key(_OUTAGE, managed))


def last_outage(managed: ManagedRef = None) -> Outage | None:
    """The most recent outage that ended (kept for a day, for messages about it)."""
    return _read(_key(_LAST_OUTAGE, managed))


def report_failure(error: kube.KubeError, managed: ManagedRef = None) -> Outage | None:
    """Record what a request to ``managed``'s API server saw; opens its breaker when the API server did
    not answer at all. Returns the outage in progress (None when the error was an answer, e.g. a 500)."""
    if not error.unreachable:
        return outage(managed)
    now = timezone.now()
    # add(): the first process to notice sets "since"; later ones keep it.
    if cache.add(_key(_OUTAGE, managed), {"since": now.isoformat(), "error": error.message[:300]}, timeout=None):
        where = "" if is_default(managed) else f" of managed cluster {managed_pk(managed)}"
        log.warning("the API server%s is unreachable: %s", where, error.message)
    schedule_probe(managed=managed)
    return outage(managed)


def report_success(managed: ManagedRef = None) -> bool:
    """``managed``'s API server answered: close its breaker. Returns True when it was open (the caller
    then resumes the waiting changes, see :func:`resume_waiting`)."""
    current = outage(managed)
    if current is None:
        return False
    if not cache.delete(_key(_OUTAGE, managed)):
        return False  # another process closed it first and resumes the changes
    ended = {"since": current.since.isoformat(), "until": timezone.now().isoformat()}
    cache.set(_key(_LAST_OUTAGE, managed), ended, timeout=86400)
    log.warning("the API server answers again (%s)", Outage(current.since, "", timezone.now()).describe())
    return True


def schedule_probe(countdown: float = PROBE_INTERVAL, managed: ManagedRef = None) -> None:
    """One probe at a time per cluster, across every worker."""
    if cache.add(_key(_PROBE_SCHEDULED, managed), 1, timeout=max(2, int(countdown * 5))):
        enqueue_probe(countdown=countdown, managed=_probe_arg(managed))


def probe(managed: ManagedRef = None) -> bool:
    """Ask ``managed``'s API server whether it answers; on the first answer after an outage resume its
    waiting changes, otherwise probe again in a second. Returns whether it answered."""
    cache.delete(_key(_PROBE_SCHEDULED, managed))
    if outage(managed) is None and not waiting_changes(managed).exists():
        return True
    cluster = managed if isinstance(managed, ManagedCluster) or managed is None else None
    if cluster is None and managed is not None:
        cluster = ManagedCluster.objects.filter(pk=managed_pk(managed)).first()
        if cluster is None:
            return True  # removed since: nothing of it waits any more
    try:
        with talking_to(cluster):
            kube.probe()
    except kube.KubeError as exc:
        if exc.unreachable or exc.transient:
            report_failure(exc, managed)
            schedule_probe(managed=managed)
            return False
    if report_success(managed) or outage(managed) is None:
        resume_waiting(managed)
    return True


def waiting_changes(managed: ManagedRef = None) -> QuerySet[ChangeRequest]:
    """The changes of ``managed`` (None: the default cluster) that wait for its API server."""
    return ChangeRequest.objects.of(managed).filter(state=ChangeState.QUEUED, waiting_reason=WAITING_FOR_API)


def resume_waiting(managed: ManagedRef = None) -> int:
    """Send every change of ``managed`` that waited for its API server again, oldest first. The worker's
    concurrency bounds how many push at once; a change behind an older one of its namespace is started
    by that one."""
    ids = list(waiting_changes(managed).order_by("id").values_list("pk", flat=True))
    now = timezone.now()
    resumed = 0
    for pk in ids:
        if ChangeRequest.objects.filter(pk=pk, state=ChangeState.QUEUED, waiting_reason=WAITING_FOR_API).update(
            waiting_reason="", waiting_since=None, message="the API server is back: applying", updated_at=now
        ):
            enqueue_apply(pk, managed=_probe_arg(managed))
            resumed += 1
    return resumed
