"""WSGI entry point (gunicorn liqo_dash.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "liqo_dash.settings")

application = get_wsgi_application()
