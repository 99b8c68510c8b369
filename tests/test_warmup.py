"""A new web process warms up before its first request (liqo_dash.warmup, called by liqo_dash.wsgi)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from celery import signals
from django.template import engines

from liqo_dash import celery
from offloading.management.commands import live_renderer

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.django_db
def test_warm_compiles_every_project_template_into_the_cached_loader() -> None:
    from liqo_dash.warmup import warm

    loader = engines["django"].engine.template_loaders[0]  # type: ignore[attr-defined]
    loader.reset()
    assert "offloading/fleet_matrix.html" not in loader.get_template_cache
    warm()
    cached = set(loader.get_template_cache)
    project = {str(p.relative_to(ROOT / "templates")) for p in (ROOT / "templates").rglob("*.html")}
    assert project and project <= cached, sorted(project - cached)[:5]


def test_the_wsgi_entry_point_warms_up_unless_told_not_to() -> None:
    script = (
        "import liqo_dash.wsgi\n"
        "from django.template import engines\n"
        "print(len(engines['django'].engine.template_loaders[0].get_template_cache))\n"
    )
    counts = []
    for flag in ("true", "false"):
        counts.append(int(_run(script, LIQO_DASH_WARMUP=flag)[-1]))
    assert counts[0] >= 20 and counts[1] == 0


def test_warm_loads_what_a_first_request_would_load_lazily() -> None:
    # A new process (this one has loaded everything already): after django.setup() and warm(), the
    # middleware, the message storage, the context processors, the locale's formats and the cache
    # backend are imported, and no URL pattern is left to compile.
    script = (
        "import sys, django\n"
        "django.setup()\n"
        "from django.conf import settings\n"
        "from django.urls import get_resolver\n"
        "from liqo_dash.warmup import warm\n"
        "names = [p.rsplit('.', 1)[0] for p in [*settings.MIDDLEWARE, settings.MESSAGE_STORAGE,\n"
        "    *settings.TEMPLATES[0]['OPTIONS']['context_processors'], settings.CACHES['default']['BACKEND']]]\n"
        "names.append('django.conf.locale.en.formats')\n"
        "def lazy(patterns):\n"
        "    for p in patterns:\n"
        "        yield 'regex' not in p.pattern.__dict__\n"
        "        yield from lazy(getattr(p, 'url_patterns', []))\n"
        "print(sum(n not in sys.modules for n in names), sum(lazy(get_resolver().url_patterns)))\n"
        "warm()\n"
        "print(sorted(n for n in names if n not in sys.modules), sum(lazy(get_resolver().url_patterns)))\n"
    )
    before, after = _run(script)[-2:]
    not_loaded, lazy_patterns = (int(n) for n in before.split())
    assert not_loaded >= 5 and lazy_patterns >= 10  # what the first request would have paid for
    assert after == "[] 0"


def _run(script: str, **env: str) -> list[str]:
    """The lines ``python -c script`` prints in a new process (the test settings, plus ``env``): a
    process that has loaded nothing yet, as a new web worker."""
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "liqo_dash.settings_test", "LOG_LEVEL": "WARNING", **env},
    )
    return done.stdout.strip().splitlines()


def test_the_wsgi_entry_point_freezes_its_startup_heap_unless_told_not_to() -> None:
    """What a web worker loads at start is kept out of the collector's walks (liqo_dash.warmup.freeze_heap):
    a full collection then walks only what was made since. gc.get_objects() lists what the collector walks."""
    script = "import gc\nimport liqo_dash.wsgi\nprint(gc.get_freeze_count(), len(gc.get_objects()))\n"
    found = {}
    for flag in ("true", "false"):
        found[flag] = [int(n) for n in _run(script, LIQO_DASH_FREEZE_HEAP=flag)[-1].split()]
    (frozen, walked), (unfrozen, walked_without) = found["true"], found["false"]
    assert unfrozen == 0 and walked_without > 50_000  # without: the collector walks the whole startup heap
    assert frozen > 50_000 and walked < frozen / 20  # with: next to nothing is left to walk


def test_the_renderer_and_the_workers_pool_processes_freeze_theirs_too() -> None:
    assert celery._freeze_startup_heap in [ref() for _, ref in signals.worker_process_init.receivers]
    assert "freeze_heap" in live_renderer._settle.__code__.co_names
