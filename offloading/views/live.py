"""What keeps open pages true without a reload: the freshness badge (polled by every page) and the
live regions' cheap "nothing changed" answer."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse

from access import roles
from offloading.views import liveaside

# What each region depends on and the counters its poll reads: offloading/views/livekinds.py (named here
# too: live.versions, live.KINDS ...).
from offloading.views.livekinds import (  # noqa: F401 - re-exported
    CLUSTER_KEY,
    FLEET_REGIONS,
    GLOBAL_KINDS,
    IDENTITY,
    KINDS,
    REGIONS,
    data_version,
    early_counters,
    managed_of,
    poll_kinds,
    region_kinds,
    version_of,
    versions,
)
from offloading.views.livememory import RenderMemory
from offloading.views.livetags import (
    REUSE_COST_FACTOR,
    REUSE_MAX_S,
    REUSE_MIN_S,
    Shared,
    access_key,
    digest,
    etag,
    held,
    held_tag,
    not_modified,
    private,
    region_id,
    region_of,
    reusable,
    shared_key,
    too_soon,
    who_of,
)

log = logging.getLogger(__name__)


def now_ms() -> int:
    return int(time.time() * 1000)


# --------------------------------------------------------------------------------------------------
# Live regions poll themselves (static/js/liqo-dash.js sends the ETag it holds, with the header
# X-Live-Poll): the list, matrix, clusters, a cluster's page, the overview and the audit trail ask for
# the URL the browser shows (filters, sort and page kept); a namespace's status, a change's status, a
# bulk's progress and the freshness badge ask for their own fragment. While nothing the region shows has
# changed, the answer is an empty 304 decided from one indexed read of a few LiveVersion rows: counters
# that database triggers bump in the same transaction as the rows they count (migration 0013,
# docs/live-pages.md), so an idle open page costs the same at any fleet size.


_KEPT_S = 30  # how long the cache keeps a render (it is reused for REUSE_MAX_S at most)
_LEASE_S = 15  # a render that crashed without releasing its lease holds it this long at most
_STAMP = ":at"  # beside a kept render, the shared cache keeps when its counters were read (ms)
_LEASE = ":lease"  # beside it too, while one poll renders it: the lease of that render


def _answer(shared: Shared, request: HttpRequest, who: str) -> HttpResponse:
    response = HttpResponse(shared.content, status=shared.status, content_type=shared.content_type)
    if shared.vary:
        response["Vary"] = shared.vary
    response["ETag"] = etag(digest(shared.version, request, who), shared.read_ms)
    response["X-Live"] = "shared"  # what the poll cost: another viewer's render (bench/viewers.py counts them)
    return response


def _render(
    view: Callable[..., HttpResponse], request: HttpRequest, args: Any, kwargs: Any, version: str, read_ms: int
) -> tuple[HttpResponse, Shared | None]:
    """The view's answer to the poll, and what other viewers may reuse of it (None: nothing)."""
    match = request.resolver_match
    element = region_id(request, (match.url_name if match else None) or "")
    started = time.monotonic()
    response = view(request, *args, **kwargs)
    if response.status_code not in (200, 286):
        return response, None  # no ETag: a refusal or a redirect is never a 304 at the next poll
    response["ETag"] = etag(digest(version, request, who_of(request)), read_ms)
    response["X-Live"] = "rendered"
    if element is None or response.streaming:
        return response, None
    content: bytes = response.content
    if element:
        region = region_of(content.decode(response.charset), element)
        if region is None:
            return response, None
        content = region.encode(response.charset)
        response.content = content  # the poll swaps only the region: the page around it stays at home
    reuse = min(REUSE_MAX_S, max(REUSE_MIN_S, REUSE_COST_FACTOR * (time.monotonic() - started)))
    vary = response.get("Vary", "")
    shared = Shared(version, read_ms, int(reuse * 1000), response.status_code, response["Content-Type"], vary, content)
    return response, shared


def _cached(operation: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """A cache operation; None when the cache does not answer (sharing is a saving, never a failure)."""
    try:
        return operation(*args, **kwargs)
    except Exception:  # noqa: BLE001 - Redis away: every poll renders for itself meanwhile
        log.warning("live: the cache did not answer; this poll renders for itself", exc_info=True)
        return None


# This process's copies of the kept renders (offloading/views/livememory.py): a poll is answered from its
# own copy when that copy decides it as the shared cache's would, without a round trip carrying the region.
memory = RenderMemory(max_bytes=32 * 1024 * 1024, max_age_ms=_KEPT_S * 1000)


def _kept_render(
    request: HttpRequest,
    url_name: str,
    access: str,
    when: tuple[str, int, int],
    tags: dict[str, str],
    who: str,
) -> tuple[str, Shared | None]:
    """The region's kept render for ``access``: this process's copy when the poll may reuse it or must
    keep it (it holds that very render, within its window), otherwise the newer of that copy and the
    shared cache's (which is then copied)."""
    key = shared_key(url_name, request.get_full_path(), request.headers.get("HX-Request", ""), access)
    version, read_ms, held_ms = when  # the counters, when they were read, and when the held render was
    local: Any = memory.get(key, read_ms)
    if local is not None and (
        reusable(local, version, read_ms, held_ms) or too_soon(local, read_ms, held_tag(tags, local, request, who))
    ):
        return key, local
    if local is not None:
        # Whether the shared cache holds a newer render, from its small stamp: the render itself is read
        # only when it is newer than this process's copy (while a region renders, every poll of it asks).
        stamp = _cached(cache.get, key + _STAMP)
        if not isinstance(stamp, int) or stamp <= local.read_ms:
            return key, local
    kept: Shared | None = _cached(cache.get, key)
    if kept is not None and (local is None or kept.read_ms > local.read_ms):
        memory.keep(key, kept)
        return key, kept
    return key, local


def early(
    request: HttpRequest,
    url_name: str,
    who: str,
    access: Callable[[], str | None],
    read: tuple[dict[str, int], int],
    managed: int | None = None,
) -> HttpResponse | None:
    """A poll's answer when it needs no view, for offloading.middleware.LivePollMiddleware, which asks
    before the session, user and page middleware run: a 304 while nothing the region shows moved, or
    another viewer's render of the same access that this poll may reuse (as ``_poll`` decides them).
    ``who`` is the user's "pk:role" (as ``who_of``); ``access`` gives the shared key's access (as
    ``access_key``), asked only when a render is looked up; ``read``: the counters (of the region's
    kinds at least, as ``versions``) and when they were read (``now_ms`` just before); ``managed``: the
    cluster whose counters the region polls (as ``managed_of``; ``early_counters`` gives it). None: the
    view must run (the whole middleware chain, then ``_poll``)."""
    counters, read_ms = read
    version = version_of(counters, poll_kinds(url_name, managed))
    tags, newest, held_ms = held(request)
    current = digest(version, request, who)
    if current in tags:
        return not_modified(tags[current])
    if region_id(request, url_name) is None:
        return None
    shared_access = access()
    if shared_access is None:
        return None
    key, kept = _kept_render(request, url_name, shared_access, (version, read_ms, held_ms), tags, who)
    if kept is not None and reusable(kept, version, read_ms, held_ms):
        return _answer(kept, request, who)
    keep = too_soon(kept, read_ms, held_tag(tags, kept, request, who))
    if keep:
        return not_modified(keep)
    # Another viewer's poll is rendering it (it holds the lease): what _poll answers then, without the
    # whole middleware chain first. While a bulk applies, that is most polls of a region whose counters
    # moved: each went through the session, the user and the page's middleware only to learn it.
    if newest and _cached(cache.get, key + _LEASE):
        return _in_flight(kept, held_ms, newest, request, who)
    return None


def _in_flight(kept: Shared | None, held_ms: int, newest: str, request: HttpRequest, who: str) -> HttpResponse:
    """The answer to a poll holding ``newest`` while another poll renders the region: the kept render when
    it is newer than what the poll holds, else a 304 (the next poll gets the render being made)."""
    if kept is not None and kept.read_ms > held_ms:
        return _answer(kept, request, who)
    return not_modified(newest)


def _signed_in_with_role(request: HttpRequest) -> bool:
    user: Any = request.user
    return bool(user.is_authenticated and roles.role_of(user) is not None)


def _poll(view: Callable[..., HttpResponse], request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    if not _signed_in_with_role(request):
        # No 304 and no shared render for who is not signed in with a role: the view (login_required,
        # AccessMiddleware before it) refuses as for any request.
        return view(request, *args, **kwargs)
    match = request.resolver_match
    url_name = match.url_name if match else None
    read_ms = now_ms()
    version = data_version(poll_kinds(url_name, managed_of(request, url_name)))
    tags, newest, held_ms = held(request)
    who = who_of(request)
    current = digest(version, request, who)
    if current in tags:
        return not_modified(tags[current])
    access = access_key(request) if region_id(request, url_name or "") is not None else None
    if access is None:
        return _render(view, request, args, kwargs, version, read_ms)[0]
    key, kept = _kept_render(request, url_name or "", access, (version, read_ms, held_ms), tags, who)
    if kept is not None and reusable(kept, version, read_ms, held_ms):
        return _answer(kept, request, who)
    keep = too_soon(kept, read_ms, held_tag(tags, kept, request, who))
    if keep:
        return not_modified(keep)
    leased = _cached(cache.add, key + _LEASE, 1, timeout=_LEASE_S)
    if leased is False:  # another viewer is rendering it now
        if newest:
            return _in_flight(kept, held_ms, newest, request, who)  # the next poll gets that render
        return _render(view, request, args, kwargs, version, read_ms)[0]
    if leased and newest:
        answer = _aside(request, key, (version, read_ms), newest)
        if answer is not None:
            return answer
    return _render_and_keep(view, request, (args, kwargs), (version, read_ms), key, leased)[0]


def _render_and_keep(
    view: Callable[..., HttpResponse],
    request: HttpRequest,
    arguments: tuple[Any, Any],
    when: tuple[str, int],
    key: str,
    leased: bool | None,
    release: bool = True,
) -> tuple[HttpResponse, Shared | None]:
    """Render the poll's region, keep it for the other viewers (this process's copy; the shared cache
    when this poll holds the lease) and release the lease (unless ``release`` is False: the renderer's
    render, whose lease the web process releases)."""
    (args, kwargs), (version, read_ms) = arguments, when
    try:
        response, shared = _render(view, request, args, kwargs, version, read_ms)
        if shared is not None:
            memory.keep(key, shared)
        if shared is not None and leased:
            latest = _cached(cache.get, key + _STAMP)
            if not isinstance(latest, int) or latest < shared.read_ms:
                _cached(cache.set_many, {key: shared, key + _STAMP: shared.read_ms}, timeout=_KEPT_S)
        return response, shared
    finally:
        if leased and release:
            _cached(cache.delete, key + _LEASE)


# The render process beside this web process (offloading/views/liveaside.py).
renderer = liveaside.Renderer()


def _aside(request: HttpRequest, key: str, when: tuple[str, int], newest: str) -> HttpResponse | None:
    """The poll's region rendered by the renderer, when it answers within LIVE_RENDER_WAIT_MS; a 304 of
    what the poll holds (``newest``) when it does not (the render is kept for the next polls when it
    comes). None: renders aside are off, or the renderer cannot take it now: the poll renders itself."""
    wait_ms = int(settings.LIQO_DASH["LIVE_RENDER_WAIT_MS"])
    if wait_ms <= 0:
        return None
    version, read_ms = when
    future = renderer.submit(liveaside.job_of(request, version, read_ms, key))
    if future is None:
        return None
    future.add_done_callback(functools.partial(_kept_aside, key, when))
    try:
        answer = future.result(timeout=wait_ms / 1000)
    except TimeoutError:
        return not_modified(newest)  # keep what you have: the next poll gets that render
    if answer is None:
        return not_modified(newest)  # the renderer died with it (logged): the next poll renders
    response = liveaside.response_of(answer)
    response["X-Live-Aside"] = "1"
    return response


def _kept_aside(key: str, when: tuple[str, int], future: Any) -> None:
    """When the renderer answered (or died): this process's copy of its render (the renderer kept it in
    the shared cache), and the lease this process took released."""
    answer = future.result()
    _cached(cache.delete, key + _LEASE)
    if answer is None or answer.get("reuse_ms") is None:
        return
    response = liveaside.response_of(answer)
    version, read_ms = when
    shared = Shared(
        version,
        read_ms,
        int(answer["reuse_ms"]),
        response.status_code,
        response["Content-Type"],
        response.get("Vary", ""),
        response.content,
    )
    memory.keep(key, shared)


def _made_aside(view: Callable[..., HttpResponse], request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    """In the renderer: the render the web process asked for, at once (its poll holds the lease)."""
    aside = request.META[liveaside.ASIDE]
    when = (str(aside["version"]), int(aside["read_ms"]))
    response, shared = _render_and_keep(view, request, (args, kwargs), when, str(aside["key"]), True, release=False)
    response.live_shared = shared  # type: ignore[attr-defined]  # liveaside.run sends its reuse window
    return response


def page(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Make ``view`` answer a live poll with 304 while nothing it shows has changed, and share its
    render between viewers of the same access while it changes (above)."""

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if int(settings.LIQO_DASH["LIVE_RENDER_WAIT_MS"]) > 0 and liveaside.ASIDE not in request.META:
            renderer.start()  # warm before the first render it is asked
        if request.method != "GET" or request.headers.get("X-Live-Poll") != "1":
            return view(request, *args, **kwargs)
        if liveaside.ASIDE in request.META and _signed_in_with_role(request):
            return private(_made_aside(view, request, *args, **kwargs))
        return private(_poll(view, request, *args, **kwargs))

    wrapped.live_page = True  # type: ignore[attr-defined]  # LivePollMiddleware answers its polls early
    return wrapped
