"""Proving the audit trail: verify every seal, anchor the head outside the database, prune with a
checkpoint.

``verify()`` walks the events in sequence order from the last retention checkpoint and names the first
thing wrong: a gap (a deleted event), a row out of order (inserted or reordered), a row sealed with
another key, a seal that does not verify (an edited row), a head that does not match the newest event,
or an anchor written outside the database that the trail no longer reaches (newest events deleted).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from offloading.cluster import kube
from offloading.models import AuditChainHead, AuditCheckpoint, AuditEvent
from offloading.models import seal as auditseal

log = logging.getLogger(__name__)


@dataclass
class Verdict:
    ok: bool
    count: int
    head_seq: int
    head_seal: str
    problem: str = ""
    first_bad_seq: int | None = None
    first_bad_id: int | None = None

    def describe(self) -> str:
        if self.ok:
            return f"audit trail intact: {self.count} events, head #{self.head_seq} {self.head_seal[:16]}…"
        return f"audit trail broken: {self.problem}"


def _bad(count: int, problem: str, event: AuditEvent | None = None, seq: int | None = None) -> Verdict:
    return Verdict(
        False,
        count,
        0,
        "",
        problem,
        first_bad_seq=seq if seq is not None else (event.seq if event else None),
        first_bad_id=event.pk if event else None,
    )


def verify() -> Verdict:
    """Check the whole trail (see the module docstring); streaming, one pass."""
    checkpoint = AuditCheckpoint.objects.order_by("-seq").first()
    expected, prev = (checkpoint.seq + 1, checkpoint.seal) if checkpoint else (1, "")
    current_key = auditseal.key_id()
    count, last_id, last_seal = 0, 0, prev
    for event in AuditEvent.objects.order_by("seq").iterator(chunk_size=2000):
        seq = event.seq or 0
        if seq < expected:
            return _bad(count, f"event #{seq} (id {event.pk}) is before the trail's start or repeated", event)
        if seq > expected:
            missing = f"event #{expected} is" if seq == expected + 1 else f"events #{expected} to #{seq - 1} are"
            return _bad(count, f"{missing} missing (deleted); the trail resumes at #{seq}", event, expected)
        if event.pk <= last_id:
            return _bad(count, f"event #{seq} (id {event.pk}) is out of order: rows were inserted or reordered", event)
        if event.key_id != current_key:
            return _bad(count, f"event #{seq} is sealed with another key (key id {event.key_id or 'none'})", event)
        if event.prev_hash != prev:
            return _bad(count, f"event #{seq} does not follow event #{seq - 1}: rows were inserted or reordered", event)
        if event.compute_hash() != event.hash:
            return _bad(count, f"event #{seq} was edited (or inserted): its seal does not verify", event)
        prev, last_seal, last_id, expected = event.hash, event.hash, event.pk, expected + 1
        count += 1
    last_seq = expected - 1
    head = AuditChainHead.objects.filter(pk=1).first()
    if head is not None and (head.last_seq, head.last_hash) != (last_seq, last_seal) and head.last_seq:
        return _bad(
            count,
            f"the newest events were deleted: the head says #{head.last_seq}, the trail ends at #{last_seq}",
            seq=last_seq + 1,
        )
    anchor = last_anchor()
    if anchor is not None:
        if anchor["seq"] > last_seq:
            return _bad(
                count,
                f"events after #{last_seq} were deleted: #{anchor['seq']} was anchored at {anchor.get('time', '?')}",
                seq=last_seq + 1,
            )
        anchored = AuditEvent.objects.filter(seq=anchor["seq"]).values_list("hash", flat=True).first()
        if anchored is not None and anchored != anchor["seal"]:
            return _bad(count, f"event #{anchor['seq']} differs from its anchored seal", seq=anchor["seq"])
    return Verdict(True, count, last_seq, last_seal)


# --------------------------------------------------------------------------------------------------
# Anchors: the head written outside the database


def _target() -> tuple[str, str]:
    target = settings.AUDIT_ANCHOR
    if target.startswith("configmap:"):
        return "configmap", target.removeprefix("configmap:")
    return "file", target


def anchor() -> dict[str, Any]:
    """Write the current head (sequence number, seal, time) to AUDIT_ANCHOR and return it."""
    head = AuditChainHead.objects.filter(pk=1).first()
    record = {
        "seq": head.last_seq if head else 0,
        "seal": head.last_hash if head else "",
        "time": timezone.now().isoformat(),
    }
    kind, where = _target()
    if kind == "configmap":
        namespace, _, name = where.partition("/")
        kube.write_config_map(namespace, name, {"anchor": json.dumps(record)})
    else:
        path = Path(where)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as handle:  # append-only: earlier anchors stay
            handle.write(json.dumps(record, sort_keys=True) + "\n")
    return record


def last_anchor() -> dict[str, Any] | None:
    """The newest anchor written, or None."""
    kind, where = _target()
    try:
        if kind == "configmap":
            namespace, _, name = where.partition("/")
            found = kube.read_config_map(namespace, name)
            text = ((found or {}).get("data") or {}).get("anchor")
            return json.loads(text) if text else None
        path = Path(where)
        if not path.exists():
            return None
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        return json.loads(lines[-1]) if lines else None
    except (OSError, ValueError) as exc:
        log.warning("the audit anchor %s cannot be read: %s", settings.AUDIT_ANCHOR, exc)
        return None


# --------------------------------------------------------------------------------------------------
# Retention


def prune(before: datetime) -> AuditCheckpoint | None:
    """Delete the events older than ``before`` (only from the start of the trail, so what remains is
    contiguous) and write a checkpoint so the rest still verifies. None when nothing is older."""
    with transaction.atomic():
        first_kept = AuditEvent.objects.filter(time__gte=before).order_by("seq").values_list("seq", flat=True).first()
        old = AuditEvent.objects.filter(seq__lt=first_kept) if first_kept else AuditEvent.objects.all()
        last = old.order_by("-seq").first()
        if last is None:
            return None
        count = old.count()
        checkpoint = AuditCheckpoint.objects.create(seq=last.seq or 0, seal=last.hash, pruned=count, before=before)
        old._raw_delete(old.db)  # the model refuses deletes; pruning is the one sanctioned way
    log.info("pruned %d audit events up to #%s", count, checkpoint.seq)
    return checkpoint
