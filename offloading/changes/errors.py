"""The errors a change request can be refused with."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


class ChangeRejected(Exception):
    """The change breaks a rule; ``errors`` maps a field name to its messages."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{k}: {m}" for k, msgs in errors.items() for m in msgs))
        self.errors = errors
