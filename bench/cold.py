"""Cold page renders: each page's first request in a new process, as a just-started web worker serves it.

``python -m bench.cold`` reads a JSON list of pages on stdin (name, method, url, data) and prints a JSON
object {name: milliseconds}; the database and settings come from the environment (``DATABASE_URL``,
``LIQO_DASH_VAR_DIR``), as the benchmark set them. The process starts like ``liqo_dash.wsgi``: Django set
up, then :func:`liqo_dash.warmup.warm`; nothing else has been requested before the timed one. One
process per page, so no page profits from another's templates or queries.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.harness import ROOT


def measure(pages: list[dict[str, Any]]) -> dict[str, float]:
    """{name: ms of the first request} for each page, each in a new process."""
    found: dict[str, float] = {}
    for page in pages:
        done = subprocess.run(
            [sys.executable, "-m", "bench.cold"],
            input=json.dumps([page]),
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "LOG_LEVEL": "WARNING"},
            check=False,
            timeout=300,
        )
        if done.returncode != 0:
            raise RuntimeError(f"cold render of {page['url']} failed:\n{done.stderr[-2000:]}")
        found.update(json.loads(done.stdout.strip().splitlines()[-1]))
    return found


def _first_requests(pages: list[dict[str, Any]]) -> dict[str, float]:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client

    from liqo_dash.warmup import warm

    warm()
    user = get_user_model().objects.filter(is_superuser=True).order_by("pk").first()
    if user is None:
        raise RuntimeError("no administrator in the benchmark database")
    client = Client()
    client.force_login(user)
    timings = {}
    for page in pages:
        data = page.get("data")
        started = time.perf_counter()
        if isinstance(data, str):
            response = client.post(page["url"], data, content_type="application/json")
        elif page.get("method") == "POST":
            response = client.post(page["url"], data or {})
        else:
            response = client.get(page["url"])
        timings[page["name"]] = round((time.perf_counter() - started) * 1000, 1)
        if response.status_code not in (200, 286):
            raise RuntimeError(f"{page['url']} answered {response.status_code}")
    return timings


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    print(json.dumps(_first_requests(json.loads(sys.stdin.read()))))
