"""Re-applying a change that ended in conflict, field by field (a three-way merge).

``base`` is the spec the requester saw, ``theirs`` what the cluster holds now, ``mine`` what the
requester asked for. A field only the requester changed takes mine; a field only the other writer
changed keeps theirs (it is never reverted silently); a field both changed, differently, is a conflict
the requester resolves explicitly (mine or theirs). Pure: specs in, specs out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeGuard

from liqo_rules.selectors.format import format_term
from liqo_rules.selectors.requirements import UnformattableTermError
from liqo_rules.spec import FIELD_MAPPING, FIELD_POD, FIELD_REMOTE_NAME, FIELD_SELECTOR, apply_defaults
from offloading.whatif.impact import field_text

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


def field_value(spec: dict[str, Any] | None, name: str) -> Any:
    """One field of ``spec`` as the merge compares it: defaulted, None when unset (or an empty selector)."""
    value = apply_defaults(spec or {}).get(name)
    if name == FIELD_SELECTOR and not ((value or {}).get("nodeSelectorTerms")):
        return None
    return value or None


def three_way(base: dict[str, Any] | None, theirs: dict[str, Any] | None, mine: dict[str, Any]) -> list[FieldMerge]:
    return [
        FieldMerge(name, field_value(base, name), field_value(theirs, name), field_value(mine, name)) for name in FIELDS
    ]


def choose_message(name: str) -> str:
    """What a conflicting field without a choice says, on the change page and the edit form alike."""
    return f"{name} was changed by you and by someone else: choose {MINE} or {THEIRS}"


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


# --------------------------------------------------------------------------------------------------
# The same merge on the edit form: a stale edit is rebased on the current version, and the view of the
# fields that differ travels with the form (as JSON) until it is applied.

BASE = "base"


def rebase(
    base: dict[str, Any], theirs: dict[str, Any], mine: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The spec an edit made on ``base`` becomes on ``theirs`` (mine where both changed a field, until
    the requester chooses), and the three-way view of every field that differs (JSON)."""
    fields = three_way(base, theirs, mine)
    spec, _ = merged(fields, {f.field: MINE for f in fields if f.conflict})
    view = {
        f.field: {BASE: f.base, THEIRS: f.theirs, MINE: f.mine} for f in fields if not (f.base == f.theirs == f.mine)
    }
    return spec, view


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _readable_term(term: Any) -> bool:
    if not isinstance(term, dict):
        return False
    for key in ("matchExpressions", "matchFields"):
        expressions = term.get(key)
        if expressions is None:
            continue
        if not isinstance(expressions, list):
            return False
        for expression in expressions:
            if not isinstance(expression, dict):
                return False
            if not isinstance(expression.get("key", ""), str) or not isinstance(expression.get("operator", ""), str):
                return False
            if not _strings(expression.get("values") or []):
                return False
    return True


def readable(spec: Any) -> TypeGuard[dict[str, Any]]:
    """Whether ``spec`` has the shape of a NamespaceOffloading spec (strings, and a selector of terms of
    expressions), so that the merge can compare and print it: what a form sends back is not trusted."""
    if not isinstance(spec, dict):
        return False
    if any(not isinstance(spec.get(name), str | None) for name in (FIELD_MAPPING, FIELD_REMOTE_NAME, FIELD_POD)):
        return False
    selector = spec.get(FIELD_SELECTOR)
    if selector is None:
        return True
    if not isinstance(selector, dict):
        return False
    terms = selector.get("nodeSelectorTerms")
    return terms is None or (isinstance(terms, list) and all(_readable_term(term) for term in terms))


def read_view(value: Any) -> list[FieldMerge]:
    """The fields of a view :func:`rebase` made, read back from a form (JSON text or data); anything
    else (a value that is not a spec field, say) is no view."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return []
    if not isinstance(value, dict):
        return []
    entries = []
    for name in FIELDS:
        sides = value.get(name)
        if not isinstance(sides, dict):
            continue
        values = [sides.get(side) for side in (BASE, THEIRS, MINE)]
        if not all(readable(_as_spec(name, v)) for v in values):
            return []
        entries.append(FieldMerge(name, *values))
    return entries


def resolve_choices(entries: list[FieldMerge], spec: dict[str, Any], choices: dict[str, str]) -> list[str]:
    """Put into ``spec`` (the edited fields: mine) the choice made for each field both sides changed;
    the fields still in conflict without a choice are returned. A field edited since to agree with one
    side is no longer a conflict (the same rules as :func:`merged`)."""
    conflicts = [FieldMerge(e.field, e.base, e.theirs, field_value(spec, e.field)) for e in entries if e.conflict]
    resolved, missing = merged(conflicts, choices)
    for entry in conflicts:
        if entry.field in missing:
            continue
        if entry.field in resolved:
            spec[entry.field] = resolved[entry.field]
        else:
            spec.pop(entry.field, None)
    return missing


@dataclass(frozen=True)
class MergeRow:
    """One field of the three-way view of the edit form, in words."""

    merge: FieldMerge
    label: str
    form_field: str
    base: str
    theirs: str
    mine: str
    # What the form field holds for each side (the selector as lines), for the page's script.
    theirs_input: str
    mine_input: str
    # The choice the user made (a form shown again, with an error elsewhere).
    choice: str = ""

    @property
    def field(self) -> str:
        return self.merge.field

    @property
    def conflict(self) -> bool:
        return self.merge.conflict

    @property
    def automatic(self) -> str:
        return self.merge.automatic


def _as_spec(name: str, value: Any) -> dict[str, Any]:
    return {} if value is None else {name: value}


def _input_text(name: str, value: Any) -> str:
    if name != FIELD_SELECTOR:
        return "" if value is None else str(value)
    try:
        return "\n".join(format_term(term) for term in (value or {}).get("nodeSelectorTerms") or [])
    except UnformattableTermError:
        return ""


def merge_rows(
    entries: list[FieldMerge], labels: dict[str, str], form_fields: dict[str, str | None], choices: dict[str, str]
) -> list[MergeRow]:
    """The rows of the three-way view (``labels`` and ``form_fields``: per spec field; ``choices``: the
    posted ``choice_<field>`` values)."""
    return [
        MergeRow(
            entry,
            labels.get(entry.field, entry.field),
            form_fields.get(entry.field) or "",
            base=field_text(entry.field, _as_spec(entry.field, entry.base)),
            theirs=field_text(entry.field, _as_spec(entry.field, entry.theirs)),
            mine=field_text(entry.field, _as_spec(entry.field, entry.mine)),
            theirs_input=_input_text(entry.field, entry.theirs),
            mine_input=_input_text(entry.field, entry.mine),
            choice=choices.get(f"choice_{entry.field}", ""),
        )
        for entry in entries
    ]
