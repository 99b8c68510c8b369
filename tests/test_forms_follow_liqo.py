"""Forms follow Liqo: the remote namespace name only with SelectedName (disabled otherwise, refused if
sent anyway), and placeholders taken from labels that exist in the fleet."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from tests.browser import login


@pytest.mark.django_db
def test_a_remote_name_with_another_strategy_is_refused_on_its_field(admin_client: Any, fleet: Any) -> None:
    response = admin_client.post(
        reverse("offloading:namespace_offload", args=["payments"]),
        {
            "namespace_mapping_strategy": "DefaultName",
            "remote_namespace_name": "elsewhere",
            "pod_offloading_strategy": "LocalAndRemote",
            "expected_generation": 0,
        },
    )
    form = response.context["form"]
    assert "only used with SelectedName" in " ".join(form.errors["remote_namespace_name"])
    from offloading.models import ChangeRequest

    assert not ChangeRequest.objects.exists()


@pytest.mark.django_db
def test_placeholders_match_labels_of_the_fleet(admin_client: Any, fleet: Any) -> None:
    offload = admin_client.get(reverse("offloading:namespace_offload", args=["payments"]))
    placeholder = offload.context["form"].fields["cluster_selector"].widget.attrs["placeholder"]
    assert placeholder == "topology.kubernetes.io/region in (eu-south, eu-west)"
    bulk = admin_client.get(reverse("offloading:bulk"))
    assert bulk.context["form"].fields["namespace_selector"].widget.attrs["placeholder"] == "team=pay"


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_remote_name_is_enabled_only_for_selected_name(
    browser_page: Any,
    live_server: Any,
    admin_user: Any,
    fleet: Any,
) -> None:
    page = browser_page
    login(page, live_server)
    page.goto(f"{live_server.url}/namespaces/payments/offload/")
    remote = page.locator("input[name=remote_namespace_name]")
    expect(remote).to_be_disabled()
    page.select_option("select[name=namespace_mapping_strategy]", "SelectedName")
    expect(remote).to_be_enabled()
    page.select_option("select[name=namespace_mapping_strategy]", "EnforceSameName")
    expect(remote).to_be_disabled()
