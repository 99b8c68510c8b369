"""liqo-dash: a dashboard and REST API for Liqo namespace offloading."""

from liqo_dash.celery import app as celery_app

__all__ = ("celery_app",)
