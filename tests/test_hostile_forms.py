"""The selector limits in the pages: the offload form, its live preview and the bulk form answer with an
error on the field, the same limits as the API (liqo_rules.limits)."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from liqo_rules import limits
from offloading.models import ChangeRequest

pytestmark = pytest.mark.django_db

SPEC = {"namespace_mapping_strategy": "DefaultName", "pod_offloading_strategy": "LocalAndRemote"}


def _values(n: int) -> str:
    return "region in (" + ",".join(f"v{i}" for i in range(n)) + ")"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("\n".join(["region=eu"] * (limits.MAX_TERMS + 1)), "51 terms"),
        (",".join(f"k{i}" for i in range(limits.MAX_EXPRESSIONS + 1)), "51 expressions"),
        (_values(limits.MAX_VALUES + 1), "101 values"),
    ],
)
def test_the_offload_form_and_its_preview_refuse_a_selector_over_the_limits(
    admin_client: Any,
    fleet: Any,
    text: str,
    words: str,
) -> None:
    data = {**SPEC, "cluster_selector": text}
    preview = admin_client.post(reverse("offloading:namespace_offload_preview", args=["payments"]), data)
    assert preview.status_code == 200 and words in preview.content.decode()
    response = admin_client.post(reverse("offloading:namespace_offload", args=["payments"]), data)
    assert response.status_code == 200
    assert any(words in m for m in response.context["form"].errors["cluster_selector"])
    assert not ChangeRequest.objects.exists()


def test_a_selector_at_the_limits_previews(admin_client: Any, fleet: Any) -> None:
    line = ",".join([_values(limits.MAX_VALUES)] + [f"k{i}" for i in range(limits.MAX_EXPRESSIONS - 1)])
    data = {**SPEC, "cluster_selector": "\n".join([line] * limits.MAX_TERMS)}
    preview = admin_client.post(reverse("offloading:namespace_offload_preview", args=["payments"]), data)
    assert preview.status_code == 200
    assert "Fix before submitting" not in preview.content.decode()


def test_the_bulk_form_refuses_a_namespace_selector_over_the_limits(admin_client: Any, fleet: Any) -> None:
    for selector, words in ((_values(limits.MAX_VALUES + 1), "101 values"), ("%", '"%"')):
        response = admin_client.post(
            reverse("offloading:bulk"), {**SPEC, "action": "unoffload", "namespace_selector": selector}
        )
        assert response.status_code == 200
        assert any(words in m for m in response.context["form"].errors["namespace_selector"]), selector
    assert not ChangeRequest.objects.exists()


def test_the_namespaces_page_filters_by_offloaded_with_the_api_filterset(admin_client: Any, fleet: Any) -> None:
    page = admin_client.get(reverse("offloading:namespace_list"), {"offloaded": "true"})
    names = [ns.name for ns in page.context["filterset"].qs]
    assert names == ["shop"] and 'name="offloaded"' in page.content.decode()
    page = admin_client.get(reverse("offloading:namespace_list"), {"offloaded": "false"})
    assert [ns.name for ns in page.context["filterset"].qs] == ["payments"]
    page = admin_client.get(reverse("offloading:namespace_list"), {"offloaded": "maybe"})
    assert page.status_code == 200 and page.context["filterset"].errors["offloaded"]
