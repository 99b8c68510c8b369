"""gunicorn settings shared by the container image, the Procfile and `make run` (passed with -c).

Prometheus multiprocess mode: every worker writes its counters into PROMETHEUS_MULTIPROC_DIR; the
directory is emptied when gunicorn starts and a dead worker's live gauges are dropped.
With LOG_FORMAT=json, gunicorn's error and access logs are JSON lines like the application's.
"""

import os
import shutil
from pathlib import Path

_multiproc_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR")


def on_starting(server):
    if _multiproc_dir:
        path = Path(_multiproc_dir)
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)


def child_exit(server, worker):
    if _multiproc_dir:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


if os.environ.get("LOG_FORMAT") == "json":
    logconfig_dict = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "liqo_dash.logs.JsonFormatter"}},
        "handlers": {
            "error_console": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"},
            "console": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stdout"},
        },
        "loggers": {
            "gunicorn.error": {"handlers": ["error_console"], "level": "INFO", "propagate": False},
            "gunicorn.access": {"handlers": ["console"], "level": "INFO", "propagate": False},
        },
    }
