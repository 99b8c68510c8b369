"""Make a new web process's first request as fast as its later ones (called by ``liqo_dash.wsgi``).

Django loads lazily: the URL conf, the views and their imports, every template (compiled once by the
cached loader), the middleware classes, the template context processors, the regular expressions of
the URL patterns, the cache backend and the database connection are set up by the first request that
needs them, which costs that request several hundred milliseconds. Done here at start, before the
process takes requests."""

from __future__ import annotations

import gc
import logging
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def warm() -> float:
    """Import the URL conf and its views, compile every project template and URL pattern, import the
    middleware, the context processors and the cache backend, open the database connection; returns
    the seconds spent. Failures are logged, never raised: a process that could not warm up still
    serves (lazily)."""
    started = time.perf_counter()
    try:
        from django.conf import settings
        from django.core.cache import caches
        from django.db import connection
        from django.template import Engine, TemplateDoesNotExist, TemplateSyntaxError
        from django.template.loader import get_template
        from django.urls import get_resolver
        from django.utils import formats
        from django.utils.module_loading import import_string

        get_resolver().reverse_dict  # noqa: B018 - imports every view module and fills the reverse table
        _compile_url_patterns(get_resolver().url_patterns)
        # The middleware classes: a WSGIHandler imports them when created (so this costs it nothing), a
        # handler created later (a test Client) at its first request. Not instantiated here: WhiteNoise's
        # scans the static files, which the WSGIHandler has just done.
        for dotted in settings.MIDDLEWARE:
            import_string(dotted)
        import_string(settings.MESSAGE_STORAGE)  # the messages middleware imports it at the first request
        formats.get_format_modules()  # the locale's formats, imported by the first page that formats a value
        Engine.get_default().template_context_processors  # noqa: B018 - imports them (cached)
        for alias in settings.CACHES:  # the backend class, imported and created; no connection yet
            caches[alias]  # noqa: B018
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


def freeze_heap() -> int:
    """Move everything the process holds now (its modules, URL patterns, compiled templates: ~185,000
    objects at start) out of the collector's sight; returns how many. Called once a long-lived process is
    set up (the web workers, their renderers, the worker's pool processes, the watcher).

    Why: CPython's full collection walks every tracked object, and it holds the GIL while it does: a web
    worker's full collection took 300-450 ms (on a busy machine), stopping every thread's poll in that
    worker meanwhile, and a render of the 10,000-namespace overview allocates enough to start one. What a
    process loads at start lives as long as the process, so the collector has nothing to gain there; after
    the freeze a full collection walks only what was made since (0.1 ms just after it). A collection runs
    first, so no garbage is frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def _compile_url_patterns(patterns: list[Any]) -> None:
    """Compile the regular expression of every URL pattern (Django compiles each on the first request
    that tries it)."""
    for pattern in patterns:
        pattern.pattern.regex  # noqa: B018 - compiled and cached on first access
        if hasattr(pattern, "url_patterns"):
            _compile_url_patterns(pattern.url_patterns)
