"""The sealed audit trail: verify_audit accepts the trail as written and names the first bad event for
every kind of tampering someone with write access to the database could try (raw SQL, bypassing the
model): an edited row, a deleted row (in the middle, or the newest ones up to the last anchor), an
inserted row, reordered rows, a row sealed with another key. Pruning keeps what remains verifiable."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone

from offloading.audit.trail import anchor, last_anchor, prune, verify
from offloading.choices import AuditAction, Source
from offloading.models import AuditCheckpoint, AuditEvent
from offloading.models import seal as auditseal
from offloading.models.fleet import default_managed_pk

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _anchor_file(tmp_path: Path, settings: Any) -> Path:
    settings.AUDIT_ANCHOR = str(tmp_path / "anchor.jsonl")
    return Path(settings.AUDIT_ANCHOR)


def _trail(count: int = 4) -> list[AuditEvent]:
    events = []
    for i in range(count):
        event = AuditEvent(
            user_name="alice",
            source=Source.WEB,
            action=AuditAction.REQUESTED,
            namespace=f"ns-{i}",
            after={"podOffloadingStrategy": "Remote"},
        )
        event.save()
        events.append(event)
    return events


def _verify_audit() -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("verify_audit", stdout=out)
    except CommandError as exc:
        return exc.returncode, str(exc)
    return 0, out.getvalue()


def _sql(statement: str, *params: Any) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


def test_an_untouched_trail_verifies_and_the_command_says_so() -> None:
    events = _trail()
    assert [e.seq for e in events] == [1, 2, 3, 4]
    assert [e.prev_hash for e in events] == ["", events[0].hash, events[1].hash, events[2].hash]
    assert all(e.key_id == auditseal.key_id() for e in events)
    code, text = _verify_audit()
    assert code == 0 and "intact: 4 events, head #4" in text


def test_seals_are_keyed_not_plain_hashes(settings: Any) -> None:
    (event,) = _trail(1)
    assert event.compute_hash() == event.hash
    assert event.compute_hash(key="another key") != event.hash
    settings.AUDIT_HMAC_KEY = "another key"
    assert verify().problem.startswith("event #1 is sealed with another key")


def test_an_edited_row_is_found() -> None:
    _, second, _, _ = _trail()
    _sql("UPDATE offloading_auditevent SET user_name = %s WHERE id = %s", "mallory", second.pk)
    code, text = _verify_audit()
    assert code == 1 and "event #2 was edited" in text
    assert verify().first_bad_id == second.pk


def test_an_edited_row_resealed_without_the_key_is_found() -> None:
    """Recomputing a plain hash (or a seal with a guessed key) over the edit does not help."""
    _, second, _, _ = _trail()
    forged = auditseal.seal(2, second.prev_hash, {**second.payload(), "user_name": "mallory"}, key="guess")
    _sql("UPDATE offloading_auditevent SET user_name = %s, hash = %s WHERE id = %s", "mallory", forged, second.pk)
    assert "event #2 was edited" in verify().problem


def test_a_deleted_row_in_the_middle_is_found() -> None:
    _, second, _, _ = _trail()
    _sql("DELETE FROM offloading_auditevent WHERE id = %s", second.pk)
    verdict = verify()
    assert verdict.problem == "event #2 is missing (deleted); the trail resumes at #3"
    assert verdict.first_bad_seq == 2


def test_deleted_newest_rows_are_found_by_the_head() -> None:
    _trail()
    _sql("DELETE FROM offloading_auditevent WHERE seq >= 3")
    code, text = _verify_audit()
    assert code == 1 and "the newest events were deleted: the head says #4, the trail ends at #2" in text


def test_deleted_newest_rows_and_a_forged_head_are_found_by_the_anchor(_anchor_file: Path) -> None:
    events = _trail()
    anchor()
    assert last_anchor()["seq"] == 4 and json.loads(_anchor_file.read_text().splitlines()[-1])["seal"] == events[3].hash
    _sql("DELETE FROM offloading_auditevent WHERE seq = 4")
    _sql("UPDATE offloading_auditchainhead SET last_seq = 3, last_hash = %s", events[2].hash)
    assert "events after #3 were deleted: #4 was anchored at" in verify().problem


def test_the_anchor_file_is_appended_to(_anchor_file: Path) -> None:
    _trail(1)
    call_command("audit_anchor", stdout=StringIO())
    _trail(1)
    call_command("audit_anchor", stdout=StringIO())
    assert [json.loads(line)["seq"] for line in _anchor_file.read_text().splitlines()] == [1, 2]


def test_an_inserted_row_is_found() -> None:
    events = _trail()
    # Make room after #2 and slip a row in, with a seal made without the key.
    _sql("UPDATE offloading_auditevent SET seq = seq + 100 WHERE seq > 2")
    _sql("UPDATE offloading_auditevent SET seq = seq - 99 WHERE seq > 100")
    fake = AuditEvent(user_name="mallory", source=Source.WEB, action=AuditAction.APPLIED, namespace="x", seq=3)
    fake.prev_hash = events[1].hash
    fake.key_id = auditseal.key_id()
    fake.managed_id = default_managed_pk()
    fake.hash = fake.compute_hash(key="guess")
    _sql(
        "INSERT INTO offloading_auditevent (seq, time, user_name, source, request_id, action, namespace, outcome, "
        "message, prev_hash, hash, key_id, managed_id, seal_version) "
        "VALUES (%s, %s, %s, %s, '', %s, %s, '', '', %s, %s, %s, %s, 2)",
        3,
        timezone.now(),
        "mallory",
        "web",
        "applied",
        "x",
        fake.prev_hash,
        fake.hash,
        fake.key_id,
        fake.managed_id,
    )
    assert verify().problem == "event #3 was edited (or inserted): its seal does not verify"


def test_reordered_rows_are_found() -> None:
    _, second, third, _ = _trail()
    _sql("UPDATE offloading_auditevent SET seq = 1000 WHERE id = %s", second.pk)
    _sql("UPDATE offloading_auditevent SET seq = 2 WHERE id = %s", third.pk)
    _sql("UPDATE offloading_auditevent SET seq = 3 WHERE id = %s", second.pk)
    assert "rows were inserted or reordered" in verify().problem


def test_pruning_writes_a_checkpoint_and_what_remains_verifies() -> None:
    events = _trail(5)
    checkpoint = prune(events[3].time)  # events #1 to #3 are older
    assert checkpoint is not None and checkpoint.seq == 3 and checkpoint.pruned == 3
    assert checkpoint.seal == events[2].hash
    assert list(AuditEvent.objects.order_by("seq").values_list("seq", flat=True)) == [4, 5]
    verdict = verify()
    assert verdict.ok and verdict.count == 2 and verdict.head_seq == 5
    assert AuditCheckpoint.objects.count() == 1
    out = StringIO()
    call_command("prune_audit", "--before", "1999-01-01", stdout=out)
    assert "nothing older" in out.getvalue()
    # Without the checkpoint, the remaining events would not verify: it is what makes them whole.
    AuditCheckpoint.objects.all().delete()
    assert verify().problem == "events #1 to #3 are missing (deleted); the trail resumes at #4"


def test_the_model_refuses_edits_and_deletes() -> None:
    (event,) = _trail(1)
    with pytest.raises(ValueError, match="append-only"):
        event.save()
    with pytest.raises(ValueError, match="append-only"):
        event.delete()


def test_a_failed_verification_shows_on_every_admin_page_only(client: Any, admin_user: Any, make_viewer: Any) -> None:
    from offloading.audit.events import verify_and_remember

    _, second, _, _ = _trail()
    _sql("UPDATE offloading_auditevent SET message = %s WHERE id = %s", "changed", second.pk)
    assert verify_and_remember() == second.pk
    client.force_login(admin_user)
    page = client.get("/namespaces/").content.decode()
    assert 'id="audit-alert"' in page and "event #2 was edited" in page
    client.force_login(make_viewer)
    assert 'id="audit-alert"' not in client.get("/namespaces/").content.decode()


@pytest.fixture
def make_viewer(django_user_model: Any) -> Any:
    from django.contrib.auth.models import Group

    user = django_user_model.objects.create_user("vera", password="vera-password-123")
    user.groups.add(Group.objects.get(name="viewer"))
    return user


def test_the_anchor_can_live_in_a_config_map(sandbox: Any, settings: Any) -> None:
    settings.AUDIT_ANCHOR = "configmap:default/liqo-dash-audit-anchor"
    events = _trail(2)
    assert last_anchor() is None
    anchor()
    assert last_anchor()["seal"] == events[1].hash
    _sql("DELETE FROM offloading_auditevent WHERE seq = 2")
    _sql("UPDATE offloading_auditchainhead SET last_seq = 1, last_hash = %s", events[0].hash)
    assert "events after #1 were deleted: #2 was anchored" in verify().problem
