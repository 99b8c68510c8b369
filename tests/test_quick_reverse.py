"""switcher.quick_reverse: reverse() remembered, with every answer reverse() itself would give."""

from __future__ import annotations

import pytest
from django.urls import NoReverseMatch, clear_script_prefix, reverse, set_script_prefix

from offloading.switcher import quick_reverse


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("offloading:namespace_list", ()),
        ("offloading:namespace_detail", ("team-a",)),
        ("offloading:namespace_detail", ("ünïcode name",)),
        ("offloading:cluster_detail", ("cluster-0001",)),
        ("offloading:change_detail", (7,)),
    ],
)
def test_it_answers_as_reverse_does_first_and_again(name: str, args: tuple[object, ...]) -> None:
    expected = reverse(name, args=args or None)
    assert quick_reverse(name, args, {}) == expected
    assert quick_reverse(name, args, {}) == expected  # remembered


def test_an_argument_keeps_its_type_in_the_key() -> None:
    # 1 == 1.0 and hash(1) == hash(1.0): a key without the type would give one the other's URL.
    name = "offloading:namespace_detail"
    assert quick_reverse(name, (1,), {}) == reverse(name, args=[1]) == "/namespaces/1/"
    assert quick_reverse(name, (1.0,), {}) == reverse(name, args=[1.0]) == "/namespaces/1.0/"


def test_the_script_prefix_is_part_of_the_answer() -> None:
    plain = quick_reverse("offloading:namespace_detail", ("team-a",), {})
    try:
        set_script_prefix("/dash/")
        assert quick_reverse("offloading:namespace_detail", ("team-a",), {}) == "/dash" + plain
    finally:
        clear_script_prefix()
    assert quick_reverse("offloading:namespace_detail", ("team-a",), {}) == plain


def test_no_match_is_raised_every_time_and_an_unhashable_argument_is_reversed_directly() -> None:
    for _ in range(2):
        with pytest.raises(NoReverseMatch):
            quick_reverse("offloading:namespace_detail", ("a/b",), {})
    assert quick_reverse("offloading:namespace_detail", (), {"name": "team-a"}) == reverse(
        "offloading:namespace_detail", kwargs={"name": "team-a"}
    )
    unhashable = [1, 2]  # not a key: reverse() answers it, as it would have
    assert quick_reverse("offloading:namespace_detail", (unhashable,), {}) == reverse(
        "offloading:namespace_detail", args=[unhashable]
    )
