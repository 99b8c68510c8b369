"""Change governance (issue 29): who may approve, expiry and windows with injected time, changed-meanwhile,
break glass, bulk approval, the API's answers, and the audit rows (sealed chain) of every step."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ImproperlyConfigured
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from access import roles
from access.models import Scope
from offloading.audit.trail import verify
from offloading.changes.bulk import request_bulk
from offloading.changes.requests import request_offload, request_unoffload
from offloading.choices import AlertKind, AuditAction, ChangeAction, ChangeState, Source
from offloading.context import Actor
from offloading.governance import approvals, beat, clock, decisions, facts, policy, windows
from offloading.models import Alert, Approval, ApprovalDecision, AuditEvent, ChangeRequest, Namespace, Schedule
from offloading.models.managed import ensure_configured
from tests.fixtures.snapshot import READY_SPEC
from tests.test_alerts import Receiver

# Real commits: what is sent to the worker is sent once the transaction that records it commits.
pytestmark = pytest.mark.django_db(transaction=True)

ROME = "Europe/Rome"
T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)  # a Wednesday, noon UTC (13:00 in Rome)


@pytest.fixture
def sent(monkeypatch: Any) -> dict[str, list[int]]:
    """What was sent to the worker (the apply and bulk tasks), instead of running it."""
    found: dict[str, list[int]] = {"apply": [], "bulk": []}
    monkeypatch.setattr("offloading.changes.requests.enqueue_apply", lambda pk, countdown=0: found["apply"].append(pk))
    monkeypatch.setattr(
        "offloading.governance.approvals.enqueue_apply", lambda pk, countdown=0: found["apply"].append(pk)
    )
    monkeypatch.setattr("offloading.governance.beat.enqueue_apply", lambda pk, countdown=0: found["apply"].append(pk))
    monkeypatch.setattr("offloading.governance.approvals.enqueue_bulk", lambda pk, *a: found["bulk"].append(pk))
    monkeypatch.setattr("offloading.changes.bulk.enqueue_bulk", lambda pk, *a: found["bulk"].append(pk))
    return found


@pytest.fixture
def people(django_user_model: Any, admin_user: Any) -> dict[str, Any]:
    """olga and oscar: operators of shop; otto: an operator of other namespaces; vera: a viewer; ada: an admin."""
    return {
        "olga": person(django_user_model, "olga", roles.OPERATOR, "shop", "team-*"),
        "oscar": person(django_user_model, "oscar", roles.OPERATOR, "shop", "team-*"),
        "otto": person(django_user_model, "otto", roles.OPERATOR, "payments"),
        "vera": person(django_user_model, "vera", roles.VIEWER),
        "ada": person(django_user_model, "ada", roles.ADMIN),
        "admin": admin_user,
    }


def person(django_user_model: Any, name: str, role: str, *globs: str) -> Any:
    """A user of ``role`` whose scopes are the namespace globs ``globs`` (its role cache forgotten)."""
    user = django_user_model.objects.create_user(name, password=f"{name}-password-123")
    user.groups.add(Group.objects.get_or_create(name=role)[0])
    for glob in globs:
        Scope.objects.create(user=user, kind="glob", value=glob)
    roles.forget(user)
    return user


def actor(user: Any, source: str = Source.WEB) -> Actor:
    return Actor(user.pk, user.get_username(), source, f"req-{user.get_username()}")


def govern(settings: Any, **values: Any) -> None:
    settings.LIQO_DASH = {**settings.LIQO_DASH, **values}


def unoffload_shop(people: dict[str, Any]) -> ChangeRequest:
    change = request_unoffload("shop", actor(people["olga"]), confirmed=True)
    change.refresh_from_db()
    return change


def actions_of(change: ChangeRequest) -> list[str]:
    return list(AuditEvent.objects.filter(change=change).order_by("id").values_list("action", flat=True))


# ----------------------------------------------------------------------------------------------------
# The policy


def test_the_shipped_default_needs_no_approval(fleet: Any, people: Any, sent: Any) -> None:
    change = unoffload_shop(people)
    assert change.state == ChangeState.QUEUED and sent["apply"] == [change.pk]
    assert not Approval.objects.exists()


def test_a_destructive_change_awaits_approval_and_is_not_sent(
    fleet: Any, people: Any, sent: Any, settings: Any
) -> None:
    govern(settings, APPROVAL_POLICY="destructive")
    with clock.frozen(T0):
        change = unoffload_shop(people)
    assert change.state == ChangeState.AWAITING_APPROVAL
    assert sent["apply"] == []
    approval = Approval.objects.get(change=change)
    assert approval.decision == ApprovalDecision.PENDING
    assert approval.expires_at == T0 + timedelta(hours=24)
    assert "unoffloading shop deletes its twin namespace" in approval.reason
    assert actions_of(change) == [AuditAction.REQUESTED, AuditAction.APPROVAL_REQUESTED]
    requested = AuditEvent.objects.get(change=change, action=AuditAction.REQUESTED)
    assert requested.outcome == ChangeState.AWAITING_APPROVAL


def test_a_change_that_destroys_nothing_goes_through_under_the_destructive_policy(
    fleet: Any, people: Any, sent: Any, settings: Any
) -> None:
    govern(settings, APPROVAL_POLICY="destructive")
    change = request_offload("payments", READY_SPEC, actor(people["admin"]))
    change.refresh_from_db()
    assert change.state == ChangeState.QUEUED and sent["apply"] == [change.pk]


def test_the_policy_is_per_scope_and_the_first_matching_rule_decides(fleet: Any, settings: Any) -> None:
    govern(settings, APPROVAL_POLICY="payments => all; label tier=gold => destructive; * => none")
    assert policy.approval_mode("payments", {}) == policy.ALL
    assert policy.approval_mode("shop", {"tier": "gold"}) == policy.DESTRUCTIVE
    assert policy.approval_mode("shop", {}) == policy.NONE
    assert "every change of namespace payments" in policy.approval_reason("payments", {}, None)
    assert policy.approval_reason("shop", {"tier": "gold"}, None) == ""
    govern(settings, APPROVAL_POLICY="shop => sometimes")
    with pytest.raises(ImproperlyConfigured, match="'sometimes' is not a policy"):
        policy.approval_mode("shop", {})


def test_a_rule_naming_the_default_cluster_covers_its_namespaces(fleet: Any, settings: Any) -> None:
    """Rules may name managed clusters as operators' scopes do (issue 28): the default cluster's name,
    or ``*``, covers the namespaces the dashboard changes; another cluster's name does not."""
    default = next(c.name for c in ensure_configured() if c.is_default)  # a flushed database has no row
    policy._DEFAULT_CLUSTER.clear()  # read again: another test may have named another default
    govern(settings, APPROVAL_POLICY=f"{default}/pay* => all; */shop => destructive; milan/* => all")
    assert policy.approval_mode("payments", {}) == policy.ALL
    assert policy.approval_mode("shop", {}) == policy.DESTRUCTIVE
    assert policy.approval_mode("other", {}) == policy.NONE  # milan/*: another cluster's namespaces


def test_the_all_policy_holds_even_a_new_offloading(fleet: Any, people: Any, sent: Any, settings: Any) -> None:
    govern(settings, APPROVAL_POLICY="payments => all")
    change = request_offload("payments", READY_SPEC, actor(people["admin"]))
    change.refresh_from_db()
    assert change.state == ChangeState.AWAITING_APPROVAL and sent["apply"] == []


# ----------------------------------------------------------------------------------------------------
# Who may approve


@pytest.mark.parametrize(
    ("who", "says"),
    [
        ("olga", "you asked for this change"),
        ("vera", "viewers may not unoffload"),
        ("otto", 'namespace "shop" is out of scope'),
    ],
)
def test_the_requester_a_viewer_and_an_operator_out_of_scope_may_not_approve(
    fleet: Any, people: Any, sent: Any, settings: Any, who: str, says: str
) -> None:
    govern(settings, APPROVAL_POLICY="destructive")
    change = unoffload_shop(people)
    for step in (approvals.approve, approvals.reject):
        with pytest.raises(approvals.Refused) as refused:
            step(actor(people[who]), change_id=change.pk, comment="looks fine")
        assert refused.value.code == 403 and says.lower() in refused.value.message.lower()
    change.refresh_from_db()
    assert change.state == ChangeState.AWAITING_APPROVAL and sent["apply"] == []
    assert Approval.objects.get(change=change).decision == ApprovalDecision.PENDING
    assert AuditEvent.objects.filter(action=AuditAction.REFUSED, user_name=who).count() == 2


@pytest.mark.parametrize("who", ["oscar", "ada"])
def test_another_operator_in_scope_or_an_admin_approves_and_the_change_is_queued(
    fleet: Any, people: Any, sent: Any, settings: Any, who: str
) -> None:
    govern(settings, APPROVAL_POLICY="destructive")
    change = unoffload_shop(people)
    approval = approvals.approve(actor(people[who]), change_id=change.pk, comment="maintenance ticket 42")
    assert approval.decision == ApprovalDecision.APPROVED and approval.decided_by_name == who
    assert approval.comment == "maintenance ticket 42"
    change.refresh_from_db()
    assert change.state == ChangeState.QUEUED and sent["apply"] == [change.pk]
    assert actions_of(change) == [AuditAction.REQUESTED, AuditAction.APPROVAL_REQUESTED, AuditAction.APPROVED]
    approved = AuditEvent.objects.get(change=change, action=AuditAction.APPROVED)
    assert approved.user_name == who and "maintenance ticket 42" in approved.message
    # Decided: a second decision is a 409.
    with pytest.raises(approvals.Refused) as again:
        approvals.reject(actor(people["ada" if who == "oscar" else "oscar"]), change_id=change.pk, comment="no")
    assert again.value.code == 409 and "no longer awaiting a decision" in again.value.message
    assert verify().ok


def test_reject_needs_a_comment_and_ends_the_change(fleet: Any, people: Any, sent: Any, settings: Any) -> None:
    govern(settings, APPROVAL_POLICY="destructive")
    change = unoffload_shop(people)
    with pytest.raises(approvals.Refused) as empty:
        approvals.reject(actor(people["oscar"]), change_id=change.pk, comment="  ")
    assert empty.value.code == 400 and empty.value.field == "comment"
    approvals.reject(actor(people["oscar"]), change_id=change.pk, comment="not during the sale")
    change.refresh_from_db()
    assert change.state == ChangeState.REJECTED and change.is_terminal
    assert "not during the sale" in change.message and sent["apply"] == []
    assert actions_of(change)[-1] == AuditAction.REJECTED
    assert verify().ok


# ----------------------------------------------------------------------------------------------------
# Expiry, with injected time


def test_an_approval_request_expires_after_its_ttl(fleet: Any, people: Any, sent: Any, settings: Any) -> None:
    govern(settings, APPROVAL_POLICY="destructive", APPROVAL_TTL=3600)
    with clock.frozen(T0):
        change = unoffload_shop(people)
    with clock.frozen(T0 + timedelta(minutes=59)):
        assert beat.expire_due() == 0
    with clock.frozen(T0 + timedelta(hours=1)):
        assert beat.expire_due() == 1
        with pytest.raises(approvals.Refused) as late:
            approvals.approve(actor(people["oscar"]), change_id=change.pk)
    assert late.value.code == 409
    change.refresh_from_db()
    assert change.state == ChangeState.EXPIRED and sent["apply"] == []
    assert Approval.objects.get(change=change).decision == ApprovalDecision.EXPIRED
    assert actions_of(change)[-1] == AuditAction.EXPIRED
    assert verify().ok


def test_approving_after_the_ttl_but_before_the_beat_expires_it(
    fleet: Any, people: Any, sent: Any, settings: Any
) -> None:
    govern(settings, APPROVAL_POLICY="destructive")
    with clock.frozen(T0):
        change = unoffload_shop(people)
    with clock.frozen(T0 + timedelta(hours=24, seconds=1)), pytest.raises(approvals.Refused) as late:
        approvals.approve(actor(people["oscar"]), change_id=change.pk)
    assert late.value.code == 409 and "expired" in late.value.message
    change.refresh_from_db()
    assert change.state == ChangeState.EXPIRED and sent["apply"] == []


def test_the_clock_can_be_set_through_the_settings(settings: Any) -> None:
    govern(settings, GOVERNANCE_NOW="2026-03-29T00:30:00+00:00")
    assert clock.now() == datetime(2026, 3, 29, 0, 30, tzinfo=UTC)
    with clock.frozen(T0):
        assert clock.now() == T0


# ----------------------------------------------------------------------------------------------------
# Changed meanwhile


def test_a_namespace_changed_meanwhile_goes_back_for_a_new_decision(
    fleet: Any, people: Any, sent: Any, settings: Any
) -> None:
    govern(settings, APPROVAL_POLICY="destructive")
    change = unoffload_shop(people)
    first = Approval.objects.get(change=change)
    # Someone edits the offloading (a new generation and spec) before the approver decides.
    changed = {**READY_SPEC, "podOffloadingStrategy": "Remote"}
    Namespace.objects.filter(name="shop").update(
        offloading_generation=4, offloading_spec=changed, offloading_resource_version="57"
    )
    with pytest.raises(approvals.Refused) as moved:
        approvals.approve(actor(people["oscar"]), change_id=change.pk)
    assert moved.value.code == 409 and "changed since the approval was asked" in moved.value.message
    first.refresh_from_db()
    change.refresh_from_db()
    assert first.decision == ApprovalDecision.SUPERSEDED
    assert change.state == ChangeState.AWAITING_APPROVAL and sent["apply"] == []
    assert change.base_generation == 4 and change.base_spec == changed  # based on what is there now
    second = Approval.objects.filter(change=change).order_by("-id").first()
    assert second is not None and second.pk != first.pk and second.decision == ApprovalDecision.PENDING
    assert second.seen["shop"]["generation"] == 4
    # The new decision goes through.
    approvals.approve(actor(people["oscar"]), change_id=change.pk)
    change.refresh_from_db()
    assert change.state == ChangeState.QUEUED and sent["apply"] == [change.pk]
    assert actions_of(change).count(AuditAction.APPROVAL_REQUESTED) == 2
    assert verify().ok


def test_a_status_write_alone_is_not_a_change(fleet: Any, people: Any, sent: Any, settings: Any) -> None:
    govern(settings, APPROVAL_POLICY="destructive")
    change = unoffload_shop(people)
    # Liqo's controller writes the status: the resourceVersion moves, the generation and spec do not.
    Namespace.objects.filter(name="shop").update(offloading_resource_version="99", offloading_phase="Ready")
    approvals.approve(actor(people["oscar"]), change_id=change.pk)
    change.refresh_from_db()
    assert change.state == ChangeState.QUEUED


def test_an_unoffload_of_a_namespace_unoffloaded_meanwhile_is_cancelled(
    fleet: Any, people: Any, sent: Any, settings: Any
) -> None:
    govern(settings, APPROVAL_POLICY="destructive")
    change = unoffload_shop(people)
    Namespace.objects.filter(name="shop").update(offloaded=False, offloading_spec=None, offloading_generation=0)
    with pytest.raises(approvals.Refused) as gone:
        approvals.approve(actor(people["oscar"]), change_id=change.pk)
    assert gone.value.code == 409 and "no longer applies" in gone.value.message
    change.refresh_from_db()
    assert change.state == ChangeState.CANCELLED and "unoffloaded meanwhile" in change.message


def test_the_change_hash_covers_what_the_approver_saw(fleet: Any, people: Any, sent: Any, settings: Any) -> None:
    govern(settings, APPROVAL_POLICY="all")
    spec = {**READY_SPEC, "podOffloadingStrategy": "Remote"}
    change = request_offload("shop", spec, actor(people["olga"]), confirmed=True)
    approval = Approval.objects.get(change=change)
    assert approval.spec_hash == facts.change_hash(change)
    # The row is the one the worker applies: a spec edited behind the approver's back is not approved.
    ChangeRequest.objects.filter(pk=change.pk).update(desired_spec={**spec, "podOffloadingStrategy": "Local"})
    with pytest.raises(approvals.Refused) as moved:
        approvals.approve(actor(people["oscar"]), change_id=change.pk)
    assert moved.value.code == 409
    assert sent["apply"] == []


# ----------------------------------------------------------------------------------------------------
# Windows


def test_a_window_across_midnight_in_rome() -> None:
    found = windows.parse_windows(f"Mon-Fri 22:00-02:00 {ROME}")
    friday_late = datetime(2026, 11, 27, 21, 30, tzinfo=UTC)  # Friday 22:30 in Rome (CET, +1)
    saturday_early = datetime(2026, 11, 28, 0, 59, tzinfo=UTC)  # Saturday 01:59: still Friday's window
    saturday_closed = datetime(2026, 11, 28, 1, 0, tzinfo=UTC)  # Saturday 02:00: closed
    assert windows.is_open(found, friday_late) and windows.is_open(found, saturday_early)
    assert not windows.is_open(found, saturday_closed)
    assert not windows.is_open(found, datetime(2026, 11, 27, 20, 59, tzinfo=UTC))  # Friday 21:59
    # Saturday 02:00 to Monday 22:00 (Rome): closed all weekend; a Monday 00:30 is not Sunday's window.
    assert windows.next_opening(found, saturday_closed) == datetime(2026, 11, 30, 21, 0, tzinfo=UTC)
    assert not windows.is_open(found, datetime(2026, 11, 29, 23, 30, tzinfo=UTC))


def test_windows_follow_daylight_saving_time_in_rome() -> None:
    found = windows.parse_windows(f"daily 01:00-04:00 {ROME}")
    # 29 March 2026: 02:00 CET becomes 03:00 CEST; the window is two real hours that night.
    period = windows.next_period(found, datetime(2026, 3, 28, 22, 0, tzinfo=UTC))
    assert period is not None
    assert period[0] == datetime(2026, 3, 29, 0, 0, tzinfo=UTC) and period[1] == datetime(2026, 3, 29, 2, 0, tzinfo=UTC)
    # 25 October 2026: 03:00 CEST becomes 02:00 CET; four real hours that night.
    period = windows.next_period(found, datetime(2026, 10, 24, 21, 0, tzinfo=UTC))
    assert period is not None
    assert period[0] == datetime(2026, 10, 24, 23, 0, tzinfo=UTC) and period[1] == datetime(
        2026, 10, 25, 3, 0, tzinfo=UTC
    )
    # The same wall clock opening on both sides of the spring change: 22:00 is 21:00 UTC, then 20:00 UTC.
    evenings = windows.parse_windows(f"Mon-Fri 22:00-02:00 {ROME}")
    assert windows.next_opening(evenings, datetime(2026, 3, 27, 12, 0, tzinfo=UTC)) == datetime(
        2026, 3, 27, 21, 0, tzinfo=UTC
    )
    assert windows.next_opening(evenings, datetime(2026, 3, 28, 12, 0, tzinfo=UTC)) == datetime(
        2026, 3, 30, 20, 0, tzinfo=UTC
    )
    # A wall time that does not exist (02:30 on the spring night) opens at the end of the gap.
    gap = windows.parse_windows(f"Sun 02:30-05:00 {ROME}")
    assert windows.next_opening(gap, datetime(2026, 3, 28, 12, 0, tzinfo=UTC)) == datetime(
        2026, 3, 29, 1, 30, tzinfo=UTC
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("Mon-Fri 22:00", "is not a period"),
        ("Funday 10:00-11:00 UTC", "is not a day"),
        ("Mon 25:00-26:00 UTC", "is not a time of day"),
        ("Mon 10:00-11:00 Mars/Olympus", "unknown time zone"),
    ],
)
def test_a_window_that_cannot_be_read_says_why(text: str, says: str) -> None:
    with pytest.raises(windows.WindowError, match=says):
        windows.parse_window(text)


def test_a_change_outside_its_window_is_scheduled_and_released_when_it_opens(
    fleet: Any, people: Any, sent: Any, settings: Any
) -> None:
    govern(settings, CHANGE_WINDOWS=f"shop => Mon-Fri 22:00-02:00 {ROME}")
    edit = {**READY_SPEC, "podOffloadingStrategy": "Remote"}
    with clock.frozen(T0):  # Wednesday 13:00 in Rome
        change = request_offload("shop", edit, actor(people["olga"]), confirmed=True)
    change.refresh_from_db()
    assert change.state == ChangeState.SCHEDULED and sent["apply"] == []
    opens = datetime(2026, 11, 25, 21, 0, tzinfo=UTC)
    assert change.schedule.not_before == opens
    scheduled = AuditEvent.objects.get(change=change, action=AuditAction.SCHEDULED)
    assert isinstance(scheduled.after, dict)
    assert datetime.fromisoformat(scheduled.after["notBefore"]) == opens and "it applies at" in scheduled.message
    with clock.frozen(opens - timedelta(seconds=1)):
        assert beat.release_due() == 0
    with clock.frozen(opens):
        assert beat.release_due() == 1
    change.refresh_from_db()
    assert change.state == ChangeState.QUEUED and sent["apply"] == [change.pk]
    assert Schedule.objects.get(change=change).released_at == opens


def test_an_approved_change_outside_its_window_is_scheduled(fleet: Any, people: Any, sent: Any, settings: Any) -> None:
    govern(settings, APPROVAL_POLICY="destructive", CHANGE_WINDOWS=f"Mon-Fri 22:00-02:00 {ROME}")
    with clock.frozen(T0):
        change = unoffload_shop(people)
        assert change.state == ChangeState.AWAITING_APPROVAL
        approvals.approve(actor(people["oscar"]), change_id=change.pk)
    change.refresh_from_db()
    assert change.state == ChangeState.SCHEDULED and sent["apply"] == []
    # Changed between approval and window: back for a new decision instead of being released.
    Namespace.objects.filter(name="shop").update(offloading_generation=9)
    with clock.frozen(datetime(2026, 11, 25, 21, 0, tzinfo=UTC)):
        assert beat.release_due() == 0
    change.refresh_from_db()
    assert change.state == ChangeState.AWAITING_APPROVAL and change.base_generation == 9
    assert Approval.objects.filter(change=change, decision=ApprovalDecision.PENDING).count() == 1


def test_a_scheduled_change_can_be_cancelled(fleet: Any, people: Any, sent: Any, settings: Any) -> None:
    govern(settings, CHANGE_WINDOWS=f"shop => Sat 00:00-24:00 {ROME}")
    with clock.frozen(T0):
        change = unoffload_shop(people)
    with pytest.raises(approvals.Refused) as viewer:
        approvals.cancel(actor(people["vera"]), change_id=change.pk)
    assert viewer.value.code == 403
    assert approvals.cancel(actor(people["olga"]), change_id=change.pk, comment="not needed") == 1
    change.refresh_from_db()
    assert change.state == ChangeState.CANCELLED and actions_of(change)[-1] == AuditAction.CANCELLED
    with clock.frozen(T0 + timedelta(days=7)):
        assert beat.release_due() == 0
    assert sent["apply"] == []


# ----------------------------------------------------------------------------------------------------
# Break glass


def test_break_glass_needs_an_admin_and_a_reason_and_is_audited_and_alerted(
    fleet: Any, people: Any, sent: Any, settings: Any
) -> None:

    hook = Receiver()
    try:
        govern(settings, APPROVAL_POLICY="destructive", ALERT_WEBHOOK_URL=hook.url, ALERT_GRACE=0.0)
        change = unoffload_shop(people)
        needed = Alert.objects.get(key=f"approval-change:{change.pk}")
        assert needed.kind == AlertKind.APPROVAL_NEEDED and needed.state == "open"
        with pytest.raises(approvals.Refused) as operator:
            approvals.break_glass(actor(people["oscar"]), change_id=change.pk, reason="urgent")
        assert operator.value.code == 403
        with pytest.raises(approvals.Refused) as no_reason:
            approvals.break_glass(actor(people["ada"]), change_id=change.pk, reason=" ")
        assert no_reason.value.code == 400 and no_reason.value.field == "reason"
        assert sent["apply"] == []
        approvals.break_glass(actor(people["ada"]), change_id=change.pk, reason="incident 7: the peer leaks data")
        change.refresh_from_db()
        assert change.state == ChangeState.QUEUED and sent["apply"] == [change.pk]
        glass = AuditEvent.objects.get(change=change, action=AuditAction.BROKE_GLASS)
        assert glass.user_name == "ada" and "incident 7" in glass.message
        alert = Alert.objects.get(kind=AlertKind.BROKE_GLASS)
        assert alert.severity == "critical" and "incident 7" in alert.detail
        assert Alert.objects.get(pk=needed.pk).state == "resolved"
        assert Approval.objects.get(change=change).decision == ApprovalDecision.BROKE_GLASS
        assert verify().ok
    finally:
        hook.stop()


# ----------------------------------------------------------------------------------------------------
# Bulk: one approval for the whole bulk


def test_a_bulk_waits_for_one_approval_with_its_impact(fleet: Any, people: Any, sent: Any, settings: Any) -> None:
    govern(settings, APPROVAL_POLICY="destructive")
    for name in ("team-a", "team-b"):
        Namespace.objects.create(
            name=name,
            labels={"tier": "web"},
            offloaded=True,
            offloading_spec=READY_SPEC,
            offloading_generation=1,
            offloading_uid=f"uid-{name}",
        )
    bulk = request_bulk(ChangeAction.UNOFFLOAD, "tier=web", None, actor(people["olga"], Source.BULK), confirmed=True)
    children = list(bulk.changes.order_by("namespace"))
    assert [c.state for c in children] == [ChangeState.AWAITING_APPROVAL] * 2
    approval = Approval.objects.get(bulk=bulk)
    assert approval.impact["namespaces"] == ["team-a", "team-b"]
    assert set(approval.impact["needsApproval"]) == {"team-a", "team-b"}
    assert sent["bulk"] == [] and sent["apply"] == []
    with pytest.raises(approvals.Refused) as one_by_one:
        approvals.approve(actor(people["oscar"]), change_id=children[0].pk)
    assert one_by_one.value.code == 409 and "decide on the bulk" in one_by_one.value.message
    approvals.approve(actor(people["oscar"]), bulk_id=bulk.pk, comment="planned")
    assert set(bulk.changes.values_list("state", flat=True)) == {ChangeState.QUEUED}
    assert sent["bulk"] == [bulk.pk]
    assert AuditEvent.objects.filter(action=AuditAction.APPROVED, change__bulk=bulk).count() == 2
    assert [a.decided_by_name for a in decisions.decisions_for(children)] == ["oscar"]  # for a GitOps hand-off
    assert verify().ok


def test_a_bulk_spreads_within_its_window(fleet: Any, people: Any, sent: Any, settings: Any) -> None:
    govern(settings, CHANGE_WINDOWS=f"label tier=web => daily 22:00-02:00 {ROME}")
    for i in range(4):
        Namespace.objects.create(name=f"team-{i}", labels={"tier": "web"})
    with clock.frozen(T0):
        bulk = request_bulk(ChangeAction.OFFLOAD, "tier=web", READY_SPEC, actor(people["olga"], Source.BULK))
    times = sorted(Schedule.objects.filter(change__bulk=bulk).values_list("not_before", flat=True))
    opens = datetime(2026, 11, 25, 21, 0, tzinfo=UTC)
    assert times == [opens + timedelta(minutes=30 * i) for i in range(4)]  # the first half of 4 hours
    assert sent["bulk"] == []
    with clock.frozen(opens + timedelta(minutes=45)):
        assert beat.release_due() == 2


# ----------------------------------------------------------------------------------------------------
# The REST API


def client_of(user: Any) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def test_the_api_answers_with_status_bodies(fleet: Any, people: Any, sent: Any, settings: Any) -> None:
    govern(settings, APPROVAL_POLICY="destructive")
    olga, oscar = client_of(people["olga"]), client_of(people["oscar"])
    asked = olga.delete("/api/v1/namespaces/shop/offloading/?confirm=true")
    assert asked.status_code == 202 and asked.json()["state"] == ChangeState.AWAITING_APPROVAL
    pk = asked.json()["id"]
    assert asked.json()["governance"]["approval"]["decision"] == "pending"
    own = olga.post(f"/api/v1/changes/{pk}/approve/", {"comment": "mine"}, format="json")
    assert own.status_code == 403
    body = own.json()
    assert body["kind"] == "Status" and body["code"] == 403 and body["reason"] == "Forbidden"
    assert "You asked for this change" in body["message"]
    assert [item["id"] for item in oscar.get("/api/v1/approvals/").json()] == [Approval.objects.get().pk]
    assert olga.get("/api/v1/approvals/").json() == []
    no_comment = oscar.post(f"/api/v1/changes/{pk}/reject/", {}, format="json")
    assert no_comment.status_code == 400 and no_comment.json()["details"]["causes"][0]["field"] == "comment"
    approved = oscar.post(f"/api/v1/changes/{pk}/approve/", {"comment": "ok"}, format="json")
    assert approved.status_code == 200, approved.json()
    assert approved.json()["state"] == ChangeState.QUEUED
    assert approved.json()["governance"]["approval"]["decidedByName"] == "oscar"
    again = oscar.post(f"/api/v1/changes/{pk}/approve/", {}, format="json")
    assert again.status_code == 409 and again.json()["reason"] == "Conflict"
    assert oscar.post("/api/v1/changes/999999/approve/", {}, format="json").status_code == 404
    assert oscar.post(f"/api/v1/bulk/{2**64}/approve/", {}, format="json").status_code == 404  # no row has it
    assert client_of(people["vera"]).post(f"/api/v1/changes/{pk}/cancel/", {}, format="json").status_code == 403


def test_the_openapi_schema_shows_the_governance_routes(admin_client: Any) -> None:
    schema = admin_client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    for route in ("approve", "reject", "cancel", "break-glass"):
        assert f"/api/v1/changes/{{id}}/{route}/" in schema["paths"]
        assert f"/api/v1/bulk/{{id}}/{route}/" in schema["paths"]
        assert set(schema["paths"][f"/api/v1/changes/{{id}}/{route}/"]["post"]["responses"]) >= {"200", "403", "409"}
    assert "/api/v1/approvals/" in schema["paths"]


# ----------------------------------------------------------------------------------------------------
# The pages


def test_the_approvals_page_decides_and_the_change_page_shows_it(
    client: Any, fleet: Any, people: Any, sent: Any, settings: Any
) -> None:
    govern(settings, APPROVAL_POLICY="destructive")
    change = unoffload_shop(people)
    client.force_login(people["oscar"])
    page = client.get("/approvals/").content.decode()
    assert f'Change <a href="/changes/{change.pk}/">#{change.pk}</a>' in page and "Approve" in page
    assert "Break glass (admins)" not in page
    detail = client.get(f"/changes/{change.pk}/").content.decode()
    assert "Awaiting a decision" in detail and "Governance" in detail
    assert '<li class="current">Awaiting approval</li>' in detail  # the steps say what it waits for
    refused = client.post(f"/changes/{change.pk}/reject/", {"comment": ""}, follow=True).content.decode()
    assert "a comment is required" in refused
    client.post(f"/changes/{change.pk}/approve/", {"comment": "go"})
    change.refresh_from_db()
    assert change.state == ChangeState.QUEUED
    assert "Approved</strong> by oscar" in client.get(f"/changes/{change.pk}/").content.decode()
    client.force_login(people["ada"])
    assert "Break glass (admins)" in client.get("/approvals/").content.decode()


def test_breaking_glass_on_one_child_of_a_bulk_leaves_the_others_to_the_bulks_approval(
    fleet: Any, people: Any, sent: Any, settings: Any
) -> None:
    govern(settings, APPROVAL_POLICY="destructive")
    for name in ("team-a", "team-b"):
        Namespace.objects.create(name=name, labels={"tier": "web"}, offloaded=True, offloading_spec=READY_SPEC)
    bulk = request_bulk(ChangeAction.UNOFFLOAD, "tier=web", None, actor(people["olga"], Source.BULK), confirmed=True)
    first, second = bulk.changes.order_by("namespace")
    assert approvals.break_glass(actor(people["ada"]), change_id=first.pk, reason="team-a leaks") == 1
    assert Approval.objects.get(bulk=bulk).decision == ApprovalDecision.PENDING
    second.refresh_from_db()
    assert second.state == ChangeState.AWAITING_APPROVAL
    approvals.approve(actor(people["oscar"]), bulk_id=bulk.pk)
    second.refresh_from_db()
    assert second.state == ChangeState.QUEUED and sent["apply"] == [first.pk, second.pk]
