"""Two bulks pushed at once by two processes of one Celery worker keep the worker's bound on requests in
flight (``LIQO_DASH_KUBE_MAX_INFLIGHT``) in all, counted by the sandbox (offloading/cluster/slots.py):
each bulk task alone would keep the bound in flight, both together twice that."""

from __future__ import annotations

from typing import Any

import pytest
from django.db.models import Max, Min

from offloading.changes.bulk import request_bulk
from offloading.choices import ChangeAction, ChangeState, Source
from offloading.context import Actor
from offloading.models import ChangeRequest
from offloading.snapshot.refresh import refresh
from tests.fixtures.waits import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SPEC = {
    "namespaceMappingStrategy": "DefaultName",
    "podOffloadingStrategy": "LocalAndRemote",
    "clusterSelector": {"nodeSelectorTerms": []},
}
SYSTEM = Actor(None, "bench", Source.API, "req-inflight")
BOUND = 6
PER_BULK = 24


def test_two_bulks_at_once_keep_the_workers_bound(pipeline: Any, sandbox: Any, k8s: Any, settings: Any) -> None:
    settings.LIQO_DASH = {**settings.LIQO_DASH, "DRY_RUN_ON_SUBMIT": False}  # only the worker's requests
    for bulk in ("a", "b"):
        for i in range(PER_BULK):
            k8s.core.create_namespace({"metadata": {"name": f"inflight-{bulk}-{i:02d}", "labels": {"bulk": bulk}}})
    assert refresh().ok
    bulks = [request_bulk(ChangeAction.OFFLOAD, f"bulk={bulk}", dict(SPEC), SYSTEM) for bulk in ("a", "b")]
    assert [b.total for b in bulks] == [PER_BULK, PER_BULK]
    # Each request sent its one task; the worker (two processes) takes both at once.
    # Half a second per request: requests overlap even when a loaded machine is slow to issue them.
    sandbox.faults.set(latency=0.5)
    sandbox.wait_idle()
    sandbox.faults.reset_peak()
    pipeline.env["LIQO_DASH_KUBE_MAX_INFLIGHT"] = str(BOUND)
    pipeline.start_worker()
    changes = ChangeRequest.objects.filter(bulk__in=bulks)
    wait_until(
        lambda: not changes.filter(state__in=ChangeState.pending()).exists(),
        120,
        message="both bulks to be applied",
    )
    peak = sandbox.faults.peak_inflight
    sandbox.faults.clear()
    assert changes.filter(state=ChangeState.APPLIED).count() == 2 * PER_BULK, pipeline.log("worker")[-3000:]
    # Pushed at the same time, each by its own process ...
    spans = [
        ChangeRequest.objects.filter(bulk=b).aggregate(start=Min("claimed_at"), end=Max("finished_at")) for b in bulks
    ]
    assert spans[0]["start"] < spans[1]["end"] and spans[1]["start"] < spans[0]["end"], spans
    # ... and never more than the bound in flight in all (each alone would keep BOUND in flight).
    assert peak <= BOUND, f"{peak} requests in flight at once, the worker's bound is {BOUND}"
    assert peak >= BOUND // 2, f"only {peak} in flight at once: the bulks were not pushed in parallel"
