"""The benchmarks' --fleet argument (bench.harness.fleet_size), shared by python -m bench, bench.domain and
bench.viewers: NAMESPACESxCLUSTERS, or argparse's error naming what was given."""

from __future__ import annotations

import argparse

import pytest

from bench.harness import fleet_size


def test_a_fleet_is_namespaces_by_clusters() -> None:
    assert fleet_size("10000x200") == (10_000, 200)
    assert fleet_size("1000X20") == (1_000, 20)


@pytest.mark.parametrize("text", ["10x", "x5", "1000", "ax3", "10x5x2", "0x5", "10x0", "-1x5"])
def test_anything_else_is_an_argument_error(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        fleet_size(text)
    assert "fleet" in str(refused.value) or repr(text) in str(refused.value)
