"""Events are filed under the object they are about, wherever they are recorded: client-go records the
Events about a Namespace in ``default`` (``involvedObject.kind: Namespace``, ``involvedObject.name``: the
namespace), and they belong on that namespace's page, not on ``default``'s."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.urls import reverse
from django.utils import timezone

from offloading.models import Namespace
from offloading.models.inventory import KubeEvent, event_subject_namespace
from offloading.snapshot.inventory import EventSync

pytestmark = pytest.mark.django_db


def _event(uid: str, recorded_in: str, kind: str, name: str, namespace: str = "", **extra: Any) -> dict[str, Any]:
    return {
        "metadata": {"uid": uid, "namespace": recorded_in, "name": f"{name}.{uid}"},
        "involvedObject": {"kind": kind, "name": name, "namespace": namespace},
        "type": extra.get("type", "Warning"),
        "reason": extra.get("reason", "Something"),
        "message": extra.get("message", "about " + name),
        "lastTimestamp": "2026-01-01T10:00:00Z",
    }


def test_the_subject_of_an_event() -> None:
    assert event_subject_namespace({"kind": "Namespace", "name": "shop"}, "default") == "shop"
    assert event_subject_namespace({"kind": "NamespaceOffloading", "name": "offloading", "namespace": "shop"}, "") == (
        "shop"
    )
    assert event_subject_namespace({"kind": "NamespaceOffloading", "name": "offloading"}, "shop") == "shop"


def test_a_namespace_event_recorded_in_default_reaches_the_namespace_page(admin_client: Any, fleet: Any) -> None:
    Namespace.objects.create(name="default")
    EventSync().apply(
        [
            ("ADDED", _event("e1", "default", "Namespace", "shop", reason="RemoteNamespaceFailed", message="denied")),
            ("ADDED", _event("e2", "shop", "NamespaceOffloading", "offloading", "shop", reason="Invalid")),
            ("ADDED", _event("e3", "default", "Namespace", "default", type="Normal", reason="OwnEvent")),
        ],
        timezone.now(),
    )
    about_shop = KubeEvent.objects.get(uid="e1")
    assert (about_shop.namespace, about_shop.recorded_in) == ("shop", "default")
    page = admin_client.get(reverse("offloading:namespace_detail", args=["shop"])).content.decode()
    assert "RemoteNamespaceFailed" in page and "Invalid" in page and "OwnEvent" not in page
    default = admin_client.get(reverse("offloading:namespace_detail", args=["default"])).content.decode()
    assert "RemoteNamespaceFailed" not in default and "OwnEvent" in default
    listing = admin_client.get(reverse("offloading:namespace_list")).content.decode()
    assert "2 warnings" in listing, "both warnings are counted on shop's row"


def test_an_update_moves_an_event_stored_before_under_its_subject(fleet: Any) -> None:
    KubeEvent.objects.create(
        uid="old", namespace="default", involved_kind="Namespace", involved_name="shop", type="Warning"
    )
    EventSync().apply([("MODIFIED", _event("old", "default", "Namespace", "shop"))], timezone.now())
    assert KubeEvent.objects.get(uid="old").namespace == "shop"


def test_the_migration_files_stored_events_under_their_subject(fleet: Any) -> None:
    KubeEvent.objects.create(
        uid="a", namespace="default", involved_kind="Namespace", involved_name="shop", type="Warning"
    )
    KubeEvent.objects.create(
        uid="b", namespace="shop", involved_kind="NamespaceOffloading", involved_name="offloading", type="Warning"
    )
    migration = importlib.import_module("offloading.migrations.0011_event_subject")
    migration.file_under_subject(django_apps, None)
    assert dict(KubeEvent.objects.values_list("uid", "namespace")) == {"a": "shop", "b": "shop"}
