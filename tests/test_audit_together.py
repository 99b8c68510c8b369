"""Audit events sealed together (``offloading.audit.events.sealed_together``, used where a batch of
changes is recorded in one transaction): the same numbers and seals, in the order recorded, as one by
one; the events of a rolled-back savepoint are not written; an error in the block writes none."""

from __future__ import annotations

import pytest
from django.db import transaction

from offloading.audit.events import record, sealed_together
from offloading.audit.trail import verify
from offloading.choices import AuditAction
from offloading.context import Actor
from offloading.models import AuditChainHead, AuditEvent

pytestmark = pytest.mark.django_db

ACTOR = Actor(None, "alice", "api", "req-1")


def _record(namespace: str) -> AuditEvent:
    return record(ACTOR, AuditAction.APPLIED, namespace, outcome="applied", after={"n": namespace})


def test_events_sealed_together_continue_the_chain_in_order() -> None:
    _record("before")  # one by one first: the batch continues its chain
    with transaction.atomic(), sealed_together() as pending:
        for name in ("a", "b", "c"):
            event = _record(name)
            assert event.pk is None  # kept until the block ends
        assert [e.namespace for e in pending] == ["a", "b", "c"]
    _record("after")
    rows = list(AuditEvent.objects.order_by("seq").values_list("seq", "namespace"))
    assert rows == [(1, "before"), (2, "a"), (3, "b"), (4, "c"), (5, "after")]
    verdict = verify()
    assert verdict.ok and verdict.count == 5, verdict
    head = AuditChainHead.objects.get(pk=1)
    assert head.last_seq == 5 and head.last_hash == AuditEvent.objects.get(seq=5).hash


def test_a_rolled_back_savepoint_drops_its_events_and_an_error_writes_none() -> None:
    with transaction.atomic(), sealed_together() as pending:
        _record("kept")
        mark = len(pending)
        try:
            with transaction.atomic():
                _record("dropped")
                raise RuntimeError("this change's recording failed")
        except RuntimeError:
            del pending[mark:]
        _record("kept-too")
    assert list(AuditEvent.objects.order_by("seq").values_list("namespace", flat=True)) == ["kept", "kept-too"]
    with pytest.raises(ValueError), transaction.atomic(), sealed_together():
        _record("never")
        raise ValueError("the whole batch fails")
    assert not AuditEvent.objects.filter(namespace="never").exists()
    assert verify().ok


def test_nested_blocks_write_once_with_the_outermost() -> None:
    with transaction.atomic(), sealed_together() as outer:
        with sealed_together() as inner:
            _record("inner")
        assert inner is outer and not AuditEvent.objects.exists()
    assert AuditEvent.objects.count() == 1 and verify().ok


def test_sealed_events_may_not_be_appended_again() -> None:
    event = _record("once")
    with pytest.raises(ValueError):
        AuditEvent.append_all([event])
