"""The seal of an audit event: HMAC-SHA256 over the event's content, its sequence number and the seal
before it, keyed by AUDIT_HMAC_KEY (separate from SECRET_KEY). Whoever can write the database but does
not hold the key cannot forge a seal, so an edited, inserted, reordered or re-sealed row is found.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from django.conf import settings


def key_id(key: str | None = None) -> str:
    """A short public name of the key (the first 12 hex digits of its SHA-256), kept on each event so a
    row sealed with another key is named as such."""
    return hashlib.sha256((key or settings.AUDIT_HMAC_KEY).encode()).hexdigest()[:12]


def seal(seq: int, prev: str, payload: dict[str, Any], key: str | None = None) -> str:
    blob = json.dumps({"seq": seq, "prev": prev, **payload}, sort_keys=True, separators=(",", ":"), default=str)
    return hmac.new((key or settings.AUDIT_HMAC_KEY).encode(), blob.encode(), hashlib.sha256).hexdigest()
