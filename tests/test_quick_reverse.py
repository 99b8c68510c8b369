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


def test_only_names_and_numbers_are_remembered() -> None:
    """An object's text can change under the same hash: such an argument is reversed every time."""

    class Named:
        def __init__(self, text: str) -> None:
            self.text = text

        def __str__(self) -> str:
            return self.text

        def __hash__(self) -> int:
            return 1

    name, found = "offloading:namespace_detail", Named("first")
    assert quick_reverse(name, (found,), {}) == "/namespaces/first/"
    found.text = "second"
    assert quick_reverse(name, (found,), {}) == "/namespaces/second/"
    # 1 and 1.0 are equal keys: the float is reversed as reverse() writes it, never the int's URL.
    assert quick_reverse(name, (1,), {}) == "/namespaces/1/"
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
