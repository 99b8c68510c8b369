"""The offload preview's cluster table and a peer's room, as HTML built here rather than by the template
engine. Every value from the snapshot or the selector is escaped (``html.escape``).

The table lists the selected clusters one a row (the offloading module's health when it is not
Healthy, the room, the term that matches) and then the excluded clusters grouped by their reason, in
the order of their first cluster: the clusters sharing a reason are one row, folded under their count
past ``SHOWN_IDS`` (every id stays in the page, for the browser's find and for tests). A reason that is
a cluster's own (an invalid selector, virtual nodes that disagree, several virtual nodes) is a row of
its own, like the notes on clusters without a virtual node or not reached.

Why Python and not template partials (issue 26: markup lives in templates unless the template costs
more than 20 % of the page). Measured at 10,000 namespaces / 200 peers (bench fleet), the preview
POST's CPU time, median of 3 x 15 requests, and the table's share of it. Built here: 20-28 ms a page,
the table 2-6 %. As partials drawing the same pixels (screenshots compared), after the cheap fixes (one
include for the table, rows as tuples unpacked by its loops, the room and the Why cell rendered once
for their values and kept, the cached loader): 15-19 % with two regions selected or every peer; 25-27 %
for a selector naming two clusters by id (198 excluded rows, each its own reason); 47-50 % (48 ms a
page) when those reasons are new, which is what the live preview renders on a keystroke. A row per
include, the first try, cost 41-75 %. Over 20 %: the table stays here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from html import escape
from typing import Any

from django.template.defaultfilters import floatformat
from django.utils.safestring import SafeString, mark_safe

from offloading.whatif.capacity import RESOURCES, Quota, Room, binary_bytes

# Excluded clusters sharing a reason: up to this many are listed in the row, more are folded.
SHOWN_IDS = 3

NO_CLUSTER = '<tr><td colspan="3" class="muted">No peered clusters in the snapshot.</td></tr>'
DISAGREE = '<div class="warn">This cluster\'s virtual nodes disagree; Liqo uses the last one it lists.</div>'


# The figures of a room, formatted by Django's own filters (the language is fixed: no LocaleMiddleware).
def _cores(value: float) -> str:
    return escape(str(floatformat(value, "-2")))


def _bytes(value: float) -> str:
    return escape(binary_bytes(value))


def _whole(value: float) -> str:
    return escape(str(floatformat(value, 0)))


_FIGURES = (("cpu", "CPU", _cores), ("memory", "memory", _bytes), ("pods", "pods", _whole))


def room_html(room: Room) -> SafeString:
    """One peer's room: what the running pods request against what its virtual nodes offer (a resource
    the peer declares nothing of shows what is requested only), and a "nearly full" badge
    (``capacity.NEARLY_FULL_PERCENT``) naming the resources with their share."""
    requested, allocatable = room.requested, room.allocatable
    return mark_safe(  # noqa: S308 - built from escaped parts
        _room_html(
            (requested["cpu"], requested["memory"], requested["pods"]),
            (allocatable["cpu"], allocatable["memory"], allocatable["pods"]),
        )
    )


@lru_cache(maxsize=4096)
def _room_html(requested: Quota, allocatable: Quota) -> str:
    """``room_html`` of the figures, cached by them: the live preview shows the same peers' rooms on
    every keystroke."""
    room = Room("", dict(zip(RESOURCES, allocatable, strict=True)), dict(zip(RESOURCES, requested, strict=True)))
    if not room.known:
        return '<span class="muted">no capacity declared (no virtual node with a resource quota)</span>'
    percent = room.percent
    figures = []
    for key, label, shown in _FIGURES:
        offered = room.allocatable[key]
        of = f" of {shown(offered)} ({percent[key]}%)" if offered else ' <span class="muted">(none declared)</span>'
        figures.append(f"<span>{label} <strong>{shown(room.requested[key])}</strong>{of}</span>")
    html = '<span class="room">' + "\n".join(figures) + "</span>"
    full = room.full
    if full:  # numbers and the names in RESOURCES only: nothing to escape
        title = f"The running pods request at least {room.threshold}% of this peer's allocatable {', '.join(full)}"
        shares = ", ".join(f"{key} {percent[key]}%" for key in full)
        html += f'\n<span class="badge warn" title="{title}">nearly full: {shares}</span>'
    return html


def _reason(term: dict[str, Any]) -> str:
    return escape(term.get("failed") or term.get("invalid") or "")


def _explanation(why: dict[str, Any]) -> str:
    """One virtual node's verdict (``explain``): the matching term, or why every term fails (the first
    line only past three lines: an excluded cluster fails every one)."""
    if why["all_clusters"]:
        return '<span class="muted">no selector: every peered cluster</span>'
    terms = why["terms"]
    if why["selected"]:
        index = why["matched_term"]
        term = terms[index] if index is not None and 0 <= index < len(terms) else {}
        return f"matches <code>{escape(term.get('text') or '(term)')}</code>"
    if len(terms) == 1:
        return _reason(terms[0])
    if len(terms) > 3:
        return f"fails all {len(terms)} lines; line 1: {_reason(terms[0])}"
    return "".join(
        f"<div>line {n} <code>{escape(t.get('text') or '(empty term)')}</code>: {_reason(t)}</div>"
        for n, t in enumerate(terms, 1)
    )


def _why(row: dict[str, Any], seen: dict[int, str]) -> str:
    """The Why cell of a cluster. ``seen``: the explanations written so far, by identity (clusters alike
    for the selector share one explanation object, and the rows hold them for the whole call)."""
    explanations = row["explanations"]
    if row["error"]:
        return (
            f'<span class="error">Invalid ClusterSelector: {escape(row["error"])} (Liqo stops evaluating here)</span>'
        )
    if row["note"]:
        return f'<span class="muted">{escape(row["note"])}</span>'
    parts = []
    for vn, why in explanations:
        text = seen.get(id(why))
        if text is None:
            text = seen[id(why)] = _explanation(why)
        parts.append(f'{text} <small class="muted">({escape(vn)})</small>' if len(explanations) > 1 else text)
    if row["disagree"]:
        parts.append(DISAGREE)
    return parts[0] if len(parts) == 1 else " ".join(parts)


def _cluster(row: dict[str, Any]) -> str:
    """A cluster id, with its offloading module's status when it is not Healthy."""
    status = row.get("module_status")
    if not status:
        return escape(row["cluster_id"])
    badge = f'<span class="badge bad" title="Offloading module {escape(status)}">{escape(status.lower())}</span>'
    return f"{escape(row['cluster_id'])} {badge}"


def _excluded(why: str, clusters: list[str]) -> str:
    if len(clusters) <= SHOWN_IDS:
        names = ", ".join(clusters)
    else:
        names = (
            f'<details class="inline-details excluded-ids"><summary>{len(clusters)} clusters</summary>'
            f"{', '.join(clusters)}</details>"
        )
    return f'<tr class="dim"><td>{names}</td><td><span class="badge muted">excluded</span></td><td>{why}</td></tr>'


@dataclass
class ClusterTable:
    """The rows of the preview's cluster table, and how many clusters are excluded for how many reasons."""

    html: SafeString
    excluded: int
    reasons: int


def cluster_table(rows: Iterable[dict[str, Any]], rooms: Mapping[str, Room]) -> ClusterTable:
    """The preview's cluster table from ``preview().clusters`` and ``preview().rooms``: the selected
    clusters, then the excluded ones grouped by their reason."""
    seen: dict[int, str] = {}
    selected: list[str] = []
    excluded: dict[str, list[str]] = {}  # the Why cell -> the clusters it is the reason of
    for row in rows:
        why = _why(row, seen)
        if not row["selected"]:
            excluded.setdefault(why, []).append(_cluster(row))
            continue
        room = rooms.get(row["cluster_id"])
        line = f'<div class="small room-line">{room_html(room)}</div>' if room is not None else ""
        if row.get("refuses"):
            reasons = "; ".join(escape(reason) for reason in row["refuses"])
            line += (
                f'<div class="small error refuses">selected, but it refuses new pods from this cluster: {reasons}</div>'
            )
        selected.append(
            f'<tr class="sel"><td>{_cluster(row)}{line}</td><td><span class="badge ok">selected</span></td>'
            f"<td>{why}</td></tr>"
        )
    html = "\n".join([*selected, *(_excluded(why, clusters) for why, clusters in excluded.items())])
    return ClusterTable(
        html=mark_safe(html or NO_CLUSTER),  # noqa: S308 - built from escaped parts
        excluded=sum(len(clusters) for clusters in excluded.values()),
        reasons=len(excluded),
    )
