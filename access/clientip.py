"""The client's address: the one place that decides which address a request comes from.

``REMOTE_ADDR`` is the peer of the TCP connection. Behind reverse proxies (the Ingress controller)
that peer is the nearest proxy, and each proxy appends the address it received the request from to
``X-Forwarded-For``. A client can put anything into the header it sends, but only on the left: the
rightmost entries are the ones the proxies appended. ``TRUSTED_PROXIES`` says how many proxies stand
in front of the app, so the client is the entry that many hops from the right; every entry left of it
is the client's own writing and is ignored. With ``TRUSTED_PROXIES=0`` (the default) the header is
never read.

Used by the API throttles (access.throttles), the login lockout (``AXES_CLIENT_IP_CALLABLE``) and
anything that logs a client address, so that all of them count the same client.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from django.conf import settings

# An IPv6 client usually holds a whole /64: throttles count the network, not each address in it.
IPV6_NETWORK_BITS = 64


def _address(text: str) -> str | None:
    """The normalised address in ``text`` (an IP, optionally ``[v6]:port`` or ``v4:port``), else None."""
    text = text.strip()
    if text.startswith("[") and "]" in text:
        text = text[1 : text.index("]")]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


def client_address(request: Any) -> str:
    """The address of the client that sent ``request`` (a Django or DRF request)."""
    meta = request.META
    remote = str(meta.get("REMOTE_ADDR") or "")
    proxies = int(getattr(settings, "TRUSTED_PROXIES", 0) or 0)
    if proxies > 0:
        forwarded = [entry for entry in str(meta.get("HTTP_X_FORWARDED_FOR") or "").split(",") if entry.strip()]
        if forwarded:
            # Fewer entries than proxies: every entry was appended by a proxy; the leftmost is the
            # farthest one seen.
            chosen = _address(forwarded[-min(proxies, len(forwarded))])
            if chosen is not None:
                return chosen
        # No header (a probe or a client inside the cluster, reaching the pod directly) or a
        # malformed entry where a proxy should have written: the peer, never the client's text.
    return _address(remote) or remote


def client_network(request: Any) -> str:
    """What the throttles count: the client's address, or its /64 network for IPv6."""
    address = client_address(request)
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv4Address):
        return address
    if parsed.ipv4_mapped is not None:
        return str(parsed.ipv4_mapped)
    return str(ipaddress.ip_network(f"{parsed}/{IPV6_NETWORK_BITS}", strict=False))
