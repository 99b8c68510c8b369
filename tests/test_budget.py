"""The suite's budget (tests/budget.py): a whole lane that collects more than 1 % fewer tests than
tests/budget.toml keeps fails, whatever else passed."""

from __future__ import annotations

from tests import budget, lanes


def test_a_drop_of_more_than_one_percent_fails_and_says_how_many() -> None:
    counts = {"all": 1000}
    assert budget.verdict("all", 1000, counts) is None
    assert budget.verdict("all", 990, counts) is None  # 1 % may go unremarked (a test merged into another)
    assert budget.verdict("all", 1200, counts) is None  # more tests: the kept count is updated in review
    problem = budget.verdict("all", 989, counts)
    assert problem is not None and "11 fewer than the 1000" in problem


def test_a_lane_without_a_kept_count_fails() -> None:
    problem = budget.verdict("postgres", 500, {"all": 1000})
    assert problem is not None and "--update-test-count" in problem


def test_every_lane_the_makefile_runs_has_a_kept_count() -> None:
    makefile = (lanes.TESTS.parent / "Makefile").read_text()
    assert f"POSTGRES_LANE := {lanes.POSTGRES_LANE}" in makefile
    assert f'-m "{lanes.FAST_LANE}"' in makefile
    assert set(budget.LANES.values()) <= set(budget.kept())
