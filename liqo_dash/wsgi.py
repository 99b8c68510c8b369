"""WSGI entry point (gunicorn liqo_dash.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "liqo_dash.settings")

application = get_wsgi_application()

if os.environ.get("LIQO_DASH_WARMUP", "true").lower() not in ("0", "false", "no"):
    from liqo_dash.warmup import warm

    warm()

if os.environ.get("LIQO_DASH_FREEZE_HEAP", "true").lower() not in ("0", "false", "no"):
    from liqo_dash.warmup import freeze_heap

    freeze_heap()
