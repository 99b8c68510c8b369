"""The three-way merge of a re-applied change: mine where only I changed a field, theirs where only
they did, an explicit choice where both did."""

from __future__ import annotations

import pytest

from offloading.changes.merge import MINE, THEIRS, merged, three_way

BASE = {"namespaceMappingStrategy": "DefaultName", "podOffloadingStrategy": "LocalAndRemote"}
EU = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "region", "operator": "In", "values": ["eu"]}]}]}


def test_each_side_keeps_the_fields_only_it_changed() -> None:
    fields = three_way(BASE, {**BASE, "clusterSelector": EU}, {**BASE, "podOffloadingStrategy": "Local"})
    by_name = {f.field: f for f in fields}
    assert by_name["podOffloadingStrategy"].automatic == MINE
    assert by_name["clusterSelector"].automatic == THEIRS
    assert not any(f.conflict for f in fields)
    spec, missing = merged(fields, {})
    assert missing == []
    assert spec == {"namespaceMappingStrategy": "DefaultName", "podOffloadingStrategy": "Local", "clusterSelector": EU}


def test_a_field_both_changed_needs_a_choice() -> None:
    fields = three_way(BASE, {**BASE, "podOffloadingStrategy": "Remote"}, {**BASE, "podOffloadingStrategy": "Local"})
    assert [f.field for f in fields if f.conflict] == ["podOffloadingStrategy"]
    assert merged(fields, {})[1] == ["podOffloadingStrategy"]
    assert merged(fields, {"podOffloadingStrategy": "nonsense"})[1] == ["podOffloadingStrategy"]
    assert merged(fields, {"podOffloadingStrategy": MINE})[0]["podOffloadingStrategy"] == "Local"
    assert merged(fields, {"podOffloadingStrategy": THEIRS})[0]["podOffloadingStrategy"] == "Remote"


def test_the_same_change_on_both_sides_is_no_conflict_and_defaults_count_as_set() -> None:
    same = three_way({}, {**BASE, "podOffloadingStrategy": "Local"}, {**BASE, "podOffloadingStrategy": "Local"})
    assert not any(f.conflict for f in same)
    # {} means the defaults: an explicit default is not a change.
    assert not any(f.mine != f.base for f in three_way({}, {}, BASE))
    with pytest.raises(ValueError):
        three_way(BASE, {**BASE, "podOffloadingStrategy": "Remote"}, {**BASE, "podOffloadingStrategy": "Local"})[
            2
        ].value("")
