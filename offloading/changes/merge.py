"""Re-applying a change that ended in conflict, field by field (a three-way merge).

``base`` is the spec the requester saw, ``theirs`` what the cluster holds now, ``mine`` what the
requester asked for. A field only the requester changed takes mine; a field only the other writer
changed keeps theirs (it is never reverted silently); a field both changed, differently, is a conflict
the requester resolves explicitly (mine or theirs). Pure: specs in, specs out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from offloading.liqo.spec import FIELD_MAPPING, FIELD_POD, FIELD_REMOTE_NAME, FIELD_SELECTOR, apply_defaults

FIELDS = (FIELD_MAPPING, FIELD_REMOTE_NAME, FIELD_POD, FIELD_SELECTOR)
MINE, THEIRS = "mine", "theirs"


@dataclass(frozen=True)
class FieldMerge:
    field: str
    base: Any
    theirs: Any
    mine: Any

    @property
    def conflict(self) -> bool:
        """Both sides changed the field, to different values."""
        return self.mine != self.base and self.theirs != self.base and self.mine != self.theirs

    @property
    def automatic(self) -> str:
        """Whose value the field takes without asking ("" for a conflict)."""
        if self.conflict:
            return ""
        return MINE if self.mine != self.base else THEIRS

    def value(self, choice: str = "") -> Any:
        side = self.automatic or choice
        if side not in (MINE, THEIRS):
            raise ValueError(f"{self.field}: choose {MINE} or {THEIRS}")
        return self.mine if side == MINE else self.theirs


def _field(spec: dict[str, Any] | None, name: str) -> Any:
    value = apply_defaults(spec or {}).get(name)
    if name == FIELD_SELECTOR and not ((value or {}).get("nodeSelectorTerms")):
        return None
    return value or None


def three_way(base: dict[str, Any] | None, theirs: dict[str, Any] | None, mine: dict[str, Any]) -> list[FieldMerge]:
    return [FieldMerge(name, _field(base, name), _field(theirs, name), _field(mine, name)) for name in FIELDS]


def merged(fields: list[FieldMerge], choices: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    """The spec to apply, and the conflicting fields without a choice (then the spec is incomplete)."""
    spec: dict[str, Any] = {}
    missing: list[str] = []
    for entry in fields:
        if entry.conflict and choices.get(entry.field) not in (MINE, THEIRS):
            missing.append(entry.field)
            continue
        value = entry.value(choices.get(entry.field, ""))
        if value is not None:
            spec[entry.field] = value
    return spec, missing
