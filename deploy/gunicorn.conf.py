"""gunicorn settings shared by the container image, the Procfile and the manifests (passed with -c; the
command line adds only the address to bind).

The web process serves open pages: each polls its live region every 2-5 s and the freshness badge every
10 s, and nearly every poll is a 304 or another viewer's render, answered in a few milliseconds
(docs/live-pages.md, bench/README.md "Open pages"):

- ``gthread`` workers, 2 per pod, 8 threads each. A kept-alive connection waits in the worker's
  poller, not in a thread, so threads bound only the requests in flight: 8 let the polls' 304s pass
  the few slow renders of a busy moment (a bulk applying) instead of queueing behind them. Each thread
  keeps its database connection (DATABASE_CONN_MAX_AGE): 16 per pod, count them against PostgreSQL's
  max_connections. A worker holds up to ``worker_connections`` open connections (browsers keep one or
  two per tab).
- ``keepalive`` 75 s: longer than the pollers' interval, so a browser's polls reuse their connection
  instead of opening one each time, and longer than the ingress controller's own idle timeout for
  upstream connections (ingress-nginx: 60 s), so the pod never closes a connection the proxy is about
  to reuse.
- No access log: one line per poll is most of what an open page costs the pod after its 304 (9 % of
  the polls' CPU, measured), and the request metrics (/metrics) count every answer anyway. Turn it on
  with gunicorn's own environment variable, ``GUNICORN_CMD_ARGS="--access-logfile -"``, which also
  takes any other setting (``--threads 16``, ``--workers 4``): the command line names none of these.

Prometheus multiprocess mode: every worker writes its counters into PROMETHEUS_MULTIPROC_DIR; the
directory is emptied when gunicorn starts and a dead worker's live gauges are dropped.
With LOG_FORMAT=json, gunicorn's error and access logs are JSON lines like the application's.
"""

import os
import shutil
import sys
from pathlib import Path

from gunicorn.glogging import Logger

worker_class = "gthread"
workers = 2
threads = 8
worker_connections = 1000
keepalive = 75
accesslog = None


class AccessLogWhenAsked(Logger):
    """gunicorn's logger, which writes the access log only when ``accesslog`` is set: gunicorn itself
    writes it whenever a logging configuration is given (LOG_FORMAT=json, below), asked or not."""

    def access(self, resp, req, environ, request_time):
        if self.cfg.accesslog:
            super().access(resp, req, environ, request_time)


logger_class = AccessLogWhenAsked

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


def post_fork(server, worker):
    # How long a thread may hold the GIL before another may take it (Python's default: 5 ms). The polls
    # of a worker give up the GIL at every read and write; behind a render that holds it, each waits up to
    # the whole interval to get it back.
    interval_ms = os.environ.get("WEB_GIL_SWITCH_MS")
    if interval_ms:
        sys.setswitchinterval(float(interval_ms) / 1000)
