"""Settings for the test suite: the real settings with eager Celery, a local-memory cache and a
file-based SQLite test database (so worker processes started by end-to-end tests can share it)."""

import os
import tempfile

# A pytest-xdist worker inherits the controller's environment, and so its directory: each worker takes its
# own (the programs a worker's tests start inherit the worker's, as they inherit a lone run's).
_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _worker and os.environ.get("LIQO_DASH_TEST_VAR_OWNER") != _worker:
    os.environ["LIQO_DASH_VAR_DIR"] = os.path.join(tempfile.gettempdir(), f"liqo-dash-test-{os.getpid()}")
    os.environ["LIQO_DASH_TEST_VAR_OWNER"] = _worker
os.environ.setdefault("LIQO_DASH_VAR_DIR", os.path.join(tempfile.gettempdir(), f"liqo-dash-test-{os.getpid()}"))
os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "true")
os.environ.setdefault("LIQO_DASH_LOCAL_CACHE", "true")
# Never reach a cluster of the machine running the tests: tests that need one use the sandbox.
os.environ.setdefault("KUBE_CONFIG_MODE", "kubeconfig")
os.environ.setdefault("KUBECONFIG", os.path.join(os.environ["LIQO_DASH_VAR_DIR"], "no-such-kubeconfig"))
os.environ.setdefault("LIQO_DASH_DRY_RUN_ON_SUBMIT", "false")
# The test client and live servers speak plain HTTP.
os.environ.setdefault("INSECURE_HTTP", "true")

from liqo_dash.settings import *  # noqa: E402,F403
from liqo_dash.settings import DATABASES, VAR_DIR  # noqa: E402

if "sqlite" in DATABASES["default"]["ENGINE"]:  # Django's backend or ours (liqo_dash/sqlite)
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-db.sqlite3")}

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Serve static files from the app directories without collectstatic.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
