"""What a live poll's answer is made of, and when another viewer's render may answer it: the poll's
ETags (who asks, what they hold), the region of a page a poll swaps, the key and access a render is
shared under, and the rules of reuse. No cache and no clock here: offloading/views/live.py keeps the
renders, leases and times."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils.cache import patch_vary_headers
from django.utils.http import parse_etags

from access import roles


def who_of(request: HttpRequest) -> str:
    """The user as the ETags name them: "pk:role" ("-" for nobody)."""
    user: Any = request.user
    return f"{user.pk}:{roles.role_of(user)}" if user.is_authenticated else "-"


# --------------------------------------------------------------------------------------------------
# The ETag of a poll: a hash of the region's counters, the full URL, the user and role and whether htmx
# asked (opaque, never shared between users), then, after a dot, when the answer's counters were read
# (milliseconds, hex): which of two answers is the newer, without saying what moved. The parts are
# hashed as a JSON array: the URL and the HX-Request header are the client's, and a separator inside
# them must not make one user's parts read as another's. Only a signed-in user with a role gets one,
# and only on an answer with content (200, or htmx's 286): a refusal or a redirect never turns into a
# 304 at the next poll.


def digest(version: str, request: HttpRequest, who: str) -> str:
    key = json.dumps([version, request.get_full_path(), who, request.headers.get("HX-Request", "")])
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def private(response: HttpResponse) -> HttpResponse:
    """A poll's answer is one user's (and often a region of a page under the page's URL): no cache
    keeps it, whatever answered it (the view, or LivePollMiddleware before the session middleware,
    which would otherwise not add ``Vary: Cookie``)."""
    response["Cache-Control"] = "no-store"
    patch_vary_headers(response, ("Cookie",))
    return response


def etag(digest: str, read_ms: int) -> str:
    return f'"{digest}.{read_ms:x}"'


def held(request: HttpRequest) -> tuple[dict[str, str], str, int]:
    """What the poll holds (If-None-Match): its ETags by hash, the newest of them and when it was read
    (0: unknown)."""
    tags, newest, newest_ms = {}, "", 0
    for tag in parse_etags(request.headers.get("If-None-Match", "")):
        digest, _, read_at = tag.removeprefix("W/").strip('"').partition(".")
        tags[digest] = tag
        with contextlib.suppress(ValueError):
            if int(read_at, 16) > newest_ms:
                newest, newest_ms = tag, int(read_at, 16)
    return tags, newest or next(iter(tags.values()), ""), newest_ms


def not_modified(etag: str) -> HttpResponse:
    response = HttpResponse(status=304)
    response["ETag"] = etag
    return response


# --------------------------------------------------------------------------------------------------
# Renders shared between viewers. While the counters move (a bulk applying), every poll of a region
# would render it again, for every viewer: at 10,000 namespaces an overview costs ~0.2 s of CPU, and 500
# viewers poll ~200 times a second. So the render of a region is kept (in the cache: Redis when deployed,
# shared by every process and replica) by what decides its content: the URL, whether htmx asked, and the
# viewer's access (role, and scopes for an operator: the regions below depend on the user only through
# them); a poll of another viewer with the same access gets it when it is the current version, or when it
# is newer than what that viewer holds and younger than its reuse window: 10 times what it cost to
# render, at least 1 s, at most 10 s. A viewer who already holds the newest render and whose counters
# moved renders again once that render is a second old (HOLD_S: shorter than any poll interval, so a
# single viewer sees every change at its next poll); before that it keeps what it has (304). One render
# per region and access at a time (a lease), the others keep what they have meanwhile. So a region is
# rendered at most once a second per access, whatever the number of viewers.
# Only the region travels to the other viewers (``id="live"`` of a page; a fragment whole), never the
# page around it (its CSRF token, the user menu).

SHARED: dict[str, str] = {  # URL name -> the id of the element the poll swaps ("": the whole answer)
    "home": "live",
    "fleet_matrix": "live",
    "cluster_list": "live",
    "cluster_detail": "live",
    "audit_list": "live",
    "domain_map": "live",
    "namespace_status": "",
}
SHARED_HTMX: dict[str, str] = {"namespace_list": ""}  # shared only as the fragment htmx asks for
REUSE_COST_FACTOR, REUSE_MIN_S, REUSE_MAX_S = 10.0, 1.0, 10.0
HOLD_S = 1.0  # a holder of the newest render is not rendered again before it is this old (too_soon)


@dataclass(frozen=True)
class Shared:
    version: str
    read_ms: int  # when its counters were read (ms since the epoch)
    reuse_ms: int
    status: int
    content_type: str
    vary: str
    content: bytes


def region_id(request: HttpRequest, url_name: str) -> str | None:
    if url_name in SHARED:
        return SHARED[url_name]
    if url_name in SHARED_HTMX and request.headers.get("HX-Request") == "true":
        return SHARED_HTMX[url_name]
    return None


def access_of(role: str, scopes: list[tuple[str, str]]) -> str:
    """The shared key's access: the role, and for an operator their scopes ((kind, value) pairs,
    sorted) as a JSON array, so that no scope value can make one set of scopes read as another."""
    if role != roles.OPERATOR:
        return role
    return json.dumps([role, sorted(set(scopes))])


def access_key(request: HttpRequest) -> str | None:
    """What a shared region depends on of the user: the role, and an operator's scopes (None: no role)."""
    user: Any = request.user
    role = roles.role_of(user) if user.is_authenticated else None
    if role is None:
        return None
    if role != roles.OPERATOR:
        return role
    return access_of(role, [(scope.kind, scope.value) for scope in roles.scopes_of(user)])


_OPENING = re.compile(r"<([a-zA-Z][a-zA-Z0-9]*)\s(?:[^>]*?\s)?id=\"([^\"]+)\"[^>]*>")


def region_of(html: str, element_id: str) -> str | None:
    """The element ``id="element_id"`` of a rendered page, tags included (None when it is not there or
    its tags do not balance). Templates escape every value, so a tag in the text is one of theirs."""
    start = next((m for m in _OPENING.finditer(html) if m.group(2) == element_id), None)
    if start is None:
        return None
    tag = start.group(1).lower()
    tags = re.compile(rf"<(/?){tag}\b[^>]*>", re.IGNORECASE)
    depth = 0
    for found in tags.finditer(html, start.start()):
        depth += -1 if found.group(1) else 1
        if depth == 0:
            return html[start.start() : found.end()]
    return None


def shared_key(url_name: str, full_path: str, hx: str, access: str) -> str:
    """The cache key of a region's shared render."""
    return "liqo-dash:live:" + hashlib.sha256(json.dumps([url_name, full_path, hx, access]).encode()).hexdigest()


def reusable(kept: Shared | None, version: str, read_ms: int, held_ms: int) -> bool:
    """Whether a poll (counters ``version`` read at ``read_ms``, holding a render read at ``held_ms``)
    gets the kept render: it is the current version, or newer than what it holds and in its window."""
    if kept is None:
        return False
    return kept.version == version or (kept.read_ms > held_ms and read_ms - kept.read_ms < kept.reuse_ms)


def too_soon(kept: Shared | None, read_ms: int, held: str | None) -> str | None:
    """The ETag to keep (a 304) when the poll holds the kept render itself (``held``: its ETag of that
    render for this user, None when it holds none) and that render is younger than HOLD_S: the region is
    not rendered again for its access before, however many times its counters moved meanwhile (the first
    poll after it does). Shorter than every region's poll interval, so a viewer alone on a page still
    sees each change at its next poll. A poll holding another render (older, a newer one from another
    replica, or one of another role or scopes) is not held back."""
    return held if kept is not None and held and read_ms - kept.read_ms < HOLD_S * 1000 else None


def held_tag(tags: dict[str, str], kept: Shared | None, request: HttpRequest, who: str) -> str | None:
    """The poll's ETag of ``kept`` for the user ``who``, when it holds that render."""
    return None if kept is None else tags.get(digest(kept.version, request, who))
