"""A request with a ``Host`` header outside ALLOWED_HOSTS is answered 400 and logged as one WARNING line
naming the host, without a traceback (Django logs it at ERROR with the exception's traceback)."""

from __future__ import annotations

import io
import json
import logging
import logging.config
from collections.abc import Callable
from typing import Any

import pytest

BAD_HOST = "evil.example.net"


def _console_lines(fmt: str, emit: Callable[[], Any]) -> list[str]:
    """What the configured console handler prints while ``emit`` runs."""
    from django.conf import settings

    config = json.loads(json.dumps(settings.LOGGING))
    config["handlers"]["console"]["formatter"] = fmt
    config["handlers"]["console"]["stream"] = "ext://sys.stdout"
    stream = io.StringIO()
    logging.config.dictConfig(config)
    try:
        logging.getLogger().handlers[0].setStream(stream)  # type: ignore[attr-defined]
        emit()
    finally:
        logging.config.dictConfig(settings.LOGGING)
    return stream.getvalue().splitlines()


@pytest.mark.django_db
def test_a_bad_host_is_one_warning_without_traceback(client: Any, caplog: Any) -> None:
    with caplog.at_level(logging.INFO):
        response = client.get("/healthz", HTTP_HOST=BAD_HOST)
    assert response.status_code == 400
    records = [r for r in caplog.records if r.name.startswith("django.") and r.levelno >= logging.WARNING]
    assert len(records) == 1, [(r.name, r.levelname, r.getMessage()) for r in records]
    (record,) = records
    assert record.name == "django.security.DisallowedHost"
    assert record.levelno == logging.WARNING and record.levelname == "WARNING"
    assert record.exc_info is None and record.exc_text is None
    assert BAD_HOST in record.getMessage()


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_the_console_prints_one_line(client: Any, fmt: str) -> None:
    answers: list[int] = []

    def emit() -> None:
        answers.append(client.get("/healthz", HTTP_HOST=BAD_HOST).status_code)

    lines = _console_lines(fmt, emit)
    assert answers == [400]
    assert len(lines) == 1, lines
    assert "Traceback" not in lines[0]
    if fmt == "json":
        record = json.loads(lines[0])
        assert record["level"] == "WARNING" and record["logger"] == "django.security.DisallowedHost"
        assert BAD_HOST in record["message"] and "exc_info" not in record
    else:
        assert " WARNING django.security.DisallowedHost " in lines[0] and BAD_HOST in lines[0]


@pytest.mark.django_db
def test_an_invalid_host_is_named_safely(client: Any, caplog: Any) -> None:
    """A Host that is not even a domain name: still one WARNING, the value quoted (no raw control chars)."""
    with caplog.at_level(logging.INFO):
        response = client.get("/healthz", HTTP_HOST="bad host\r\nforged: line")
    assert response.status_code == 400
    records = [r for r in caplog.records if r.name == "django.security.DisallowedHost"]
    assert len(records) == 1 and records[0].levelno == logging.WARNING and records[0].exc_info is None
    assert "\n" not in records[0].getMessage() and "forged" in records[0].getMessage()


@pytest.mark.django_db
def test_other_security_records_keep_their_level(caplog: Any) -> None:
    """Only DisallowedHost is quieted: another django.security logger still reports an ERROR."""
    with caplog.at_level(logging.INFO):
        logging.getLogger("django.security.SuspiciousSession").error("boom", exc_info=ValueError("x"))
    (record,) = [r for r in caplog.records if r.name == "django.security.SuspiciousSession"]
    assert record.levelno == logging.ERROR and record.exc_info is not None
