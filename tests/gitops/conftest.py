"""The Git servers of the hand-off tests, each stopped and its files removed after the test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gitops.gitserver import GitDaemon, GitHttpServer, seed

HTTP_USER = "fleet-bot"
HTTP_PASSWORD = "s3cret-Pa55-for-the-fleet"


@pytest.fixture
def served(tmp_path: Path) -> Path:
    """The directory both servers serve, with fleet.git seeded (two commits on main)."""
    root = tmp_path / "served"
    root.mkdir()
    seed(root)
    return root


@pytest.fixture
def daemon(served: Path) -> Iterator[GitDaemon]:
    server = GitDaemon(served).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def http_server(served: Path) -> Iterator[GitHttpServer]:
    server = GitHttpServer(served, HTTP_USER, HTTP_PASSWORD).start()
    try:
        yield server
    finally:
        server.stop()
