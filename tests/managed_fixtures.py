"""Fixtures of the managed-cluster tests (a plugin of tests/conftest.py): ``fresh_clients`` starts and ends
a test with no cached cluster client (a module uses it with ``pytest.mark.usefixtures``), ``key``
configures a fresh credentials key (LIQO_DASH_CREDENTIALS_KEY)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from cryptography.fernet import Fernet

from offloading.cluster import managed as managedclient


@pytest.fixture
def fresh_clients() -> Iterator[None]:
    managedclient.forget_clients()
    yield
    managedclient.forget_clients()


@pytest.fixture
def key(settings: Any) -> str:
    value = Fernet.generate_key().decode()
    settings.LIQO_DASH_CREDENTIALS_KEY = [value]
    return value
