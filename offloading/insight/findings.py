"""What the diagnosis says about a namespace: one finding per rule that fires (``offloading.insight.diagnosis``
and the resource rules of ``offloading.insight.resourcerules`` both produce them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    rule: str
    title: str
    explanation: str
    action: str
    severity: str = "warn"  # or "bad", or "info" (nothing wrong yet: what is going on)
