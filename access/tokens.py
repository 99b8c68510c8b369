"""API token secrets: generated with ``secrets``, stored as a salted, peppered SHA-256 (HMAC) digest.

A token reads ``ldt_<prefix>_<secret>``: the prefix (12 hex characters) is stored in clear to find the
row, the secret (43 URL-safe characters, 256 bits) only as its digest. Shown once, at creation.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from django.conf import settings

TOKEN_MARK = "ldt_"
PREFIX_LENGTH = 12


def generate() -> tuple[str, str, str]:
    """(token, prefix, salt) for a new token."""
    prefix = secrets.token_hex(PREFIX_LENGTH // 2)
    secret = secrets.token_urlsafe(32)
    return f"{TOKEN_MARK}{prefix}_{secret}", prefix, secrets.token_hex(16)


def split(token: str) -> tuple[str, str] | None:
    """(prefix, secret) of a well-formed token, else None."""
    if not token.startswith(TOKEN_MARK):
        return None
    prefix, sep, secret = token[len(TOKEN_MARK) :].partition("_")
    if not sep or len(prefix) != PREFIX_LENGTH or not secret:
        return None
    return prefix, secret


def _pepper() -> bytes:
    return (getattr(settings, "API_TOKEN_PEPPER", "") or settings.SECRET_KEY).encode()


def digest(token: str, salt: str) -> str:
    return hmac.new(_pepper(), f"{salt}:{token}".encode(), hashlib.sha256).hexdigest()


def verify(token: str, salt: str, expected: str) -> bool:
    return hmac.compare_digest(digest(token, salt), expected)
