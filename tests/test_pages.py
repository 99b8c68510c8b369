"""Pages and htmx fragments, on a snapshot written directly into the database (no cluster needed)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from offloading.choices import ChangeState
from offloading.models import ChangeRequest, Cluster, ClusterOffloading, Namespace, VirtualNode
from tests.fixtures.snapshot import READY_SPEC

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "url",
    [
        reverse("offloading:namespace_list"),
        reverse("offloading:cluster_list"),
        reverse("offloading:change_list"),
        reverse("offloading:audit_list"),
        reverse("offloading:namespace_offload", args=["payments"]),
    ],
)
def test_pages_require_login(client: Any, fleet: Any, url: str) -> None:
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_namespace_list_shows_phase_and_filters(admin_client: Any, fleet: Any) -> None:
    page = admin_client.get(reverse("offloading:namespace_list")).content.decode()
    assert "payments" in page and "shop" in page and "Ready" in page
    filtered = admin_client.get(reverse("offloading:namespace_list"), {"phase": "none"}).content.decode()
    assert "payments" in filtered and ">shop<" not in filtered
    by_cluster = admin_client.get(reverse("offloading:namespace_list"), {"cluster": "milan"}).content.decode()
    assert ">shop<" in by_cluster and ">payments<" not in by_cluster


def test_namespace_list_serves_only_the_table_to_htmx(admin_client: Any, fleet: Any) -> None:
    response = admin_client.get(reverse("offloading:namespace_list"), {"q": "pay"}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert "<html" not in body and "payments" in body and ">shop<" not in body
    assert "HX-Request" in response["Vary"]


def test_cluster_list_shows_health_labels_and_hosted_namespaces(admin_client: Any, fleet: Any) -> None:
    page = admin_client.get(reverse("offloading:cluster_list")).content.decode()
    assert "milan" in page and "naples" in page
    assert "topology.kubernetes.io/region=eu-south" in page
    assert "node not ready" in page
    assert '?cluster=milan">1<' in page


def test_preview_explains_which_clusters_match_and_why_not(admin_client: Any, fleet: Any) -> None:
    response = admin_client.post(
        reverse("offloading:namespace_offload_preview", args=["payments"]),
        {
            "namespace_mapping_strategy": "DefaultName",
            "pod_offloading_strategy": "Remote",
            "cluster_selector": "topology.kubernetes.io/region in (eu-west)",
        },
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert "1 of 2 clusters selected" in body
    assert "eu-south" in body  # the reason naples is excluded names its region
    assert "payments-rome" in body  # DefaultName uses the discovered local cluster id
    assert "virtual-node.liqo.io/not-allowed" in body  # the pod mutation preview adds the toleration
    assert "kind: NamespaceOffloading" in body


def test_a_very_large_selector_is_printed_once_in_the_preview(admin_client: Any, fleet: Any) -> None:
    url = reverse("offloading:namespace_offload_preview", args=["payments"])
    form = {"namespace_mapping_strategy": "DefaultName", "pod_offloading_strategy": "Remote"}
    # 11 terms of 50 expressions: 550, above the 500 the preview prints three times.
    lines = [",".join(f"!absent-{t}-{e}" for e in range(50)) for t in range(11)]
    body = admin_client.post(url, {**form, "cluster_selector": "\n".join(lines)}).content.decode()
    assert "The selector has 550 expressions" in body
    assert body.count("absent-10-49") == 1  # the manifest only
    assert "kind: NamespaceOffloading" in body and "ClusterSelector (NodeSelector)" not in body
    small = admin_client.post(url, {**form, "cluster_selector": lines[0]}).content.decode()
    assert "ClusterSelector (NodeSelector)" in small and "selector-not-repeated" not in small
    assert small.count("absent-0-49") >= 3  # the manifest, the selector and the pod's node affinity (and more)


def test_preview_reports_selector_errors_inline_with_status_200(admin_client: Any, fleet: Any) -> None:
    response = admin_client.post(
        reverse("offloading:namespace_offload_preview", args=["payments"]),
        {
            "namespace_mapping_strategy": "DefaultName",
            "pod_offloading_strategy": "LocalAndRemote",
            "cluster_selector": "region in (eu-west",
        },
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert "Fix before submitting" in body
    assert "selector #1" in body


def test_offload_form_rejects_selected_name_without_a_name_on_the_field(admin_client: Any, fleet: Any) -> None:
    response = admin_client.post(
        reverse("offloading:namespace_offload", args=["payments"]),
        {"namespace_mapping_strategy": "SelectedName", "pod_offloading_strategy": "LocalAndRemote"},
    )
    assert response.status_code == 200
    assert "remote_namespace_name" in response.context["form"].errors
    assert not ChangeRequest.objects.exists()


def test_offload_form_records_a_queued_change(
    admin_client: Any, fleet: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = admin_client.post(
            reverse("offloading:namespace_offload", args=["payments"]),
            {
                "namespace_mapping_strategy": "SelectedName",
                "remote_namespace_name": "payments-eu",
                "pod_offloading_strategy": "Remote",
                "cluster_selector": "topology.kubernetes.io/region=eu-west\n!staging",
            },
        )
    change = ChangeRequest.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("offloading:change_detail", args=[change.pk])
    assert change.state == ChangeState.QUEUED and change.action == "offload" and change.requester_name == "admin"
    assert change.desired_spec["remoteNamespaceName"] == "payments-eu"
    assert len(change.desired_spec["clusterSelector"]["nodeSelectorTerms"]) == 2
    assert len(callbacks) == 1, "the change is enqueued once, after commit"


def test_edit_form_locks_the_immutable_fields(admin_client: Any, fleet: Any) -> None:
    response = admin_client.get(reverse("offloading:namespace_offload", args=["shop"]))
    form = response.context["form"]
    assert form.fields["namespace_mapping_strategy"].disabled
    assert form.fields["remote_namespace_name"].disabled
    assert form.initial["cluster_selector"] == "topology.kubernetes.io/region=eu-west"
    assert "Locked" in response.content.decode()


def test_edit_preview_shows_the_impact_and_the_restrictive_strategy_warning(admin_client: Any, fleet: Any) -> None:
    response = admin_client.post(
        reverse("offloading:namespace_offload_preview", args=["shop"]),
        {"pod_offloading_strategy": "Local", "cluster_selector": "topology.kubernetes.io/region=eu-south"},
    )
    body = response.content.decode()
    assert "+ naples" in body and "− milan" in body
    assert "more restrictive" in body


def test_unoffload_needs_the_namespace_name_typed(admin_client: Any, fleet: Any) -> None:
    url = reverse("offloading:namespace_unoffload", args=["shop"])
    page = admin_client.get(url).content.decode()
    assert "milan" in page  # what will be deleted
    response = admin_client.post(url, {"confirm": "sho"})
    assert response.status_code == 200 and not ChangeRequest.objects.exists()
    response = admin_client.post(url, {"confirm": "shop", "expected_generation": "3"})
    change = ChangeRequest.objects.get()
    assert change.action == "unoffload" and change.base_generation == 3


def test_status_fragment_stops_polling_when_settled(admin_client: Any, fleet: Any) -> None:
    url = reverse("offloading:namespace_status", args=["shop"])
    assert admin_client.get(url).status_code == 286
    Namespace.objects.filter(name="shop").update(offloading_generation=4)
    assert admin_client.get(url).status_code == 200, "keeps polling while Liqo has not observed the new generation"


def test_bulk_preview_lists_affected_and_skipped_namespaces(admin_client: Any, fleet: Any) -> None:
    Namespace.objects.create(name="payments-eu", labels={"team": "pay"})
    Namespace.objects.create(name="kube-system", labels={"team": "pay"})
    response = admin_client.post(
        reverse("offloading:bulk_preview"),
        {
            "action": "offload",
            "namespace_selector": "team=pay",
            "namespace_mapping_strategy": "DefaultName",
            "pod_offloading_strategy": "LocalAndRemote",
        },
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert "2 namespaces will change" in body and "payments-eu" in body
    assert "kube-system" in body and "left out" in body


def test_a_bulk_update_that_loses_clusters_shows_them_and_asks_for_the_count(admin_client: Any, fleet: Any) -> None:
    """shop runs on milan; a bulk update selecting only eu-south moves it to naples: milan is lost,
    with its remote namespace, and the changed selector is shown, never dropped silently."""
    Namespace.objects.filter(name="shop").update(labels={"env": "prod"})
    form = {
        "action": "offload",
        "namespace_selector": "env=prod",
        "namespace_mapping_strategy": "EnforceSameName",
        "pod_offloading_strategy": "LocalAndRemote",
        "cluster_selector": "topology.kubernetes.io/region in (eu-south)",
    }
    body = admin_client.post(reverse("offloading:bulk_preview"), form).content.decode()
    assert "1 loses clusters: 1 remote namespace" in body
    assert '<span class="chip bad">milan</span>' in body and '<span class="chip ok">naples</span>' in body
    assert "cluster selector: <del>topology.kubernetes.io/region=eu-west</del>" in body, body
    assert "Type 1 to confirm" in body
    assert admin_client.post(reverse("offloading:bulk"), form).status_code == 200
    assert not ChangeRequest.objects.exists()
    assert admin_client.post(reverse("offloading:bulk"), {**form, "confirm_count": "1"}).status_code == 302
    assert ChangeRequest.objects.get().namespace == "shop"


def test_a_bulk_offload_that_loses_nothing_needs_no_confirmation(admin_client: Any, fleet: Any) -> None:
    form = {
        "action": "offload",
        "namespace_selector": "team=pay",
        "namespace_mapping_strategy": "DefaultName",
        "pod_offloading_strategy": "LocalAndRemote",
    }
    assert "to confirm" not in admin_client.post(reverse("offloading:bulk_preview"), form).content.decode()
    assert admin_client.post(reverse("offloading:bulk"), form).status_code == 302


def test_a_late_bulk_preview_keeps_a_typed_count_only_while_it_still_matches(admin_client: Any, fleet: Any) -> None:
    Namespace.objects.filter(name="shop").update(labels={"env": "prod"})
    form = {
        "action": "unoffload",
        "namespace_selector": "env=prod",
        "namespace_mapping_strategy": "DefaultName",
        "pod_offloading_strategy": "LocalAndRemote",
    }

    def box(typed: str) -> str:
        body = admin_client.post(reverse("offloading:bulk_preview"), {**form, "confirm_count": typed}).content.decode()
        tag = re.search(r'<input[^>]*name="confirm_count"[^>]*>', body)
        assert tag, body
        found = re.search(r'value="([^"]*)"', tag.group(0))
        return found.group(1) if found else ""

    assert box("1") == "1"  # the admin's confirmation survives a preview that lands after it
    assert box("2") == ""  # a count that is not the number of namespaces does not
    assert box("") == ""


def test_bulk_rejects_an_empty_or_invalid_selector_on_the_field(admin_client: Any, fleet: Any) -> None:
    for selector in ("", "team in (pay"):
        response = admin_client.post(
            reverse("offloading:bulk"),
            {
                "action": "unoffload",
                "namespace_selector": selector,
                "namespace_mapping_strategy": "DefaultName",
                "pod_offloading_strategy": "LocalAndRemote",
            },
        )
        assert response.status_code == 200
        assert response.context["form"].errors.get("namespace_selector"), selector
    assert not ChangeRequest.objects.exists()


def test_bulk_unoffload_records_one_change_per_namespace_and_shows_progress(admin_client: Any, fleet: Any) -> None:
    Namespace.objects.filter(name="shop").update(labels={"env": "prod"})
    Namespace.objects.create(name="cart", labels={"env": "prod"})  # not offloaded: skipped
    form = {
        "action": "unoffload",
        "namespace_selector": "env=prod",
        "namespace_mapping_strategy": "DefaultName",
        "pod_offloading_strategy": "LocalAndRemote",
    }
    # Unoffloading deletes the remote namespaces: not without the typed count of namespaces.
    for typed, says in (("", "type 1 (the number of namespaces) to confirm"), ("2", "You typed 2, but 1 namespaces")):
        refused = admin_client.post(reverse("offloading:bulk"), {**form, "confirm_count": typed})
        assert refused.status_code == 200 and says in refused.content.decode()
        assert 'name="confirm_count"' in refused.content.decode()  # the preview is shown again, with the box
        assert not ChangeRequest.objects.exists()
    response = admin_client.post(reverse("offloading:bulk"), {**form, "confirm_count": "1"})
    assert response.status_code == 302
    change = ChangeRequest.objects.get()
    assert change.namespace == "shop" and change.action == "unoffload" and change.bulk is not None
    bulk = change.bulk
    assert bulk.total == 1 and bulk.skipped == [{"namespace": "cart", "reason": 'namespace "cart" is not offloaded'}]
    progress = admin_client.get(reverse("offloading:bulk_progress", args=[bulk.pk]))
    assert progress.status_code == 200 and "0 / 1" in progress.content.decode()
    ChangeRequest.objects.filter(pk=change.pk).update(state=ChangeState.APPLIED)
    assert admin_client.get(reverse("offloading:bulk_progress", args=[bulk.pk])).status_code == 286


def test_an_offload_form_loaded_before_someone_else_offloaded_is_refused(admin_client: Any, fleet: Any) -> None:
    page = admin_client.get(reverse("offloading:namespace_offload", args=["payments"]))
    assert page.context["form"].initial["expected_generation"] == 0
    Namespace.objects.filter(name="payments").update(
        offloaded=True, offloading_spec=READY_SPEC, offloading_generation=1, offloading_phase="Ready"
    )
    response = admin_client.post(
        reverse("offloading:namespace_offload", args=["payments"]),
        {
            "namespace_mapping_strategy": "EnforceSameName",
            "pod_offloading_strategy": "Local",
            "expected_generation": "0",
        },
    )
    assert response.status_code == 200
    form = response.context["form"]  # the edit form of what is there now, saying why (not a dead end)
    assert "offloaded by someone else" in form.stale_message
    assert form.editing and form.initial["expected_generation"] == 1
    assert not ChangeRequest.objects.exists()


def test_absurd_hidden_values_are_form_errors_not_500s(admin_client: Any, fleet: Any) -> None:
    big = str(10**30)
    response = admin_client.post(
        reverse("offloading:namespace_offload", args=["payments"]),
        {"namespace_mapping_strategy": "DefaultName", "pod_offloading_strategy": "Local", "expected_generation": big},
    )
    assert response.status_code == 200 and "expected_generation" in response.context["form"].errors
    response = admin_client.post(
        reverse("offloading:namespace_unoffload", args=["shop"]), {"confirm": "shop", "expected_generation": big}
    )
    assert response.status_code == 200 and not ChangeRequest.objects.exists()


def test_bulk_refuses_one_selected_name_for_many_namespaces(admin_client: Any, fleet: Any) -> None:
    response = admin_client.post(
        reverse("offloading:bulk"),
        {
            "action": "offload",
            "namespace_selector": "team=pay",
            "namespace_mapping_strategy": "SelectedName",
            "remote_namespace_name": "shared",
            "pod_offloading_strategy": "LocalAndRemote",
        },
    )
    assert response.status_code == 200 and not ChangeRequest.objects.exists()
    assert "SelectedName" in str(response.context["form"].errors)


def test_namespaces_filter_by_label_selector_and_explain_a_bad_one(admin_client: Any, fleet: Any) -> None:
    Namespace.objects.create(name="cart", labels={"team": "shop", "env": "dev"})
    Namespace.objects.create(name="cart-prod", labels={"team": "shop", "env": "prod"})
    body = admin_client.get(reverse("offloading:namespace_list"), {"selector": "team=shop,env!=dev"}).content.decode()
    assert ">cart-prod<" in body and ">cart<" not in body and ">payments<" not in body
    bad = admin_client.get(reverse("offloading:namespace_list"), {"selector": "team in (shop"}, HTTP_HX_REQUEST="true")
    assert bad.status_code == 200 and "selector:" in bad.content.decode()
    assert ">cart-prod<" not in bad.content.decode()


def test_the_fleet_matrix_shows_each_offloaded_namespace_per_cluster(admin_client: Any, fleet: Any) -> None:
    response = admin_client.get(reverse("offloading:fleet_matrix"))
    assert response.status_code == 200
    rows = response.context["rows"]
    assert [ns.name for ns, _ in rows] == ["shop"]  # only offloaded namespaces
    clusters = response.context["clusters"]
    cells = re.findall(r'<td class="([^"]*)" title="([^"]*)">([^<]*)</td>', str(rows[0][1]))
    assert len(cells) == len(clusters)
    by_cluster = {title.split(":")[0]: (cls, title, mark) for cls, title, mark in cells if title}
    assert by_cluster["milan"] == ("cell ok", "milan: NamespaceCreated", "✓")
    assert by_cluster["naples"][1].endswith("(not selected)")
    assert "✓" in response.content.decode()


def test_the_fleet_matrix_pages_its_clusters(admin_client: Any, fleet: Any, monkeypatch: Any) -> None:
    from offloading.views import fleet as fleet_views

    monkeypatch.setattr(fleet_views, "MATRIX_COLUMNS", 1)
    every = sorted(Cluster.objects.values_list("cluster_id", flat=True))
    assert len(every) >= 2
    seen = []
    for number in range(1, len(every) + 1):
        response = admin_client.get(reverse("offloading:fleet_matrix") + f"?columns={number}")
        seen += response.context["clusters"]
        cells = re.findall(r"<td class=", str(response.context["rows"][0][1]))
        assert len(cells) == len(response.context["clusters"]) == 1
    assert seen == every
    body = admin_client.get(reverse("offloading:fleet_matrix")).content.decode()
    assert "Next clusters" in body, body[body.find("matrix-wrap") :]


def test_the_cluster_list_pages_its_clusters(admin_client: Any, fleet: Any, monkeypatch: Any) -> None:
    from offloading.views import fleet as fleet_views

    monkeypatch.setattr(fleet_views, "CLUSTERS_PER_PAGE", 1)
    every = sorted(Cluster.objects.values_list("cluster_id", flat=True))
    first = admin_client.get(reverse("offloading:cluster_list"))
    second = admin_client.get(reverse("offloading:cluster_list") + "?page=2")
    shown = [row.cluster_id for row in first.context["rows"] + second.context["rows"]]
    assert shown == every[:2] and f"Page 1 of {len(every)}" in first.content.decode()


def test_reapply_keeps_the_fields_only_the_other_writer_changed(admin_client: Any, fleet: Any) -> None:
    """shop: I changed the pod strategy, someone else the cluster selector; re-applying mine changes
    the pod strategy and keeps their selector (never reverting it silently)."""
    from offloading.choices import ChangeAction

    base = {**READY_SPEC, "podOffloadingStrategy": "LocalAndRemote"}
    theirs = {
        **base,
        "clusterSelector": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "topology.kubernetes.io/region", "operator": "In", "values": ["eu-south"]}
                    ]
                }
            ]
        },
    }
    Namespace.objects.filter(name="shop").update(offloading_spec=theirs, offloading_generation=4)
    conflicted = ChangeRequest.objects.create(
        namespace="shop",
        action=ChangeAction.UPDATE,
        base_spec=base,
        desired_spec={**base, "podOffloadingStrategy": "Local"},
        state=ChangeState.CONFLICT,
        requester_name="admin",
        source="web",
    )
    page = admin_client.get(reverse("offloading:change_detail", args=[conflicted.pk])).content.decode()
    assert "only they changed it" in page and "only you changed it" in page and "Both changed it" not in page
    # LocalAndRemote to Local is destructive: the re-apply asks for confirmation first, with why.
    asked = admin_client.post(reverse("offloading:change_reapply", args=[conflicted.pk]))
    assert asked.status_code == 200 and "from LocalAndRemote to Local" in asked.content.decode()
    response = admin_client.post(reverse("offloading:change_reapply", args=[conflicted.pk]), {"confirm": "on"})
    assert response.status_code == 302
    again = ChangeRequest.objects.exclude(pk=conflicted.pk).get()
    assert again.desired_spec["podOffloadingStrategy"] == "Local"
    assert again.desired_spec["clusterSelector"] == theirs["clusterSelector"]
    assert again.base_generation == 4


def test_the_change_page_and_the_namespace_page_show_the_same_cluster_rows(admin_client: Any, fleet: Any) -> None:
    from offloading.choices import ChangeAction

    change = ChangeRequest.objects.create(
        namespace="shop",
        action=ChangeAction.UPDATE,
        desired_spec=READY_SPEC,
        state=ChangeState.APPLIED,
        requester_name="admin",
        source="web",
    )
    change_page = admin_client.get(reverse("offloading:change_detail", args=[change.pk])).content.decode()
    namespace_page = admin_client.get(reverse("offloading:namespace_detail", args=["shop"])).content.decode()
    assert "has not reported per-cluster status" not in change_page

    def rows(page: str) -> list[str]:
        import re

        table = page[page.index("<th>Cluster</th>") :]
        return re.findall(r"/clusters/(?:milan|naples)/\">(milan|naples)</a></td>", table[: table.index("</table>")])

    assert rows(change_page) == rows(namespace_page) == ["milan", "naples"]


def test_the_failed_changes_of_a_bulk_can_be_retried(admin_client: Any, fleet: Any) -> None:
    from offloading.choices import ChangeAction
    from offloading.models import BulkRequest

    bulk = BulkRequest.objects.create(action="offload", namespace_selector="team=pay", requester_name="admin", total=2)
    spec = {"namespaceMappingStrategy": "DefaultName", "podOffloadingStrategy": "LocalAndRemote"}
    for name, state in (("payments", ChangeState.FAILED), ("shop", ChangeState.APPLIED)):
        ChangeRequest.objects.create(
            namespace=name,
            action=ChangeAction.OFFLOAD,
            desired_spec=spec,
            state=state,
            requester_name="admin",
            bulk=bulk,
        )
    progress = admin_client.get(reverse("offloading:bulk_progress", args=[bulk.pk])).content.decode()
    assert "Retry the 1 failed change" in progress
    response = admin_client.post(reverse("offloading:bulk_retry", args=[bulk.pk]))
    retry = BulkRequest.objects.exclude(pk=bulk.pk).get()
    assert response.status_code == 302 and response["Location"] == reverse("offloading:bulk_detail", args=[retry.pk])
    assert [(c.namespace, c.state) for c in retry.changes.all()] == [("payments", ChangeState.QUEUED)]
    # Nothing failed in the retry: nothing to retry there.
    assert admin_client.post(reverse("offloading:bulk_retry", args=[retry.pk])).status_code == 302
    assert BulkRequest.objects.count() == 2


def test_drift_shows_what_changed_and_who_with_accept_and_reapply(admin_client: Any, fleet: Any) -> None:
    from offloading.choices import AuditAction, ChangeAction, Source
    from offloading.models import AuditEvent

    mine = ChangeRequest.objects.create(
        namespace="shop",
        action=ChangeAction.UPDATE,
        desired_spec=READY_SPEC,
        state=ChangeState.APPLIED,
        requester_name="admin",
        source="web",
    )
    theirs = {**READY_SPEC, "podOffloadingStrategy": "Remote"}
    Namespace.objects.filter(name="shop").update(offloading_spec=theirs, offloading_generation=4)
    AuditEvent(
        user_name="kubectl-edit",
        source=Source.EXTERNAL,
        action=AuditAction.DRIFT_UPDATED,
        namespace="shop",
        before=READY_SPEC,
        after=theirs,
        outcome="observed",
    ).save()
    page = admin_client.get(reverse("offloading:namespace_detail", args=["shop"])).content.decode()
    assert 'id="drift"' in page and "<code>kubectl-edit</code>" in page
    assert "<del>LocalAndRemote</del>" in page and "<ins>Remote</ins>" in page
    assert f"Re-apply mine (change #{mine.pk})" in page and "Accept theirs" in page

    response = admin_client.post(reverse("offloading:drift_reapply", args=["shop"]))
    again = ChangeRequest.objects.exclude(pk=mine.pk).get()
    assert response.status_code == 302 and again.desired_spec == mine.desired_spec and again.base_generation == 4
    assert 'id="drift"' not in admin_client.get(reverse("offloading:namespace_detail", args=["shop"])).content.decode()

    AuditEvent(user_name="argocd", source=Source.EXTERNAL, action=AuditAction.DRIFT_UPDATED, namespace="shop").save()
    assert 'id="drift"' in admin_client.get(reverse("offloading:namespace_detail", args=["shop"])).content.decode()
    assert admin_client.post(reverse("offloading:drift_accept", args=["shop"])).status_code == 302
    accepted = AuditEvent.objects.get(action=AuditAction.DRIFT_ACCEPTED)
    assert accepted.user_name == "admin" and accepted.namespace == "shop"
    assert 'id="drift"' not in admin_client.get(reverse("offloading:namespace_detail", args=["shop"])).content.decode()


def test_list_rows_show_a_few_cluster_chips_and_how_many_more(admin_client: Any, fleet: Any, monkeypatch: Any) -> None:
    from offloading.views import rows as row_views

    monkeypatch.setattr(row_views, "CHIPS_PER_ROW", 1)
    ClusterOffloading.objects.filter(namespace__name="shop").update(selected=True)
    selected = sorted(
        ClusterOffloading.objects.filter(namespace__name="shop", selected=True).values_list("cluster_id", flat=True)
    )
    assert len(selected) >= 2
    body = admin_client.get(reverse("offloading:namespace_list") + "?name=shop").content.decode()
    row = body[body.index('href="/namespaces/shop/"') :]
    row = row[: row.index("</tr>")]
    chips = re.findall(r'<span class="chip [a-z]+" title="[^"]+">([^<]+)</span>', row)
    assert chips == selected[:1]
    assert f'href="/namespaces/shop/#ns-status">+{len(selected) - 1} more</a>' in row


def test_rows_built_in_python_escape_what_the_cluster_reports(admin_client: Any, fleet: Any) -> None:
    """The list chips, the matrix cells and the cluster list's labels are built without the template
    engine: a hostile value from the cluster is still escaped."""
    hostile = '<img src=x onerror="alert(1)">'
    ClusterOffloading.objects.filter(namespace__name="shop").update(selected=True, state=hostile)
    VirtualNode.objects.update(labels={"evil": hostile})
    for url in (
        reverse("offloading:namespace_list"),
        reverse("offloading:fleet_matrix"),
        reverse("offloading:cluster_list"),
    ):
        body = admin_client.get(url).content.decode()
        assert hostile not in body, url
        assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in body, url
