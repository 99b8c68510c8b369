"""Settings for the Liqo core tests that apply only under mutation testing (``make mutation``).

mutmut sets MUTANT_UNDER_TEST in its workers. There, Hypothesis runs derandomized (the same examples
every time, so a cached verdict stays true) and does not shrink a failure (a mutant only needs to fail),
and the example-based tests run before the property-based ones, so a mutant is usually killed within
milliseconds instead of after seconds of generated examples; a test that hangs fails after a few
seconds. Normal test runs are unaffected.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import Phase, settings

UNDER_MUTATION = "MUTANT_UNDER_TEST" in os.environ

if UNDER_MUTATION:
    settings.register_profile(
        "mutation",
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
        print_blob=False,
    )
    settings.load_profile("mutation")


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    if not UNDER_MUTATION:
        return
    items.sort(key=lambda item: "test_properties" in item.nodeid)
    # A mutant that makes the code loop fails the first test it hangs (pytest-timeout), instead of
    # holding a worker until mutmut's own limit for the whole test set.
    for item in items:
        item.add_marker(pytest.mark.timeout(30 if "test_properties" in item.nodeid else 3))
