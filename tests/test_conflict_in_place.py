"""A stale edit is not a dead end: the edit form, refused because someone else changed the offloading
after it was loaded, comes back on the current version with the three-way view (base, theirs, mine) of
each field that differs, the fields only one side changed merged, and a mine/theirs choice where both
changed a field; the next Apply succeeds with both changes. And the edit preview lists every field the
edit changes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.urls import reverse

from offloading.models import ChangeRequest, Namespace
from tests.fixtures.snapshot import READY_SPEC

pytestmark = pytest.mark.django_db

EDIT = reverse("offloading:namespace_offload", args=["shop"])
PREVIEW = reverse("offloading:namespace_offload_preview", args=["shop"])
BOTH_REGIONS = "topology.kubernetes.io/region in (eu-south,eu-west)"


def _shown(response: Any) -> dict[str, str]:
    """What the browser would post back from the form the page shows (its values, unchanged)."""
    form = response.context["form"]
    data = {}
    for name in ("pod_offloading_strategy", "cluster_selector", "expected_generation"):
        value = form[name].value()
        data[name] = "" if value is None else str(value)
    for name in ("base_spec", "merge"):
        value = form[name].value()  # JSON text ("null": not carried, the page leaves it out)
        if value not in (None, "null"):
            data[name] = value if isinstance(value, str) else json.dumps(value)
    return data


def _someone_else_sets(**fields: Any) -> None:
    """Another writer's change, as the snapshot sees it once applied: a new spec, the next generation."""
    Namespace.objects.filter(name="shop").update(offloading_spec={**READY_SPEC, **fields}, offloading_generation=4)


@pytest.fixture
def no_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    from offloading.changes import requests as change_requests

    monkeypatch.setattr(change_requests, "enqueue_apply", lambda change_id, countdown=0: None)


def test_the_edit_form_carries_the_spec_it_was_loaded_from(admin_client: Any, fleet: Any) -> None:
    loaded = _shown(admin_client.get(EDIT))
    assert json.loads(loaded["base_spec"]) == READY_SPEC
    assert loaded["expected_generation"] == "3"
    assert "merge" not in loaded


def test_a_stale_edit_comes_back_merged_and_applies_both_changes(
    admin_client: Any,
    fleet: Any,
    no_queue: None,
) -> None:
    loaded = _shown(admin_client.get(EDIT))
    _someone_else_sets(podOffloadingStrategy="Remote")  # theirs: the pod strategy
    mine = {**loaded, "cluster_selector": BOTH_REGIONS}  # mine: the selector

    response = admin_client.post(EDIT, mine)
    assert response.status_code == 200
    assert not ChangeRequest.objects.exists()
    form = response.context["form"]
    assert "changed after you loaded it (generation 3 is now 4)" in form.stale_message
    rows = {row.field: row for row in form.merge_rows}
    assert set(rows) == {"podOffloadingStrategy", "clusterSelector"}
    pod, selector = rows["podOffloadingStrategy"], rows["clusterSelector"]
    assert (pod.base, pod.theirs, pod.mine, pod.automatic) == ("LocalAndRemote", "Remote", "LocalAndRemote", "theirs")
    assert selector.base == "topology.kubernetes.io/region=eu-west"
    assert selector.mine == "topology.kubernetes.io/region in (eu-south,eu-west)"
    assert selector.automatic == "mine" and not form.merge_conflicts
    body = response.content.decode()
    assert 'id="merge-view"' in body and "only they changed it" in body and "only you changed it" in body
    assert 'type="radio"' not in body  # nothing to choose

    again = _shown(response)
    # The new base: the current generation and spec; the fields hold both changes.
    assert again["expected_generation"] == "4"
    assert json.loads(again["base_spec"])["podOffloadingStrategy"] == "Remote"
    assert again["pod_offloading_strategy"] == "Remote" and again["cluster_selector"] == selector.mine

    response = admin_client.post(EDIT, again)
    change = ChangeRequest.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("offloading:change_detail", args=[change.pk])
    assert (change.desired_spec or {})["podOffloadingStrategy"] == "Remote"  # theirs, kept
    values = (change.desired_spec or {})["clusterSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
    assert values == ["eu-south", "eu-west"]  # mine, applied
    assert change.base_generation == 4


@pytest.mark.parametrize(("choice", "expected"), [("mine", "Local"), ("theirs", "Remote")])
def test_a_field_both_changed_needs_a_choice(
    admin_client: Any,
    fleet: Any,
    no_queue: None,
    choice: str,
    expected: str,
) -> None:
    loaded = _shown(admin_client.get(EDIT))
    _someone_else_sets(podOffloadingStrategy="Remote")
    response = admin_client.post(EDIT, {**loaded, "pod_offloading_strategy": "Local", "cluster_selector": BOTH_REGIONS})
    form = response.context["form"]
    assert [row.field for row in form.merge_conflicts] == ["podOffloadingStrategy"]
    body = response.content.decode()
    assert 'name="choice_podOffloadingStrategy" value="mine"' in body
    assert 'name="choice_podOffloadingStrategy" value="theirs"' in body
    again = _shown(response)
    assert again["pod_offloading_strategy"] == "Local"  # mine, until a choice says otherwise

    refused = admin_client.post(EDIT, again)
    assert refused.status_code == 200 and not ChangeRequest.objects.exists()
    errors = refused.context["form"].errors["pod_offloading_strategy"]
    assert errors == ["Pod offloading strategy was changed by you and by someone else: choose mine or theirs"]
    assert refused.context["form"].merge_conflicts, "the three-way view stays on the page"

    # Keeping mine turns their Remote into Local, which is destructive: confirmed.
    admin_client.post(EDIT, {**again, "choice_podOffloadingStrategy": choice, "confirm": "on"})
    change = ChangeRequest.objects.get()
    assert (change.desired_spec or {})["podOffloadingStrategy"] == expected
    assert (change.desired_spec or {})["clusterSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == [
        "eu-south",
        "eu-west",
    ]


def test_the_preview_follows_the_choice(admin_client: Any, fleet: Any) -> None:
    loaded = _shown(admin_client.get(EDIT))
    _someone_else_sets(podOffloadingStrategy="Remote")
    response = admin_client.post(EDIT, {**loaded, "pod_offloading_strategy": "Local"})
    again = _shown(response)
    preview = admin_client.post(PREVIEW, again)  # no choice yet: mine, and no error for it
    assert preview.context["spec"]["podOffloadingStrategy"] == "Local"
    assert "choose mine or theirs" not in preview.content.decode()
    preview = admin_client.post(PREVIEW, {**again, "choice_podOffloadingStrategy": "theirs"})
    assert preview.context["spec"]["podOffloadingStrategy"] == "Remote"
    preview = admin_client.post(PREVIEW, {**again, "choice_podOffloadingStrategy": "mine"})
    assert preview.context["spec"]["podOffloadingStrategy"] == "Local"


def test_a_stale_edit_already_in_the_cluster_says_nothing_is_left(
    admin_client: Any,
    fleet: Any,
    no_queue: None,
) -> None:
    loaded = _shown(admin_client.get(EDIT))
    _someone_else_sets(podOffloadingStrategy="Remote")
    response = admin_client.post(EDIT, {**loaded, "pod_offloading_strategy": "Remote"})
    form = response.context["form"]
    assert "nothing to change" in form.stale_message
    assert "you both made the same change" in response.content.decode()
    refused = admin_client.post(EDIT, _shown(response))
    assert "nothing to change" in " ".join(refused.context["form"].non_field_errors())
    assert not ChangeRequest.objects.exists()


def test_an_edit_of_an_offloading_removed_since_becomes_an_offload(
    admin_client: Any,
    fleet: Any,
    no_queue: None,
) -> None:
    loaded = _shown(admin_client.get(EDIT))
    Namespace.objects.filter(name="shop").update(offloaded=False, offloading_spec=None, offloading_generation=0)
    # The page is an offload form now, whose mapping strategy is required (the edit form had it locked).
    response = admin_client.post(EDIT, {**loaded, "pod_offloading_strategy": "Local"})
    assert "namespace_mapping_strategy" in response.context["form"].errors
    mine = {**loaded, "pod_offloading_strategy": "Local", "namespace_mapping_strategy": "EnforceSameName"}
    response = admin_client.post(EDIT, mine)
    form = response.context["form"]
    assert "unoffloaded after you loaded it" in form.stale_message
    assert not form.editing and not form.merge_rows
    assert form["expected_generation"].value() == 0
    assert form["pod_offloading_strategy"].value() == "Local"  # what was asked for is kept


def test_a_tampered_merge_view_is_ignored(admin_client: Any, fleet: Any, no_queue: None) -> None:
    loaded = _shown(admin_client.get(EDIT))
    tampered = {**loaded, "pod_offloading_strategy": "Local", "merge": '["not", "a view"]', "confirm": "on"}
    response = admin_client.post(EDIT, tampered)
    assert response.status_code == 302
    assert (ChangeRequest.objects.get().desired_spec or {})["podOffloadingStrategy"] == "Local"


def test_the_edit_preview_lists_every_field_change(admin_client: Any, fleet: Any) -> None:
    response = admin_client.post(
        PREVIEW,
        {"pod_offloading_strategy": "Remote", "cluster_selector": BOTH_REGIONS, "expected_generation": "3"},
    )
    assert response.context["field_changes"] == [
        ("pod offloading", "LocalAndRemote", "Remote"),
        ("cluster selector", "topology.kubernetes.io/region=eu-west", BOTH_REGIONS),
    ]
    body = response.content.decode()
    assert 'id="preview-field-changes"' in body
    assert "Pods already running on local nodes stay there" in body

    same = admin_client.post(
        PREVIEW,
        {"pod_offloading_strategy": "LocalAndRemote", "cluster_selector": "topology.kubernetes.io/region=eu-west"},
    )
    assert same.context["field_changes"] == []
    assert "Nothing changes yet" in same.content.decode()

    local = admin_client.post(PREVIEW, {"pod_offloading_strategy": "Local", "cluster_selector": ""})
    assert ("cluster selector", "topology.kubernetes.io/region=eu-west", "(every cluster)") in local.context[
        "field_changes"
    ]
    assert "Pods already running on local nodes" not in local.content.decode()


def test_the_offload_preview_lists_the_namespace_label(admin_client: Any, fleet: Any) -> None:
    response = admin_client.post(
        reverse("offloading:namespace_offload_preview", args=["payments"]),
        {"namespace_mapping_strategy": "DefaultName", "pod_offloading_strategy": "Remote", "label_namespace": "on"},
    )
    assert response.context["field_changes"] == [("namespace label liqo.io/scheduling-enabled", "(none)", "true")]
    assert "Pods already running on local nodes" not in response.content.decode()


GARBAGE = [
    {"clusterSelector": {"nodeSelectorTerms": ["x", 5, None]}, "podOffloadingStrategy": 5},
    {"clusterSelector": "x", "podOffloadingStrategy": [1]},
    {"clusterSelector": {"nodeSelectorTerms": [{"matchExpressions": ["y"]}]}},
]


@pytest.mark.parametrize("garbage", GARBAGE)
@pytest.mark.parametrize("url", [EDIT, PREVIEW])
def test_hidden_base_and_view_that_are_not_specs_are_never_a_500(
    admin_client: Any,
    fleet: Any,
    no_queue: None,
    garbage: dict[str, Any],
    url: str,
) -> None:
    view = {name: {"base": value, "theirs": value, "mine": 1} for name, value in garbage.items()}
    stale = {"pod_offloading_strategy": "Local", "expected_generation": "2", "base_spec": json.dumps(garbage)}
    response = admin_client.post(url, stale)
    assert response.status_code == 200
    if url == EDIT:  # a base that is no spec: the current version, without a three-way view
        assert response.context["form"].stale_message and not response.context["form"].merge_rows
    chosen = {"choice_clusterSelector": "theirs", "choice_podOffloadingStrategy": "theirs"}
    response = admin_client.post(url, {**stale, "expected_generation": "3", "merge": json.dumps(view), **chosen})
    assert response.status_code in (200, 302)
