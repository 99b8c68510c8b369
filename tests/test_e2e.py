"""The walking skeleton end to end: web form -> outbox -> real Redis -> real Celery worker -> sandbox
over HTTP -> refresh (beat) -> status in the page; then unoffload."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse
from kubernetes.client.rest import ApiException

from offloading.choices import AuditAction, ChangeState
from offloading.models import AuditEvent, ChangeRequest, Namespace
from tests.fixtures.waits import wait_until

pytestmark = pytest.mark.e2e

SYSTEM = ("kube-system", "kube-public", "kube-node-lease", "default", "liqo")


def _free_namespace() -> Namespace:
    candidates = Namespace.objects.filter(offloaded=False).exclude(name__in=SYSTEM).exclude(name__startswith="liqo")
    namespace = candidates.order_by("name").first()
    assert namespace is not None, "the minimal scenario should have a namespace that is not offloaded"
    return namespace


def _get_offloading(k8s: Any, namespace: str) -> dict[str, Any] | None:
    try:
        return k8s.custom.get_namespaced_custom_object(
            "offloading.liqo.io", "v1beta1", namespace, "namespaceoffloadings", "offloading"
        )
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_offload_and_unoffload_through_the_web_form_with_a_real_worker(
    pipeline: Any, admin_client: Any, k8s: Any
) -> None:
    pipeline.start_worker()
    pipeline.start_beat()
    wait_until(lambda: Namespace.objects.exists(), 60, message="the first refresh by beat + worker")
    namespace = _free_namespace()

    response = admin_client.post(
        reverse("offloading:namespace_offload", args=[namespace.name]),
        {
            "namespace_mapping_strategy": "DefaultName",
            "pod_offloading_strategy": "LocalAndRemote",
            "cluster_selector": "",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    change = ChangeRequest.objects.get(namespace=namespace.name)
    assert response["Location"] == reverse("offloading:change_detail", args=[change.pk])

    wait_until(lambda: ChangeRequest.objects.get(pk=change.pk).is_terminal, 60, message=f"change {change.pk} to finish")
    change.refresh_from_db()
    assert change.state == ChangeState.APPLIED, (change.message, pipeline.log("worker")[-3000:])

    obj = _get_offloading(k8s, namespace.name)
    assert obj is not None
    assert obj["spec"]["namespaceMappingStrategy"] == "DefaultName"
    assert obj["spec"]["podOffloadingStrategy"] == "LocalAndRemote"
    assert obj["metadata"]["annotations"]["liqo-dash.io/change-id"] == str(change.pk)

    wait_until(
        lambda: Namespace.objects.get(pk=namespace.pk).offloading_phase == "Ready",
        60,
        message="the phase Ready in the snapshot",
    )
    status = admin_client.get(reverse("offloading:change_status", args=[change.pk]), HTTP_HX_REQUEST="true")
    assert status.status_code == 286, "polling must stop once the change is applied and the phase settled"
    assert "Ready" in status.content.decode()

    response = admin_client.post(reverse("offloading:namespace_unoffload", args=[namespace.name]), {"confirm": "nope"})
    assert response.status_code == 200 and "exactly to confirm" in response.content.decode()
    response = admin_client.post(
        reverse("offloading:namespace_unoffload", args=[namespace.name]), {"confirm": namespace.name}
    )
    assert response.status_code == 302
    removal = ChangeRequest.objects.filter(namespace=namespace.name).order_by("-id").first()
    assert removal is not None and removal.pk != change.pk
    wait_until(lambda: ChangeRequest.objects.get(pk=removal.pk).is_terminal, 60, message="the unoffload to finish")
    removal.refresh_from_db()
    assert removal.state == ChangeState.APPLIED, removal.message
    assert _get_offloading(k8s, namespace.name) is None
    wait_until(lambda: not Namespace.objects.get(pk=namespace.pk).offloaded, 30, message="the snapshot to catch up")

    actions = list(AuditEvent.objects.filter(namespace=namespace.name).order_by("id").values_list("action", flat=True))
    assert actions == [AuditAction.REQUESTED, AuditAction.APPLIED, AuditAction.REQUESTED, AuditAction.APPLIED]
