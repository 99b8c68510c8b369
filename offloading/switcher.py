"""Pages and API resources of one managed cluster (issue 28): the default cluster keeps the paths it always
had; another cluster's are the same paths under ``/m/<cluster name>/`` (``/m/milan/namespaces/``), and
the API's under ``/api/v1/m/<cluster name>/``.

Why ``m/``: no page, API route or include of the URL conf starts with that segment (``managed-clusters/``
is another segment), and a cluster's name is a slug, so ``/m/<name>/`` never meets a namespace or a peer
name (those live further down the path). Why a URL-conf wrapper, not a middleware that rewrites the
path: the live-poll middleware (first in the chain) resolves the polled path itself and keys its renders
by it; prefixed patterns in the URL conf resolve there as they do for the views, with the same URL names.

:func:`per_cluster` copies URL patterns under the prefix, each view wrapped by :func:`in_cluster`, the one
place that reads the cluster from the path and sets ``request.managed_pk`` (read by
``offloading.models.fleet.current_managed``) and ``request.cluster_base`` (the prefix, ``""`` on the
default's paths). An unknown name is a 404 page, or a ``Status`` 404 on the API, but only to those a known
name's page or resource would not refuse (:func:`_unknown`): nobody learns from the answer whether a name is
a managed cluster before the view's own gates let them in. :func:`prefixed` and
:func:`cluster_reverse` keep the links of a cluster's pages in that cluster (the ``{% cluster_url %}`` tag
of ``offloading_extras`` in templates, ``cluster_reverse`` in views' redirects); a name of a page that has no
per-cluster copy (the managed clusters, the fleet-wide list) is never prefixed.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import ImproperlyConfigured
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, URLResolver, get_script_prefix, get_urlconf, path, re_path, reverse
from django.urls.resolvers import RegexPattern
from django.utils.safestring import SafeString
from rest_framework.exceptions import NotFound

from liqo_dash.statusbody import status_data
from offloading.models import Cluster, ManagedCluster, Namespace

PREFIX = "m"
ROUTE = f"{PREFIX}/<slug:cluster>/"

# "app:url_name" of every pattern copied under the prefix (filled as the URL conf is built).
_per_cluster_names: set[str] = set()


def in_cluster(view: Callable[..., HttpResponse], *, api: bool = False) -> Callable[..., HttpResponse]:
    """``view`` answering for the managed cluster its path names (the ``cluster`` keyword of the route)."""

    @functools.wraps(view)  # keeps live.page's and DRF's attributes (live_page, csrf_exempt, cls)
    def wrapped(request: HttpRequest, *args: Any, cluster: str, **kwargs: Any) -> HttpResponse:
        found = ManagedCluster.objects.filter(name=cluster).values_list("pk", flat=True).first()
        if found is None:
            request.managed_unknown = cluster  # type: ignore[attr-defined]
            return _unknown(view, request, cluster, api, args, kwargs)
        request.managed_pk = found  # type: ignore[attr-defined]
        request.cluster_base = f"/{PREFIX}/{cluster}"  # type: ignore[attr-defined]
        request.cluster_name = cluster  # type: ignore[attr-defined]
        return view(request, *args, **kwargs)

    return wrapped


class UnknownCluster(NotFound):
    """The API's 404 of a name no managed cluster has (``details.kind`` ``managedclusters``, read by
    ``offloading.api.errors.exception_handler``)."""

    kind = "managedclusters"

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f'{self.kind} "{name}" not found')


def _unknown(
    view: Callable[..., HttpResponse], request: HttpRequest, cluster: str, api: bool, args: Any, kwargs: Any
) -> HttpResponse:
    """An unknown cluster's answer: what a known cluster's page or resource answers the same request until
    the view would read the cluster, then the 404. So a stranger, an API client with a bad or role-less
    token, a throttled one, or anyone the view's role gates refuse gets exactly the refusal a known name
    gets (sign-in page, 401, 403, 405, 429), and only a caller the view would serve learns that the name
    is unknown (the header's switcher lists the clusters to them anyway)."""
    if api:
        return _unknown_resource(view, request, cluster, args, kwargs)
    # Every page of a cluster signs a stranger in first (login_required is the outermost gate of each, and
    # the access middleware has already answered a signed-in user without a role before the URL conf);
    # tests/test_cluster_names_hidden.py holds every copied page to it.
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    raise Http404(f'managedclusters "{cluster}" not found')


def _unknown_resource(
    view: Callable[..., HttpResponse], request: HttpRequest, cluster: str, args: Any, kwargs: Any
) -> HttpResponse:
    """The API view's own dispatch (content negotiation, authentication, permissions, throttles, the 405 of
    a method it lacks, its error bodies) with every handler replaced by the cluster's 404: built as DRF's
    ``as_view`` builds the view for a request (``view.cls``, ``view.initkwargs``, a viewset's ``actions``)."""
    cls: Any = getattr(view, "cls", None)
    if cls is None:  # not a DRF view (none is copied today): the 404 as a Status
        return _status(404, f'managedclusters "{cluster}" not found', name=cluster, kind="managedclusters")

    def not_found(*_args: Any, **_kwargs: Any) -> HttpResponse:
        raise UnknownCluster(cluster)

    instance = cls(**getattr(view, "initkwargs", {}))
    actions: dict[str, str] | None = getattr(view, "actions", None)
    if actions is not None:  # a viewset: its action map names the action (read by its permissions)
        actions = dict(actions)
        if "get" in actions and "head" not in actions:
            actions["head"] = actions["get"]
        instance.action_map = actions
        methods: Iterable[str] = actions
    else:
        methods = [method for method in instance.http_method_names if hasattr(instance, method)]
    for method in methods:
        setattr(instance, method, not_found)
    response: HttpResponse = instance.dispatch(request, *args, **kwargs)
    return response


def unknown_cluster(request: Any) -> bool:
    """Whether the request's path names a cluster that does not exist (its API answer then carries no
    snapshot headers: ``current_managed`` would name the default cluster's snapshot)."""
    return bool(getattr(request, "managed_unknown", None))


def _status(code: int, message: str, *, name: str = "", kind: str = "") -> HttpResponse:
    body = json.dumps(status_data(code, message, name=name, kind=kind))
    return HttpResponse(body, status=code, content_type="application/json")


def _flatten(patterns: Iterable[URLPattern | URLResolver], route: str = "") -> Iterable[tuple[str, URLPattern]]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _flatten(pattern.url_patterns, route + str(pattern.pattern))
        else:
            yield route + str(pattern.pattern), pattern


def per_cluster(
    patterns: Iterable[URLPattern | URLResolver], app: str, *, exclude: Iterable[str] = (), api: bool = False
) -> list[URLPattern]:
    """Copies of ``patterns`` (includes flattened) for ``ROUTE``, their views wrapped by :func:`in_cluster`,
    with the same URL names; ``exclude``: names of pages across the fleet, not copied."""
    skipped = set(exclude)
    copies = []
    for route, pattern in _flatten(patterns):
        if pattern.name in skipped:
            continue
        if isinstance(pattern.pattern, RegexPattern) and route != str(pattern.pattern):  # under a prefix
            raise ImproperlyConfigured(f"{route!r}: cannot copy it under {ROUTE!r}")
        copies.append(
            path(route, in_cluster(pattern.callback, api=api), pattern.default_args, name=pattern.name)
            if not route.startswith("^")
            else _regex_copy(route, pattern, api)
        )
        if pattern.name:
            _per_cluster_names.add(f"{app}:{pattern.name}")
    return copies


def _regex_copy(route: str, pattern: URLPattern, api: bool) -> URLPattern:
    """A regular-expression route (DRF's router) under the prefix: its ``^`` dropped, it follows ``ROUTE``."""
    return re_path(route.lstrip("^"), in_cluster(pattern.callback, api=api), pattern.default_args, name=pattern.name)


def cluster_base(name: str, is_default: bool) -> str:
    """The path prefix of the cluster ``name``'s pages: none for the default cluster."""
    return "" if is_default else f"/{PREFIX}/{name}"


def base_of(request: Any) -> str:
    """The path prefix of the request's cluster: ``""`` on the default's paths, ``/m/<name>`` under one."""
    return str(getattr(request, "cluster_base", "") or "")


def is_per_cluster(viewname: str) -> bool:
    return viewname in _per_cluster_names


def prefixed(base: str, viewname: str, url: str) -> str:
    """``url`` (the path ``viewname`` reversed to) under ``base`` when that page has a per-cluster copy."""
    return f"{base}{url}" if base and url.startswith("/") and viewname in _per_cluster_names else url


def cluster_reverse(request: Any, viewname: str, *args: Any, **kwargs: Any) -> str:
    """``reverse(viewname, args=args, kwargs=kwargs)``, in the request's cluster."""
    return prefixed(base_of(request), viewname, quick_reverse(viewname, args, kwargs))


def quick_reverse(viewname: str, args: Iterable[Any], kwargs: dict[str, Any], current_app: str | None = None) -> str:
    """``reverse()``, remembered: a page of 200 peers or a bulk of 100 namespaces links each of them, and
    Django's ``reverse`` costs ~50 µs a link (a tenth of the audit trail's render, issue 30). Only links
    whose arguments are names and numbers are remembered (an object's text can change under the same
    hash), keyed by everything else the answer depends on: the URL conf in use, the script prefix and the
    current app. A name that does not reverse raises every time (its ``NoReverseMatch`` is not kept)."""
    args = tuple(args)
    values = (*args, *kwargs.values())
    if not all(type(value) in (str, int) or isinstance(value, SafeString) for value in values):
        return reverse(viewname, args=args or None, kwargs=kwargs or None, current_app=current_app)
    urlconf = get_urlconf() or settings.ROOT_URLCONF
    return _reversed(viewname, args, tuple(sorted(kwargs.items())), current_app, get_script_prefix(), urlconf)


@functools.lru_cache(maxsize=8192)
def _reversed(
    viewname: str, args: tuple[Any, ...], kwargs: tuple[tuple[str, Any], ...], current_app: str | None, *_key: str
) -> str:
    return reverse(viewname, args=args or None, kwargs=dict(kwargs) or None, current_app=current_app)


def elsewhere(request: Any, managed_id: int) -> HttpResponseRedirect | None:
    """A redirect to the same page in cluster ``managed_id`` when the request's path names another one
    (a change's page is its cluster's: its links go to that cluster's namespace), else None."""
    current = getattr(request, "managed_pk", None)
    if current == managed_id:
        return None
    found = ManagedCluster.objects.filter(pk=managed_id).values_list("name", "is_default").first()
    if found is None or (current is None and found[1]):
        return None
    rest = request.get_full_path()[len(base_of(request)) :]
    return HttpResponseRedirect(cluster_base(found[0], found[1]) + rest)


# --------------------------------------------------------------------------------------------------
# The switcher in the page header


@dataclass(frozen=True)
class Choice:
    name: str
    url: str
    current: bool
    same_page: bool  # False: that cluster has no such page (the link goes to its overview)


def _home(base: str) -> str:
    return prefixed(base, "offloading:home", reverse("offloading:home"))


@dataclass(frozen=True)
class Switcher:
    current: str  # the page's cluster; "" on a page across the fleet
    choices: list[Choice]


def switcher_of(request: Any) -> Switcher | None:
    """What the header's switcher shows (None: one managed cluster, no switcher)."""
    found = choices(request)
    if not found:
        return None
    return Switcher(next((c.name for c in found if c.current), ""), found)


def on_cluster_page(request: Any) -> bool:
    """Whether the request's page is one cluster's: a plain path of the default's, or a prefixed one whose
    cluster was found (a page across the fleet, a user's own page or an unknown name's 404 is not)."""
    match = getattr(request, "resolver_match", None)
    if match is None or not match.url_name:
        return False
    name = f"offloading:{match.url_name}"
    return is_per_cluster(name) and match.app_name == ("cluster" if base_of(request) else "offloading")


def choices(request: Any) -> list[Choice]:
    """Every managed cluster and where its link goes: the same page there (the path under its prefix,
    the query kept but its page number) or its overview when the page has no copy there (another
    cluster's change, a namespace or peer it does not have, a page across the fleet). Empty with one
    managed cluster: the header shows no switcher."""
    clusters = list(ManagedCluster.objects.order_by("-is_default", "name").values_list("pk", "name", "is_default"))
    if len(clusters) < 2:
        return []
    match = getattr(request, "resolver_match", None)
    base = base_of(request)
    # An unknown name's 404 page is no cluster's: its links go to each cluster's overview.
    per_cluster = on_cluster_page(request)
    # On a page across the fleet no cluster is the current one.
    current = (getattr(request, "managed_pk", None) or clusters[0][0]) if per_cluster else None
    rest = request.path[len(base) :] if per_cluster else ""
    where = _present_in(match, per_cluster)
    query = request.GET.copy()
    query.pop("page", None)
    tail = f"?{query.urlencode()}" if query and per_cluster else ""
    found = []
    for pk, cluster, default in clusters:
        target_base = cluster_base(cluster, default)
        same = per_cluster and (where is None or pk in where or pk == current)
        url = f"{target_base}{rest}{tail}" if same else _home(target_base)
        found.append(Choice(cluster, url, pk == current, same))
    return found


def _present_in(match: Any, per_cluster: bool) -> set[int] | None:
    """The clusters that have the object the page shows (None: every cluster has the page)."""
    if not per_cluster or match is None:
        return None
    kwargs = match.kwargs
    if "pk" in kwargs:  # a change or a bulk (and their steps) is one cluster's
        return set()
    if "name" in kwargs:
        return set(Namespace.objects.filter(name=kwargs["name"]).values_list("managed_id", flat=True))
    if "cluster_id" in kwargs:
        return set(Cluster.objects.filter(cluster_id=kwargs["cluster_id"]).values_list("managed_id", flat=True))
    return None


def cluster_name(request: Any) -> str | None:
    """The name of the cluster a prefixed path names (None on the default's paths), as ``access.policy``
    takes it (``cluster=``)."""
    return getattr(request, "cluster_name", None)
