"""Make a new web process's first request as fast as its later ones (called by ``liqo_dash.wsgi``).

Django loads lazily: the URL conf, the views and their imports, every template (compiled once by the
cached loader) and the database connection are set up by the first request that needs them, which
costs that request several hundred milliseconds. Done here at start, before the process takes
requests."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def warm() -> float:
    """Import the URL conf and its views, compile every project template, open the database
    connection; returns the seconds spent. Failures are logged, never raised: a process that could
    not warm up still serves (lazily)."""
    started = time.perf_counter()
    try:
        from django.conf import settings
        from django.db import connection
        from django.template import TemplateDoesNotExist, TemplateSyntaxError
        from django.template.loader import get_template
        from django.urls import get_resolver

        get_resolver().reverse_dict  # noqa: B018 - imports every view module and fills the reverse table
        engine: dict[str, Any] = settings.TEMPLATES[0]
        directories: list[str] = list(engine["DIRS"])
        for directory in directories:
            root = Path(directory)
            for path in sorted(root.rglob("*.html")):
                try:
                    get_template(str(path.relative_to(root)))
                except (TemplateDoesNotExist, TemplateSyntaxError) as exc:  # pragma: no cover - a broken template
                    log.warning("warm-up: template %s: %s", path, exc)
        connection.ensure_connection()
    except Exception:  # noqa: BLE001 - warming is an optimisation; never stop the process for it
        log.exception("warm-up failed; the first requests will load lazily")
    return time.perf_counter() - started
