"""Settings for liqo-dash, read from the environment (see .env.example for every variable).

The defaults run with nothing configured: SQLite under ``var/``, Redis on localhost, the kubeconfig
from ``KUBECONFIG`` or ``~/.kube/config`` (or the in-cluster service account).
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import dj_database_url
from cryptography.fernet import Fernet

from liqo_dash import env

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env.string("LIQO_DASH_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _secret(name: str, file_name: str) -> str:
    """``name`` from the environment, else one generated once and kept in var/ (never in git)."""
    configured = env.string(name)
    if configured:
        return configured
    key_file = VAR_DIR / file_name
    try:
        # O_EXCL: of several processes starting at once, exactly one writes the key.
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(50))
    for _ in range(50):
        key = key_file.read_text().strip()
        if key:
            return key
        time.sleep(0.1)  # another process created it and is still writing
    raise env.ConfigError(f"{key_file} is empty: delete it or set {name}")


SECRET_KEY = _secret("SECRET_KEY", "secret-key")
# The key of the audit trail's seals (HMAC-SHA256), separate from SECRET_KEY; generated into var/ when
# unset, which suits one machine (make run). With several replicas set it from a Secret: every process
# must seal with the same key.
AUDIT_HMAC_KEY = _secret("AUDIT_HMAC_KEY", "audit-hmac-key")
# Where audit_anchor writes the head of the trail: a JSON-lines file (appended to), or
# configmap:NAMESPACE/NAME to keep it in the cluster.
AUDIT_ANCHOR = env.string("AUDIT_ANCHOR", str(VAR_DIR / "audit-anchor.jsonl"))
DEBUG = env.boolean("DEBUG", False)
ALLOWED_HOSTS = env.string_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
# In Kubernetes the kubelet probes and Prometheus reach a pod by its IP (the Host header is the pod
# IP): the manifests pass it through the downward API so those requests are not refused.
if env.string("POD_IP"):
    ALLOWED_HOSTS.append(env.string("POD_IP"))
CSRF_TRUSTED_ORIGINS = env.string_list("CSRF_TRUSTED_ORIGINS", [])

# HTTPS by default whenever DEBUG is off: redirect to https, HSTS, cookies sent only over TLS.
# INSECURE_HTTP=true relaxes all of these for a plain-HTTP trial (and `make run` sets it).
INSECURE_HTTP = env.boolean("INSECURE_HTTP", False)
_TLS = not DEBUG and not INSECURE_HTTP
SECURE_SSL_REDIRECT = env.boolean("SECURE_SSL_REDIRECT", _TLS)
# Probes and scrapes come over plain HTTP from inside the cluster: never redirect them.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SECURE_HSTS_SECONDS = env.integer("SECURE_HSTS_SECONDS", 31536000 if _TLS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.boolean("SECURE_HSTS_INCLUDE_SUBDOMAINS", _TLS)
SECURE_HSTS_PRELOAD = env.boolean("SECURE_HSTS_PRELOAD", _TLS)
SESSION_COOKIE_SECURE = env.boolean("SESSION_COOKIE_SECURE", _TLS)
CSRF_COOKIE_SECURE = env.boolean("CSRF_COOKIE_SECURE", _TLS)
# Behind a TLS-terminating proxy or Ingress that sets X-Forwarded-Proto (and strips a client's own),
# trust it; otherwise every request looks like plain HTTP and is redirected forever.
if env.boolean("TRUST_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy (django-csp): everything from this origin only, no inline script or style
# (htmx's indicator styles are off, see base.html; the API docs use the split Swagger view, whose
# script is a file). CSP_REPORT_ONLY=true sends it as report-only while you try it out.
_CSP_DIRECTIVES = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "img-src": ["'self'", "data:"],
    "font-src": ["'self'"],
    "connect-src": ["'self'"],
    "object-src": ["'none'"],
    "base-uri": ["'self'"],
    "form-action": ["'self'"],
    "frame-ancestors": ["'none'"],
}
if env.boolean("CSP_REPORT_ONLY", False):
    CONTENT_SECURITY_POLICY_REPORT_ONLY = {"DIRECTIVES": _CSP_DIRECTIVES}
else:
    CONTENT_SECURITY_POLICY = {"DIRECTIVES": _CSP_DIRECTIVES}

# Sessions: two weeks by default; SESSION_COOKIE_AGE in seconds.
SESSION_COOKIE_AGE = env.integer("SESSION_COOKIE_AGE", 14 * 24 * 3600)
SESSION_EXPIRE_AT_BROWSER_CLOSE = env.boolean("SESSION_EXPIRE_AT_BROWSER_CLOSE", False)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_htmx",
    "django_filters",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "offloading",
]

MIDDLEWARE = [
    # First, so it counts every answer, including redirects and errors of the middleware below.
    "offloading.metrics.RequestMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # A live poll's 304 or shared render, before the session and page middleware (it checks the session
    # itself), and before the page's Content-Security-Policy (a region swapped into a page is under the
    # page's policy, and building the header was a sixth of a 304's work) and the static files.
    "offloading.middleware.LivePollMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "offloading.middleware.RequestContextMiddleware",
    "liqo_dash.logs.LogContextMiddleware",
]

ROOT_URLCONF = "liqo_dash.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "offloading.context_processors.snapshot_state",
            ],
        },
    },
]

WSGI_APPLICATION = "liqo_dash.wsgi.application"

# A connection is kept for a minute by default (0: one per request): a live poll costs a few indexed
# reads, and opening the connection cost as much as them (bench/README.md, viewers run). Each gunicorn
# thread and Celery process keeps its own; the health check reopens one the database dropped.
DATABASES = {
    "default": dj_database_url.parse(
        env.string("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}"),
        conn_max_age=env.integer("DATABASE_CONN_MAX_AGE", 60),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several processes (web, worker, beat) share the file: wait for locks instead of failing,
    # and use WAL so readers never block the writer.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 30, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"}
    )
    # ... in short steps (liqo_dash/sqlite/base.py): SQLite's own busy handler sleeps up to 100 ms.
    DATABASES["default"]["ENGINE"] = "liqo_dash.sqlite"

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "offloading:home"  # the overview: failures and stuck items first
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env.string("TIME_ZONE", "UTC")
# The pages are in English only and translate nothing: without the translation machinery every number and
# date a template prints skips a lookup of the active language (a thread-local read per value: at 10,000
# namespaces, half the overview's render; bench/README.md "Open pages"). The output is the same.
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

REDIS_URL = env.string("REDIS_URL", "redis://127.0.0.1:6379/0")

# The cache holds short-lived per-namespace locks shared by all workers, so it must be Redis
# whenever more than one process runs; the local-memory cache is only for eager unit tests.
if env.boolean("LIQO_DASH_LOCAL_CACHE", False):
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}

CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ALWAYS_EAGER = env.boolean("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True
# A task is acknowledged only after it ran, so a killed worker's task is redelivered; the apply is
# idempotent, so a redelivery is harmless.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# How many changes one worker pushes at once (prefork processes). The work waits on the API server,
# not the CPU, so more than the core count pays off; each process holds about 60 MB.
CELERY_WORKER_CONCURRENCY = env.integer("CELERY_WORKER_CONCURRENCY", 8)
CELERY_TASK_SOFT_TIME_LIMIT = env.integer("CELERY_TASK_SOFT_TIME_LIMIT", 60)
CELERY_TASK_TIME_LIMIT = env.integer("CELERY_TASK_TIME_LIMIT", 90)
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env.integer("CELERY_VISIBILITY_TIMEOUT", 300)}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = "liqo-dash"

LIQO_DASH: dict[str, Any] = {
    # Where the Kubernetes API is: "auto" tries in-cluster then KUBECONFIG / ~/.kube/config.
    "KUBE_CONFIG_MODE": env.string("KUBE_CONFIG_MODE", "auto"),
    "KUBECONFIG": env.string("KUBECONFIG", ""),
    "KUBE_CONTEXT": env.string("KUBE_CONTEXT", ""),
    "KUBE_REQUEST_TIMEOUT": env.number("KUBE_REQUEST_TIMEOUT", 10.0),
    # The local cluster id, used for DefaultName remote namespace names; discovered when empty.
    "LOCAL_CLUSTER_ID": env.string("LIQO_LOCAL_CLUSTER_ID", ""),
    # The watcher (manage.py watch_cluster) keeps the snapshot like an informer: one LIST per kind, then
    # WATCH; a full relist only at start, after 410 Gone and every RESYNC_INTERVAL seconds.
    "RESYNC_INTERVAL": env.number("LIQO_DASH_RESYNC_INTERVAL", 1800.0),
    # While every watch is synced, the watcher marks the snapshot fresh this often (the freshness badge
    # turns amber after two of these, red after five).
    "WATCH_HEARTBEAT": env.number("LIQO_DASH_WATCH_HEARTBEAT", 5.0),
    # A live poll that must render its region again, and holds an older render of it, has it rendered by
    # the web process's render process (its own interpreter: the render takes no GIL from the other polls,
    # offloading/views/liveaside.py) and waits this many milliseconds for it; past that it answers 304 and
    # the following polls share the render. 0: every poll renders in its own thread.
    "LIVE_RENDER_WAIT_MS": env.integer("LIQO_DASH_LIVE_RENDER_WAIT_MS", 150),
    # Seconds between two periodic full refreshes by beat; 0 (the default): none, the watcher keeps the
    # snapshot. (A full refresh of 10,000 namespaces and 200 peers reads about 60 MB; see bench/.)
    "REFRESH_INTERVAL": env.number("LIQO_DASH_REFRESH_INTERVAL", 0.0),
    # A snapshot whose last full refresh is older than this many seconds is shown as stale.
    "STALE_AFTER": env.number("LIQO_DASH_STALE_AFTER", 60.0),
    # Changes still queued/applying after this many seconds are re-enqueued by the sweeper.
    "STUCK_AFTER": env.number("LIQO_DASH_STUCK_AFTER", 60.0),
    "SWEEP_INTERVAL": env.number("LIQO_DASH_SWEEP_INTERVAL", 15.0),
    # The diagnosis calls an offloading stuck when it stays not Ready (or Terminating) this many minutes.
    "DIAGNOSIS_STUCK_MINUTES": env.number("LIQO_DASH_DIAGNOSIS_STUCK_MINUTES", 10.0),
    # Liqo's RuntimeClass (Helm offloading.runtimeClass.name): other than "liqo" is warned about (issue 27).
    "RUNTIME_CLASS": env.string("LIQO_DASH_RUNTIME_CLASS", "liqo") or "liqo",
    # Transient Kubernetes errors (no answer, timeouts, 5xx, 429) are retried with exponential backoff
    # and jitter, capped at APPLY_RETRY_CAP s (or the API server's Retry-After), for APPLY_RETRY_FOR s
    # from a change's first such error (a budget, not a count); while the API server is unreachable,
    # changes wait without retrying and resume as soon as a probe gets an answer.
    "APPLY_RETRY_FOR": env.number("LIQO_DASH_APPLY_RETRY_FOR", 900.0),
    "APPLY_RETRY_BASE": env.number("LIQO_DASH_APPLY_RETRY_BASE", 1.0),
    "APPLY_RETRY_CAP": env.number("LIQO_DASH_APPLY_RETRY_CAP", 5.0),
    # How long an unoffload waits for the object (and its finalizer) to disappear.
    "DELETE_WAIT": env.number("LIQO_DASH_DELETE_WAIT", 120.0),
    "FIELD_MANAGER": env.string("LIQO_DASH_FIELD_MANAGER", "liqo-dash"),
    # Ask the API server (dryRun=All) before queueing a change, so webhook denials show on the form.
    "DRY_RUN_ON_SUBMIT": env.boolean("LIQO_DASH_DRY_RUN_ON_SUBMIT", True),
    # One watcher writes each managed cluster's snapshot: the replica holding that cluster's
    # coordination.k8s.io Lease (LEADER_LEASE_NAME for the default cluster, LEADER_LEASE_NAME-<cluster>
    # for the others, in POD_NAMESPACE in a cluster; offloading/cluster/shares.py). Replicas share the
    # clusters; another takes a dead one's within LEADER_LEASE_SECONDS plus one renewal (2 s).
    "LEADER_ELECTION": env.boolean("LIQO_DASH_LEADER_ELECTION", True),
    "LEADER_LEASE_NAME": env.string("LIQO_DASH_LEADER_LEASE_NAME", "liqo-dash-watcher"),
    "LEADER_LEASE_NAMESPACE": env.string("LIQO_DASH_LEADER_LEASE_NAMESPACE", env.string("POD_NAMESPACE", "default")),
    "LEADER_LEASE_SECONDS": env.integer("LIQO_DASH_LEADER_LEASE_SECONDS", 10),
    # Requests a worker process keeps in flight to the API server while it pushes a bulk (its threads),
    # halved on every 429 and grown back one at a time: the API server's priority and fairness decides.
    "KUBE_MAX_INFLIGHT": env.integer("LIQO_DASH_KUBE_MAX_INFLIGHT", 32),
    # Managed clusters (issue 28): the changes of a non-default cluster go to the Celery queue
    # "<prefix><cluster pk>" (workers started with -Q celery,<prefix><pk>); empty: every change in the
    # default queue. The default cluster's changes always stay in the default queue.
    "CLUSTER_QUEUE_PREFIX": env.string("LIQO_DASH_CLUSTER_QUEUE_PREFIX", ""),
    # How many access reviews and dry-runs a bulk request sends to the API server at once.
    "DRY_RUN_CONCURRENCY": env.integer("LIQO_DASH_DRY_RUN_CONCURRENCY", 32),
    # Who checks each namespace of a bulk. "push" (default): the bulk is recorded at once and each push,
    # made as the user (impersonation) through Liqo's webhook, is the check; a namespace the cluster
    # refuses is reported as refused, with the reason, in the bulk's result. "request": an access review
    # and a dry-run per namespace before anything is recorded (two more round trips per namespace).
    "BULK_CHECKS": env.string("LIQO_DASH_BULK_CHECKS", "push"),
    # Notifications (README "Notifications"): Slack-compatible JSON POSTed to ALERT_WEBHOOK_URL when a change
    # fails, a namespace is stuck or a peer turns unhealthy (and when those recover); empty: off. Links
    # point at ALERT_DASHBOARD_URL (default: the first CSRF_TRUSTED_ORIGINS entry without a wildcard).
    # Stuck states and peers are checked every ALERT_INTERVAL s and told once they last ALERT_GRACE s;
    # a POST gives up after ALERT_WEBHOOK_TIMEOUT s.
    "ALERT_WEBHOOK_URL": env.string("ALERT_WEBHOOK_URL", ""),
    "ALERT_DASHBOARD_URL": env.string(
        "ALERT_DASHBOARD_URL", next((origin for origin in CSRF_TRUSTED_ORIGINS if "*" not in origin), "")
    ),
    "ALERT_INTERVAL": env.number("ALERT_INTERVAL", 30.0),
    "ALERT_GRACE": env.number("ALERT_GRACE", 60.0),
    "ALERT_WEBHOOK_TIMEOUT": env.number("ALERT_WEBHOOK_TIMEOUT", 5.0),
    # How Liqo was installed to reflect resources, for the namespace page's reflection section: the
    # policy per kind ("secret=AllowList,configmap=DenyList"; Helm offloading.reflection.<kind>.type,
    # DenyList by default), the kinds whose reflector has 0 workers, and --enable-apiserver-support.
    "REFLECTION_POLICIES": env.string("LIQO_DASH_REFLECTION_POLICIES", ""),
    "REFLECTION_DISABLED": env.string_list("LIQO_DASH_REFLECTION_DISABLED", []),
    "REFLECTION_APISERVER_SUPPORT": env.boolean("LIQO_DASH_REFLECTION_APISERVER_SUPPORT", True),
    # Change governance (offloading.governance.policy): which changes need a second person per scope
    # ("none" ships; "destructive" is recommended), how long a request waits, the change windows per scope.
    "APPROVAL_POLICY": env.string("LIQO_DASH_APPROVAL_POLICY", "none"),
    "APPROVAL_TTL": env.number("LIQO_DASH_APPROVAL_TTL", 86400.0),
    "CHANGE_WINDOWS": env.string("LIQO_DASH_CHANGE_WINDOWS", ""),
    "GOVERNANCE_INTERVAL": env.number("LIQO_DASH_GOVERNANCE_INTERVAL", 30.0),
}
for _name in ("ALERT_WEBHOOK_URL", "ALERT_DASHBOARD_URL"):
    if LIQO_DASH[_name] and not LIQO_DASH[_name].startswith(("http://", "https://")):
        raise env.ConfigError(f"{_name} must start with http:// or https://")

# The GitOps hand-off (offloading.gitops): the Git repository liqo-dash commits a change's files to, on a
# new branch from BRANCH, under PATH. HTTP basic: USERNAME, and the password read from PASSWORD_FILE (a
# mounted Secret) each time git asks for it, never from the URL. Empty REPO_URL: no repository (the files
# can still be downloaded). offloading.gitops.repo.RepoSettings.from_mapping checks the rest.
LIQO_DASH_GITOPS: dict[str, str] = {
    "REPO_URL": env.string("LIQO_DASH_GITOPS_REPO_URL", ""),
    "BRANCH": env.string("LIQO_DASH_GITOPS_BRANCH", "main"),
    "PATH": env.string("LIQO_DASH_GITOPS_PATH", "liqo-dash"),
    "USERNAME": env.string("LIQO_DASH_GITOPS_USERNAME", ""),
    "PASSWORD_FILE": env.string("LIQO_DASH_GITOPS_PASSWORD_FILE", ""),
}
if urlsplit(LIQO_DASH_GITOPS["REPO_URL"]).password is not None:
    raise env.ConfigError("LIQO_DASH_GITOPS_REPO_URL must not carry a password: use LIQO_DASH_GITOPS_PASSWORD_FILE")

# Managed clusters (issue 28, offloading.models.managed): the kubeconfig contexts (of KUBECONFIG) this
# installation manages, comma-separated, the first one the default; empty (the default): the current
# context alone, configured as above (KUBE_CONFIG_MODE, KUBE_CONTEXT), so a single-cluster install is
# unchanged. Admins may register more clusters in the UI: their credentials are encrypted with
# CREDENTIALS_KEY, Fernet keys (`Fernet.generate_key()`), comma-separated: the first encrypts, every one
# decrypts (rotation: put the new key first). Empty: registering credentials is refused.
LIQO_DASH_CLUSTERS: list[str] = env.string_list("LIQO_DASH_CLUSTERS", [])
LIQO_DASH_CREDENTIALS_KEY: list[str] = env.string_list("LIQO_DASH_CREDENTIALS_KEY", [])
for _key in LIQO_DASH_CREDENTIALS_KEY:
    try:
        Fernet(_key)
    except ValueError:
        raise env.ConfigError("LIQO_DASH_CREDENTIALS_KEY: each key must be a Fernet key (32 url-safe base64 bytes)")

CELERY_BEAT_SCHEDULE = {
    "verify-audit": {"task": "offloading.tasks.verify_audit", "schedule": 3600.0},
    # The trail's head, written outside the database (AUDIT_ANCHOR) every minute.
    "anchor-audit": {"task": "offloading.tasks.anchor_audit", "schedule": 60.0},
    # Cheap unless the API server is down or changes wait for it (then the probes chain every second).
    "probe-api": {"task": "offloading.tasks.probe_api", "schedule": 5.0},
    "sweep-stuck-changes": {"task": "offloading.tasks.sweep", "schedule": LIQO_DASH["SWEEP_INTERVAL"]},
    # Change governance: release scheduled changes whose window opened, expire approvals past their TTL.
    "release-scheduled-changes": {
        "task": "offloading.tasks.release_scheduled",
        "schedule": LIQO_DASH["GOVERNANCE_INTERVAL"],
    },
    "expire-approvals": {"task": "offloading.tasks.expire_approvals", "schedule": LIQO_DASH["GOVERNANCE_INTERVAL"]},
    # Managed clusters (issue 28): the configured contexts' rows, and each cluster's id, version and health.
    "refresh-managed-clusters": {"task": "offloading.tasks.refresh_managed_clusters", "schedule": 60.0},
}

if LIQO_DASH["ALERT_WEBHOOK_URL"]:
    # Finds stuck states and unhealthy peers, and sends again what the webhook has not taken yet.
    CELERY_BEAT_SCHEDULE["check-alerts"] = {
        "task": "offloading.tasks.check_alerts",
        "schedule": LIQO_DASH["ALERT_INTERVAL"],
    }

if LIQO_DASH["REFRESH_INTERVAL"] > 0:
    # A refresh of each managed cluster whose snapshot no watcher keeps (offloading.snapshot.refresh).
    CELERY_BEAT_SCHEDULE["refresh-snapshot"] = {
        "task": "offloading.tasks.refresh_unwatched",
        "schedule": LIQO_DASH["REFRESH_INTERVAL"],
    }

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "offloading.api.pagination.StrictLimitOffsetPagination",
    "PAGE_SIZE": 100,
    # JSON only, capped in size and nesting; every error is a Kubernetes-style Status (offloading/api/).
    "DEFAULT_PARSER_CLASSES": ["offloading.api.parsers.LimitedJSONParser"],
    "EXCEPTION_HANDLER": "offloading.api.errors.exception_handler",
}
# The product's version, shown in every page's footer and in the OpenAPI schema.
LIQO_DASH_VERSION = "0.1.0"
# Request bodies over 1 MiB are refused (413, see offloading.middleware) before anything reads them.
DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
SPECTACULAR_SETTINGS = {
    "TITLE": "liqo-dash API",
    "DESCRIPTION": "Namespace offloading for Liqo: peered clusters, namespaces, changes and audit.",
    "VERSION": LIQO_DASH_VERSION,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # No deep links: Swagger UI puts each one (a link) inside the operation's button (nested controls).
    "SWAGGER_UI_SETTINGS": {"deepLinking": False},
    "REDOC_DIST": "SIDECAR",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "offloading.api.docs.postprocess"],
    "ENUM_NAME_OVERRIDES": {
        "ChangeActionEnum": "offloading.choices.ChangeAction",
        "AuditActionEnum": "offloading.choices.AuditAction",
        "BulkActionEnum": [("offload", "offload"), ("unoffload", "unoffload")],
    },
}

# Logs: readable text by default; LOG_FORMAT=json prints one JSON object a line with the request id,
# user, change id and namespace when known (see liqo_dash/logs.py).
LOG_FORMAT = env.string("LOG_FORMAT", "text")
if LOG_FORMAT not in ("text", "json"):
    raise env.ConfigError(f"LOG_FORMAT must be 'text' or 'json', not {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "context": {"()": "liqo_dash.logs.ContextFilter"},
        "disallowed_host": {"()": "liqo_dash.logs.DisallowedHostFilter"},
    },
    "formatters": {
        "text": {"()": "liqo_dash.logs.TextFormatter"},
        "json": {"()": "liqo_dash.logs.JsonFormatter"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT, "filters": ["context"]},
    },
    "root": {"handlers": ["console"], "level": env.string("LOG_LEVEL", "INFO")},
    "loggers": {
        "kubernetes": {"level": "WARNING"},
        "urllib3": {"level": "WARNING"},
        # A bad Host header: one WARNING line naming the host, no traceback (liqo_dash/logs.py).
        "django.security.DisallowedHost": {"filters": ["disallowed_host"]},
    },
}

# Readiness (/readyz): the database and the broker must answer; by default the API server must have
# answered the last refresh and the snapshot must be younger than READY_SNAPSHOT_AGE seconds.
# LIQO_DASH_READY_CLUSTER_CHECKS=false reports those two without failing readiness on them.
READY_CLUSTER_CHECKS = env.boolean("LIQO_DASH_READY_CLUSTER_CHECKS", True)
READY_SNAPSHOT_AGE = env.number("LIQO_DASH_READY_SNAPSHOT_AGE", 300.0)

# Access control (access/): roles, operator scopes, API tokens, Kubernetes impersonation, login lockout
# and single sign-on. Every value comes from access/conf.py (read from the environment).
from access import conf as _access  # noqa: E402
from access.conf import *  # noqa: E402,F403

INSTALLED_APPS += _access.installed_apps()
MIDDLEWARE = _access.middleware(MIDDLEWARE)
AUTHENTICATION_BACKENDS = _access.authentication_backends()
REST_FRAMEWORK = _access.rest_framework(REST_FRAMEWORK)
_access.add_context_processor(TEMPLATES)
for _context in LIQO_DASH_CLUSTER_ACCESS:  # noqa: F405 - from access.conf
    if _context not in LIQO_DASH_CLUSTERS[1:]:
        raise env.ConfigError(
            f"LIQO_DASH_CLUSTER_ACCESS names {_context!r}, which is not a context of LIQO_DASH_CLUSTERS after the "
            "first (the default cluster follows KUBE_IMPERSONATE and KUBE_IMPERSONATE_GROUPS)"
        )
