"""Strict helpers to read settings from the environment.

Every helper also honours ``<NAME>_FILE`` (a path whose content is the value), so secrets can be
mounted as files. Booleans accept only ``true`` or ``false`` (any case): a typo fails loudly at startup
instead of silently meaning "off".
"""

from __future__ import annotations

import os
from pathlib import Path


class ConfigError(RuntimeError):
    """A setting in the environment has a value we refuse to guess about."""


def raw(name: str) -> str | None:
    """The value of NAME, or the content of the file named by NAME_FILE, or None."""
    value = os.environ.get(name)
    file_name = os.environ.get(f"{name}_FILE")
    if value is not None and file_name is not None:
        raise ConfigError(f"set either {name} or {name}_FILE, not both")
    if file_name is not None:
        return Path(file_name).read_text().strip()
    return value


def string(name: str, default: str = "") -> str:
    value = raw(name)
    return default if value is None or value == "" else value


def boolean(name: str, default: bool) -> bool:
    value = raw(name)
    if value is None or value == "":
        return default
    lowered = value.strip().lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    raise ConfigError(f"{name} must be 'true' or 'false', not {value!r}")


def integer(name: str, default: int) -> int:
    value = raw(name)
    if value is None or value == "":
        return default
    try:
        return int(value.strip(), 10)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, not {value!r}") from None


def number(name: str, default: float) -> float:
    value = raw(name)
    if value is None or value == "":
        return default
    try:
        return float(value.strip())
    except ValueError:
        raise ConfigError(f"{name} must be a number, not {value!r}") from None


def string_list(name: str, default: list[str]) -> list[str]:
    value = raw(name)
    if value is None or value.strip() == "":
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]
