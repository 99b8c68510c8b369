"""Table rows rendered once for what they show.

The live pages (namespace list, cluster list, a namespace's status) are polled every couple of seconds
by every open tab. While nothing moved the poll is an empty 304 (views.live), but while anything moves
(a bulk applying, a peer flapping) every poll renders the page again, and at 200 peers a page holds
dozens of rows full of chips and labels, most of them unchanged: rendering them is most of its cost. A row here is a ``NamedTuple`` of the values it shows
(strings, numbers, booleans and tuples of them; JSON columns as their text) and its HTML comes from
a row template that sees nothing but that tuple. So the HTML is a pure function of the tuple, and it
is kept per process in a bounded LRU keyed by it: a row whose values changed is a new key, and a
cached row can never show stale truth; nothing needs invalidating.
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass
from functools import lru_cache
from html import escape
from typing import Any, ClassVar, NamedTuple

from django.contrib.humanize.templatetags.humanize import naturaltime
from django.db.models import Aggregate, Count, JSONField, TextField
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast
from django.template.loader import get_template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from liqo_rules import constants as liqo_constants
from liqo_rules.spec import is_system_namespace
from offloading.gitops.detect import TOOL_NAMES, detect
from offloading.gitops.managed import badges
from offloading.insight.diagnosis import creating_hint
from offloading.models import ClusterOffloading, generation_lags
from offloading.models.mapping import MappingEntry
from offloading.views.common import split_labels
from offloading.views.tones import tone

# Rows kept per process (each 1-3 kB): every row of 40 pages of 50, a few MB at most.
ROWS_KEPT = 2048
# The selected clusters shown on a namespace list row; the rest are counted ("+47 more").
CHIPS_PER_ROW = 6


@lru_cache(maxsize=ROWS_KEPT)
def render_row(template_name: str, row: tuple[Any, ...], base: str = "") -> SafeString:
    """The HTML of ``row`` by ``template_name``, which sees ``row`` alone and the path prefix of the page's
    managed cluster (``base``, for its links: offloading/switcher.py), both in the key."""
    return SafeString(get_template(template_name).render({"row": row, "cluster_base": base}).strip())


def rendered(template_name: str, rows: list[Any], base: str = "") -> SafeString:
    """Every row of a table body, each rendered once for its values (and the page's cluster prefix)."""
    return SafeString("\n".join(render_row(template_name, row, base) for row in rows))


# --------------------------------------------------------------------------------------------------
# Peered clusters (cluster list)


class VirtualNodeCell(NamedTuple):
    name: str
    has_node: bool
    healthy: bool
    labels: str  # JSON text
    capacity: str  # JSON text


class ClusterRow(NamedTuple):
    cluster_id: str
    role: str
    networking_status: str
    authentication_status: str
    offloading_status: str
    modules: str  # JSON text
    virtual_nodes: tuple[VirtualNodeCell, ...]
    hosted: int  # offloaded namespaces that select it

    @property
    def is_consumer(self) -> bool:
        return self.role in ("Consumer", "ConsumerAndProvider")

    @property
    def alerts(self) -> list[str]:
        modules = _json(self.modules) or {}
        return list(((modules.get("offloading") or {}).get("alerts")) or [])

    @property
    def nodes_html(self) -> SafeString:
        return virtual_nodes_cell(self.virtual_nodes)

    @property
    def capacity_html(self) -> SafeString:
        capacities = ((_json(vn.capacity) or {}).items() for vn in self.virtual_nodes)
        return format_html_join("", '<div class="small">{}: {}</div>', (kv for items in capacities for kv in items))


def _json(text: str | None) -> Any:
    return json.loads(text) if text else None


def _chips(labels: list[tuple[str, str]]) -> str:
    # html.escape (quotes too) rather than format_html_join: a page holds thousands of labels.
    return "".join(f'<span class="chip small">{escape(k)}={escape(v)}</span>' for k, v in labels)


def virtual_nodes_cell(nodes: tuple[VirtualNodeCell, ...]) -> SafeString:
    """A cluster row's virtual nodes with their labels (the distinctive ones shown, the standard ones
    folded), as HTML built here: a row carries dozens of labels, too many for the template engine."""
    if not nodes:
        return format_html('<span class="muted">{}</span>', "none")
    parts = []
    for vn in nodes:
        distinctive, standard = split_labels(_json(vn.labels) or {})
        flags = format_html(' <span class="badge bad">{}</span>', "unhealthy") if not vn.healthy else ""
        if not vn.has_node:
            flags += format_html(' <small class="muted">{}</small>', "(no Node: labels from the VirtualNode)")
        folded = (
            format_html(
                '<details class="inline-details"><summary class="muted small">{} standard labels</summary>{}</details>',
                len(standard),
                mark_safe(_chips(standard)),  # noqa: S308 - escaped by _chips
            )
            if standard
            else ""
        )
        parts.append(
            format_html(
                '<div class="vn"><strong>{}</strong>{}<div>{}</div>{}</div>',
                vn.name,
                flags,
                mark_safe(_chips(distinctive)),  # noqa: S308 - escaped by _chips
                folded,
            )
        )
    return mark_safe("".join(parts))  # noqa: S308 - every part is built by format_html


# --------------------------------------------------------------------------------------------------
# Namespaces (namespace list)


class NamespaceRow(NamedTuple):
    name: str
    offloaded: bool
    deleting: bool
    phase: str
    warnings: int
    reconciling: bool  # Liqo has not reconciled the latest spec yet
    chips: tuple[tuple[str, str], ...]  # the first selected clusters (id, state)
    more_clusters: int  # selected clusters beyond those
    mapping: str
    pod_strategy: str
    pods_local: int
    pods_remote: int
    remote_name: str
    is_system: bool
    allowed: bool  # the signed-in user may offload or edit it
    refusal: str  # why not
    # Who manages the offloading from Git: (tool, probable, headline and evidence) per claim (gitops_badges)
    gitops: tuple[tuple[str, bool, str], ...] = ()

    @property
    def chips_html(self) -> SafeString:
        chips = "".join(
            f'<span class="chip {tone(state)}" title="{escape(state)}">{escape(cluster_id)}</span>'
            for cluster_id, state in self.chips
        )
        return mark_safe(chips)  # noqa: S308 - every value above is escaped


class _Pairs(Aggregate):
    """The (cluster id, state) of every row of the group, as one JSON array of pairs (in no order)."""

    function = "JSON_GROUP_ARRAY"
    template = "%(function)s(JSON_ARRAY(%(expressions)s))"
    output_field = JSONField()

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(
            compiler, connection, function="JSONB_AGG", template="%(function)s(JSONB_BUILD_ARRAY(%(expressions)s))"
        )


def selected_clusters(namespace_ids: list[int]) -> dict[int, tuple[tuple[tuple[str, str], ...], int]]:
    """For each namespace, its first CHIPS_PER_ROW selected clusters (id, state) and how many it
    selects (at 200 peers a namespace selects dozens; the row shows a few). One row per namespace,
    its clusters as one JSON array: a page's 50 namespaces select over a thousand clusters at 200
    peers, and reading them as rows cost twice as much."""
    grouped = (
        ClusterOffloading.objects.filter(selected=True, namespace_id__in=namespace_ids)
        .order_by()
        .values("namespace_id")
        .annotate(n=Count("id"), pairs=_Pairs("cluster_id", "state"))
        .values_list("namespace_id", "n", "pairs")
    )
    return {
        namespace_id: (tuple((cluster_id, state) for cluster_id, state in heapq.nsmallest(CHIPS_PER_ROW, pairs)), n)
        for namespace_id, n, pairs in grouped
    }


@dataclass(slots=True)
class ListedNamespace:
    """What a list row needs of a namespace, read as plain values (a page of model instances, with
    their JSON columns decoded, costs more than the rest of the row); labels decoded only if asked."""

    pk: int
    name: str
    labels_text: str | None
    offloaded: bool
    offloading_deleting: bool
    offloading_phase: str
    offloading_generation: int
    offloading_observed_generation: int
    remote_namespace_name: str
    mapping: str | None
    pod_strategy: str | None
    gitops_text: str | None  # gitops_facts as JSON text (decoded only when the offloading has some)
    pods_local: int = 0
    pods_remote: int = 0
    warnings: int = 0

    FIELDS: ClassVar[tuple[str, ...]] = (
        "pk",
        "name",
        "labels_text",
        "offloaded",
        "offloading_deleting",
        "offloading_phase",
        "offloading_generation",
        "offloading_observed_generation",
        "remote_namespace_name",
        "mapping",
        "pod_strategy",
        "gitops_text",
    )

    @classmethod
    def values(cls, queryset: Any) -> Any:
        """``queryset`` of Namespace as the values of FIELDS, in that order."""
        return queryset.annotate(
            labels_text=Cast("labels", output_field=TextField()),
            mapping=KeyTextTransform("namespaceMappingStrategy", "offloading_spec"),
            pod_strategy=KeyTextTransform("podOffloadingStrategy", "offloading_spec"),
            gitops_text=Cast("gitops_facts", output_field=TextField()),
        ).values_list(*cls.FIELDS)

    @property
    def labels(self) -> dict[str, str]:
        return json.loads(self.labels_text) if self.labels_text else {}

    @property
    def is_system(self) -> bool:
        return is_system_namespace(self.name)

    @property
    def status_is_stale(self) -> bool:
        return generation_lags(self)


@lru_cache(maxsize=256)
def gitops_badges(facts_text: str) -> tuple[tuple[str, bool, str], ...]:
    """(tool, probable, headline and evidence) of each GitOps claim on an offloading's snapshot facts
    (JSON text): the row shows the tool ("Flux", "Argo CD", short enough for a phone's row) and the
    namespace page's headline and evidence as its title. Decoded and detected once per distinct facts
    (a fleet managed from Git has a handful of them), so a poll of the list pays nothing per row for it."""
    facts = json.loads(facts_text) if facts_text else None
    if not facts:
        return ()
    detection = detect(facts)
    return tuple(
        (TOOL_NAMES[claim.tool], badge.probable, f"{badge.headline}\n{badge.title}".strip())
        for claim, badge in zip(detection.claims, badges(detection), strict=True)
    )


def namespace_row(ns: Any, chips: tuple[tuple[str, str], ...], selected: int, decision: Any) -> NamespaceRow:
    """A list row of namespace ``ns`` (a ListedNamespace, with ``pods_local``, ``pods_remote`` and
    ``warnings`` set by annotate_inventory), its first selected clusters (id, state), how many it
    selects, and the user's access ``decision``."""
    chips = chips if ns.offloaded else ()
    return NamespaceRow(
        name=ns.name,
        offloaded=ns.offloaded,
        deleting=ns.offloading_deleting,
        phase=ns.offloading_phase,
        warnings=ns.warnings,
        reconciling=ns.status_is_stale,
        chips=chips,
        more_clusters=max(0, selected - len(chips)) if ns.offloaded else 0,
        mapping=(ns.mapping or "") if ns.offloaded else "",
        pod_strategy=(ns.pod_strategy or "") if ns.offloaded else "",
        pods_local=ns.pods_local,
        pods_remote=ns.pods_remote,
        remote_name=ns.remote_namespace_name,
        is_system=ns.is_system,
        allowed=bool(decision),
        refusal=str(getattr(decision, "reason", "") or ""),
        gitops=gitops_badges(ns.gitops_text or "") if ns.offloaded else (),
    )


# --------------------------------------------------------------------------------------------------
# A namespace's per-cluster status (namespace page, change page, polled fragment)


class StatusRow(NamedTuple):
    cluster_id: str
    selected: bool
    state: str
    since: str  # as shown ("3 minutes ago")
    message: str
    hint: str = ""  # what Liqo is doing and what to check (a cluster in Creating: diagnosis.creating_hint)


def _tearing_down(namespace: Any) -> set[str]:
    """The clusters whose NamespaceMap still reports a remote namespace of ``namespace`` (a currentMapping
    entry) among those it no longer selects and shows as NotSelected (a stale Ready, or not yet)."""
    candidates = list(
        namespace.cluster_states.filter(selected=False, state="NotSelected").values_list("cluster_id", flat=True)
    )
    if not candidates:
        return set()
    entries = (
        MappingEntry.objects.of(namespace.managed_id)
        .filter(namespace=namespace.name, cluster_id__in=candidates)
        .exclude(current_phase="")
    )
    return set(entries.values_list("cluster_id", flat=True))


def status_context(namespace: Any, base: str = "") -> dict[str, Any]:
    """``namespace`` and its per-cluster status rows (``status_rows``, rendered; ``base``: the page's
    cluster prefix, for their links)."""
    rows = []
    if namespace.offloaded:
        shown: dict[Any, str] = {}  # a fleet's clusters often share one time: said once
        tearing = _tearing_down(namespace)
        for cluster_id, selected, state, since, message in namespace.cluster_states.order_by("cluster_id").values_list(
            "cluster_id", "selected", "state", "since", "message"
        ):
            if since is not None and since not in shown:
                shown[since] = str(naturaltime(since))
            if not selected and state == "NotSelected" and cluster_id in tearing:
                # Liqo's Ready is not stale yet: the peer still reports the remote namespace (issue 27).
                state, message = liqo_constants.REASON_TERMINATING, liqo_constants.MESSAGE_TERMINATING
            rows.append(StatusRow(cluster_id, selected, state, shown.get(since, ""), message, creating_hint(state)))
    return {
        "namespace": namespace,
        "status_rows": rendered("offloading/_status_row.html", rows, base),
        "has_status": bool(rows),
    }
