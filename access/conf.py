"""Settings of the access app, read from the environment (plain module-level values), and the small
functions that add the app to INSTALLED_APPS, MIDDLEWARE, AUTHENTICATION_BACKENDS and REST_FRAMEWORK.

``liqo_dash/settings.py`` applies them in one block at its end; tests override the Django settings
(``settings.KUBE_IMPERSONATE`` ...), which is what the code reads at run time.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from liqo_dash import env

# --- Kubernetes impersonation ---------------------------------------------------------------------
# On: every push goes to the cluster as the user who asked (Impersonate-User = prefix + username,
# Impersonate-Group = the group of the user's role), so the cluster's RBAC has the last word. Off: the
# dashboard pushes as its own identity and only the dashboard's roles and scopes protect the cluster.
KUBE_IMPERSONATE = env.boolean("KUBE_IMPERSONATE", True)
# Dashboard users live in their own name space on the cluster: "alice" is impersonated as
# "liqo-dash:alice", never as a cluster user (or a "system:" identity) of the same name.
KUBE_IMPERSONATE_USER_PREFIX = env.string("KUBE_IMPERSONATE_USER_PREFIX", "liqo-dash:")
KUBE_IMPERSONATE_GROUPS = env.string(
    "KUBE_IMPERSONATE_GROUPS", "viewer=liqo-dash:viewers,operator=liqo-dash:operators,admin=liqo-dash:admins"
)


# --- Access per managed cluster (issue 28) ---------------------------------------------------------
ROLE_NAMES = ("viewer", "operator", "admin")  # the dashboard's roles, lowest to highest (access.roles)


class RoleConfigError(ValueError):
    """KUBE_IMPERSONATE_GROUPS (or OIDC_ROLE_GROUPS, or a managed cluster's map) cannot be read."""


def parse_role_map(text: str, setting: str = "KUBE_IMPERSONATE_GROUPS") -> dict[str, str]:
    """``viewer=a,operator=b,admin=c`` -> {"viewer": "a", ...}; every role at most once, known roles
    only. (One group per role: the Kubernetes client sends each header name once.)"""
    mapping: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        role, sep, group = (s.strip() for s in item.partition("="))
        if not sep or not group:
            raise RoleConfigError(f"{setting}: {item!r} is not ROLE=GROUP")
        if role not in ROLE_NAMES:
            raise RoleConfigError(f"{setting}: unknown role {role!r} (roles: {', '.join(ROLE_NAMES)})")
        if role in mapping:
            raise RoleConfigError(f"{setting}: role {role!r} appears twice")
        mapping[role] = group
    return mapping


def impersonation_groups(text: str, setting: str) -> str:
    """A managed cluster's map of roles to the groups impersonated there, checked and written canonically
    (``role=group`` joined by commas): :func:`parse_role_map`, and no ``system:`` group (it would give a
    role the cluster: ``system:masters``), no whitespace in a group."""
    mapping = parse_role_map(text, setting)
    for role, group in mapping.items():
        if group.startswith("system:"):
            raise RoleConfigError(f"{setting}: {role}={group}: a system: group is never impersonated")
        if any(c.isspace() for c in group):
            raise RoleConfigError(f"{setting}: {role}={group}: a group name has no spaces")
    return ",".join(f"{role}={group}" for role, group in mapping.items())


def cluster_access(text: str, setting: str = "LIQO_DASH_CLUSTER_ACCESS") -> dict[str, dict[str, str]]:
    """``CONTEXT => impersonation=off groups=viewer=a,operator=b; CONTEXT => ...`` -> {context:
    {"impersonation": "off", "impersonation_groups": "viewer=a,operator=b"}}: the access of the managed
    clusters of LIQO_DASH_CLUSTERS where it differs from the installation's (``=>`` because a context's
    name may hold ``:`` and ``=``, as an EKS ARN does). A setting left out inherits."""
    found: dict[str, dict[str, str]] = {}
    for entry in (part.strip() for part in text.split(";")):
        if not entry:
            continue
        context, sep, rest = (s.strip() for s in entry.partition("=>"))
        if not sep or not context:
            raise RoleConfigError(f"{setting}: {entry!r} is not CONTEXT => SETTINGS")
        if context in found:
            raise RoleConfigError(f"{setting}: context {context!r} appears twice")
        access: dict[str, str] = {}
        for item in rest.split():
            key, eq, value = item.partition("=")
            if key == "impersonation" and eq and value in ("on", "off"):
                access["impersonation"] = value
            elif key == "groups" and eq:
                access["impersonation_groups"] = impersonation_groups(value, f"{setting} ({context})")
            else:
                raise RoleConfigError(
                    f"{setting} ({context}): {item!r} is neither impersonation=on|off nor groups=ROLE=GROUP,..."
                )
        if not access:
            raise RoleConfigError(f"{setting} ({context}): nothing set (impersonation=on|off, groups=ROLE=GROUP,...)")
        found[context] = access
    return found


# Per managed cluster of LIQO_DASH_CLUSTERS (not the first, the default: KUBE_IMPERSONATE* are its own):
# impersonation on or off and the roles' groups there, e.g. "milan => impersonation=off; naples =>
# groups=viewer=naples:readers,operator=naples:offloaders". Written into the clusters' rows by every
# process (offloading.models.managed.ensure_configured); their Access pages are then read-only.
try:
    LIQO_DASH_CLUSTER_ACCESS = cluster_access(env.string("LIQO_DASH_CLUSTER_ACCESS", ""))
except RoleConfigError as _exc:
    raise env.ConfigError(str(_exc)) from None

# --- API tokens -----------------------------------------------------------------------------------
# Days a new token lives when its creator does not say (0: no expiry).
API_TOKEN_DEFAULT_DAYS = env.integer("API_TOKEN_DEFAULT_DAYS", 90)
# The pepper mixed into every token hash; empty means SECRET_KEY (rotating it then invalidates tokens).
API_TOKEN_PEPPER = env.string("API_TOKEN_PEPPER", "")
# DRF throttle rates: requests without credentials, requests with a token, and failed token attempts
# per client address (the brute-force brake).
API_THROTTLE_ANON = env.string("API_THROTTLE_ANON", "60/minute")
API_THROTTLE_TOKEN = env.string("API_THROTTLE_TOKEN", "1200/minute")
API_THROTTLE_TOKEN_FAILURES = env.string("API_THROTTLE_TOKEN_FAILURES", "10/minute")
# How many reverse proxies in front of the app append to X-Forwarded-For (1 behind the Ingress): the
# client is that entry from the right. 0: the header is ignored and the client is REMOTE_ADDR. Read by
# access.clientip, the one place that names the client address (throttles, login lockout, logs).
TRUSTED_PROXIES = env.integer("TRUSTED_PROXIES", 0)
if TRUSTED_PROXIES < 0:
    raise env.ConfigError(f"TRUSTED_PROXIES must be 0 or more, not {TRUSTED_PROXIES}")

# --- Login lockout (django-axes) ------------------------------------------------------------------
AXES_ENABLED = env.boolean("AXES_ENABLED", True)
AXES_FAILURE_LIMIT = env.integer("AXES_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env.integer("AXES_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "access/locked_out.html"
# The same client address as the API throttles (X-Forwarded-For only as far as TRUSTED_PROXIES says).
AXES_CLIENT_IP_CALLABLE = "access.clientip.client_address"

# --- Password reset: offered only when email is configured -----------------------------------------
EMAIL_HOST = env.string("EMAIL_HOST", "")
EMAIL_PORT = env.integer("EMAIL_PORT", 587)
EMAIL_HOST_USER = env.string("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env.string("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env.boolean("EMAIL_USE_TLS", True)
DEFAULT_FROM_EMAIL = env.string("DEFAULT_FROM_EMAIL", "liqo-dash@localhost")
PASSWORD_RESET_ENABLED = bool(EMAIL_HOST)

# --- Single sign-on with OpenID Connect (mozilla-django-oidc) --------------------------------------
OIDC_RP_CLIENT_ID = env.string("OIDC_RP_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = env.string("OIDC_RP_CLIENT_SECRET", "")
OIDC_OP_AUTHORIZATION_ENDPOINT = env.string("OIDC_OP_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = env.string("OIDC_OP_TOKEN_ENDPOINT", "")
OIDC_OP_USER_ENDPOINT = env.string("OIDC_OP_USER_ENDPOINT", "")
OIDC_OP_JWKS_ENDPOINT = env.string("OIDC_OP_JWKS_ENDPOINT", "")
OIDC_RP_SIGN_ALGO = env.string("OIDC_RP_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = env.string("OIDC_RP_SCOPES", "openid email profile")
OIDC_VERIFY_SSL = env.boolean("OIDC_VERIFY_SSL", True)
# The provider's issuer (the discovery document's "issuer"): SSO users are keyed by it and the ID token's
# "sub", and the ID token's "iss" must equal it. Unset, "iss" must be on the same origin (scheme, host,
# port) as OIDC_OP_AUTHORIZATION_ENDPOINT and users are keyed by that "iss"; setting it later to the same
# value keeps every SSO user. Set it whenever one host serves several issuers (Keycloak realms ...).
OIDC_OP_ISSUER = env.string("OIDC_OP_ISSUER", "")
# PKCE (S256) on every authorization request.
OIDC_USE_PKCE = env.boolean("OIDC_USE_PKCE", True)
# Seconds an SSO sign-in holds before the next page load checks it again with the provider (prompt=none:
# silent while the provider's session lasts; a user disabled there is signed out here).
OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS = env.integer("OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS", 15 * 60)
# Seconds to wait for the provider's token, userinfo and JWKS endpoints.
OIDC_TIMEOUT = 10
# The claim that lists the user's groups, and which of those groups give which role
# ("admin=dash-admins,operator=dash-operators,viewer=dash-viewers"). Claim groups that name an existing
# Django group also make the user a member of it, so that group's scopes apply.
OIDC_GROUPS_CLAIM = env.string("OIDC_GROUPS_CLAIM", "groups")
OIDC_ROLE_GROUPS = env.string("OIDC_ROLE_GROUPS", "admin=dash-admins,operator=dash-operators,viewer=dash-viewers")
OIDC_ENABLED = bool(OIDC_RP_CLIENT_ID and OIDC_OP_AUTHORIZATION_ENDPOINT and OIDC_OP_TOKEN_ENDPOINT)
LOGIN_REDIRECT_URL_FAILURE = "/accounts/login/"
# mozilla-django-oidc reverses this name; its URLs live in the access namespace.
OIDC_AUTHENTICATION_CALLBACK_URL = "access:oidc_authentication_callback"

# The names the settings module takes over (``from access.conf import *``).
__all__ = [
    "KUBE_IMPERSONATE",
    "KUBE_IMPERSONATE_USER_PREFIX",
    "KUBE_IMPERSONATE_GROUPS",
    "LIQO_DASH_CLUSTER_ACCESS",
    "API_TOKEN_DEFAULT_DAYS",
    "API_TOKEN_PEPPER",
    "API_THROTTLE_ANON",
    "API_THROTTLE_TOKEN",
    "API_THROTTLE_TOKEN_FAILURES",
    "TRUSTED_PROXIES",
    "AXES_ENABLED",
    "AXES_FAILURE_LIMIT",
    "AXES_COOLOFF_TIME",
    "AXES_LOCKOUT_PARAMETERS",
    "AXES_RESET_ON_SUCCESS",
    "AXES_LOCKOUT_TEMPLATE",
    "AXES_CLIENT_IP_CALLABLE",
    "EMAIL_HOST",
    "EMAIL_PORT",
    "EMAIL_HOST_USER",
    "EMAIL_HOST_PASSWORD",
    "EMAIL_USE_TLS",
    "DEFAULT_FROM_EMAIL",
    "PASSWORD_RESET_ENABLED",
    "OIDC_RP_CLIENT_ID",
    "OIDC_RP_CLIENT_SECRET",
    "OIDC_OP_AUTHORIZATION_ENDPOINT",
    "OIDC_OP_TOKEN_ENDPOINT",
    "OIDC_OP_USER_ENDPOINT",
    "OIDC_OP_JWKS_ENDPOINT",
    "OIDC_RP_SIGN_ALGO",
    "OIDC_RP_SCOPES",
    "OIDC_VERIFY_SSL",
    "OIDC_OP_ISSUER",
    "OIDC_USE_PKCE",
    "OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS",
    "OIDC_TIMEOUT",
    "OIDC_GROUPS_CLAIM",
    "OIDC_ROLE_GROUPS",
    "OIDC_ENABLED",
    "LOGIN_REDIRECT_URL_FAILURE",
    "OIDC_AUTHENTICATION_CALLBACK_URL",
]


def add_context_processor(templates: list[dict[str, Any]]) -> None:
    """The role and scopes of the signed-in user, for the user menu."""
    templates[0]["OPTIONS"]["context_processors"].append("access.context_processors.access")


def installed_apps() -> list[str]:
    return ["axes", "access"]


def middleware(existing: list[str]) -> list[str]:
    """Ours after authentication; axes last, as its documentation asks."""
    result = list(existing)
    after = result.index("django.contrib.auth.middleware.AuthenticationMiddleware") + 1
    result[after:after] = ["access.middleware.AccessMiddleware"]
    if OIDC_ENABLED:
        # Re-checks SSO sessions with the provider (OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS).
        result.insert(after, "access.oidc.OidcSessionRefresh")
    result.append("axes.middleware.AxesMiddleware")
    return result


def authentication_backends() -> list[str]:
    backends = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
    if OIDC_ENABLED:
        backends.append("access.oidc.RoleMappingOIDCBackend")
    return backends


def rest_framework(existing: dict[str, Any]) -> dict[str, Any]:
    """API tokens first (so a request without credentials gets 401 with WWW-Authenticate), sessions
    second; roles as the default permission; throttles for token and anonymous requests."""
    result = dict(existing)
    result["DEFAULT_AUTHENTICATION_CLASSES"] = [
        "access.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ]
    result["DEFAULT_PERMISSION_CLASSES"] = ["access.permissions.HasRoleForMethod"]
    result["DEFAULT_THROTTLE_CLASSES"] = ["access.throttles.TokenRateThrottle"]
    # Our throttles ask access.clientip; this keeps any stock DRF throttle from trusting the header too.
    result["NUM_PROXIES"] = TRUSTED_PROXIES
    result["DEFAULT_THROTTLE_RATES"] = {
        "anon": API_THROTTLE_ANON,
        "token": API_THROTTLE_TOKEN,
        "token_failures": API_THROTTLE_TOKEN_FAILURES,
    }
    return result
