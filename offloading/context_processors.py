from __future__ import annotations

from functools import cached_property
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone
from django.utils.functional import SimpleLazyObject

from access import roles
from offloading import switcher
from offloading.audit.events import last_verification
from offloading.cluster import breaker as apihealth
from offloading.models import ManagedCluster, SnapshotState
from offloading.models.fleet import ManagedRef, current_managed
from offloading.snapshot import condition


def snapshot_state(request: HttpRequest) -> dict[str, Any]:
    """Every page shows how fresh the snapshot is (and says so loudly when it is stale). Only to a user with
    a role: the sign-in page and the "no role" page show neither the snapshot nor the cluster switcher,
    whose list would tell the managed clusters' names to someone who may read nothing of them."""
    if roles.role_of(getattr(request, "user", None)) is None:
        return {"liqo_dash_version": settings.LIQO_DASH_VERSION}
    return {
        "liqo_dash_version": settings.LIQO_DASH_VERSION,
        "audit_alert": _audit_alert(request.user),
        # The page's managed cluster (offloading/switcher.py): the prefix its links keep, and the header's
        # switcher, read only when the page shows the header (a live region's render never does).
        "cluster_base": switcher.base_of(request),
        "cluster_name": switcher.cluster_name(request),
        "cluster_switcher": SimpleLazyObject(lambda: switcher.switcher_of(request)),
        "outage_banner": OutageBanner(request),
        **freshness_context(current_managed(request)),
    }


class OutageBanner:
    """What the banner under the header says of the managed clusters that are out (their API server
    unreachable, their snapshot stale). Read lazily: a page whose clusters are fine asks only
    ``fleet_page`` (no query on a cluster's page), and a live region's render nothing.

    On a cluster's page (the default's plain paths, or ``/m/<name>/``) the banner speaks of that cluster
    (``snapshot_stale`` and ``api_outage`` are its own), naming it when several are managed; on a page
    across the fleet (the managed clusters, the fleet-wide list, a user's own pages) with
    several managed clusters it names the clusters that are out and says the others are fine."""

    def __init__(self, request: HttpRequest) -> None:
        self.request = request

    @cached_property
    def several(self) -> bool:
        return ManagedCluster.objects.count() > 1

    @cached_property
    def fleet_page(self) -> bool:
        """A page of no single cluster, with more than one managed cluster."""
        return not switcher.on_cluster_page(self.request) and self.several

    @cached_property
    def fleet_line(self) -> str:
        """On a page across the fleet: "milan unreachable since 10:02; rome fine" ("" when none is out)."""
        return condition.summary(condition.conditions()) if self.fleet_page else ""

    @cached_property
    def cluster(self) -> str:
        """The name of the page's cluster when several are managed ("" with one: the banner names none)."""
        if not self.several:
            return ""
        name = switcher.cluster_name(self.request)
        if name:
            return name
        found = ManagedCluster.objects.filter(pk=current_managed(self.request)).values_list("name", flat=True)
        return str(found.first() or "")


def _audit_alert(user: Any) -> str:
    """For admins: what is wrong with the audit trail, when the last verification found something."""
    if roles.role_of(user) != roles.ADMIN:
        return ""
    verdict = last_verification()
    if not verdict or verdict.get("ok", True):
        return ""
    return str(verdict.get("problem") or f"event {verdict.get('first_bad')} does not verify")


def freshness_context(managed: ManagedRef = None) -> dict[str, Any]:
    """The snapshot's age as the badge shows it: fresh, amber past two refresh intervals, red past five
    (the badge keeps ticking in the browser, static/js/liqo-dash.js), and why, when it is known; of the
    managed cluster ``managed`` (None: the default one)."""
    state = SnapshotState.get(managed)
    outage = apihealth.outage(managed)
    now = timezone.now()
    # How often the snapshot is marked fresh: beat's refresh interval when it refreshes, otherwise the
    # watcher's heartbeat (every 5 s while every watch is synced).
    interval = float(settings.LIQO_DASH["REFRESH_INTERVAL"]) or float(settings.LIQO_DASH["WATCH_HEARTBEAT"])
    age = (now - state.last_success_at).total_seconds() if state.last_success_at else None
    if age is None or age >= 5 * interval:
        level = "red"
    elif age >= 2 * interval:
        level = "amber"
    else:
        level = "fresh"
    if outage is not None:
        reason = f"The API server is unreachable since {timezone.localtime(outage.since):%H:%M:%S}."
    elif state.last_refresh_failed:
        reason = f"The last refresh failed: {state.last_error[:200]}"
    elif level != "fresh":
        reason = "No refresh arrived lately: is the watcher running?"
    else:
        reason = ""
    return {
        "snapshot": state,
        "snapshot_stale": state.is_stale(now),
        "api_outage": outage,
        "freshness_level": level,
        "freshness_reason": reason,
        "freshness_interval": f"{interval:g}",
        "freshness_now": now,
    }
