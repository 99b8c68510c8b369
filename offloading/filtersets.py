"""FilterSets shared by the pages and the REST API: namespaces, changes, and the audit trail (one FilterSet for
the audit page, the audit API and its export: managed cluster, actor, namespace, action, source, outcome and
a time range)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import django_filters
from django import forms
from django.core.exceptions import ValidationError
from django.db.models import Q, QuerySet

from liqo_rules import constants as liqo
from liqo_rules.limits import requirement_limit_problems
from liqo_rules.selectors.parse import parse_requirements
from liqo_rules.selectors.requirements import SelectorError
from offloading.choices import AuditAction, Source
from offloading.models import AuditEvent, ChangeRequest, ClusterOffloading, ManagedCluster, Namespace

NOT_OFFLOADED = "none"


# The kubectl -l grammar as a regular expression, for the OpenAPI schema: every selector the parser takes
# matches it (it is looser than the parser: keys and values are checked by their own rules after it).
_WS = r"[ \t\r\n]*"
_ID = r"[^=!(),<> \t\r\n\x00]+"
_REQUIREMENT = (
    rf"{_WS}(?:!{_WS}{_ID}|{_ID}(?:{_WS}(?:==|!=|=){_WS}(?:{_ID})?|{_WS}[<>]{_WS}{_ID}"
    rf"|[ \t\r\n]+(?:in|notin){_WS}\({_WS}(?:{_ID})?(?:{_WS},{_WS}(?:{_ID})?)*{_WS}\))?){_WS}"
)
SELECTOR_PATTERN = rf"^(?:{_REQUIREMENT}(?:,{_REQUIREMENT})*|{_WS})$"
# What a text filter takes: anything but NUL (Django's forms refuse it).
TEXT_PATTERN = r"^[^\x00]*$"
MAX_ID = 2**62


class StrictIntegerField(forms.IntegerField):
    """Only ASCII digits (Django's IntegerField also takes ``1.0``, ``+1`` and `` 1``, which an
    ``integer`` in the OpenAPI schema does not)."""

    def to_python(self, value: object) -> int | None:
        if value in self.empty_values:
            return None
        if not (isinstance(value, str) and value.isascii() and value.isdigit()):
            raise ValidationError(self.error_messages["invalid"], code="invalid")
        return super().to_python(value)


class IdFilter(django_filters.NumberFilter):
    """The id of a row: digits only, from 1 to ``MAX_ID`` (an id over int64 was a 500)."""

    field_class = StrictIntegerField

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", MAX_ID)
        super().__init__(*args, **kwargs)


def _invalid(*messages: str) -> ValidationError:
    """Messages with ``%`` escaped and (empty) params, so both django-filter and DRF %-format them."""
    return ValidationError([ValidationError(m.replace("%", "%%"), params={"_": ""}) for m in messages])


def validate_label_selector(value: str) -> None:
    """A ``kubectl -l`` selector within the dashboard's limits (``liqo_rules.limits``). Messages
    quote the input, so a ``%`` in it is escaped (``?selector=%25`` was a 500)."""
    try:
        requirements = parse_requirements(value)
    except SelectorError as exc:
        raise _invalid(str(exc)) from exc
    over = requirement_limit_problems(requirements)
    if over:
        raise _invalid(*over)


class NamespaceFilterSet(django_filters.FilterSet):
    q = django_filters.CharFilter(method="filter_q", label="Search")
    phase = django_filters.ChoiceFilter(
        method="filter_phase",
        label="Phase",
        empty_label="Any state",
        choices=[(NOT_OFFLOADED, "Not offloaded"), *((p, p) for p in liqo.PHASES)],
    )
    cluster = django_filters.CharFilter(method="filter_cluster", label="Offloaded to cluster")
    offloaded = django_filters.ChoiceFilter(
        method="filter_offloaded",
        label="Offloaded",
        empty_label="Offloaded or not",
        choices=[("true", "Offloaded"), ("false", "Not offloaded")],
    )
    selector = django_filters.CharFilter(
        method="filter_selector", label="Label selector", validators=[validate_label_selector]
    )

    class Meta:
        model = Namespace
        fields = ["q", "phase", "cluster", "offloaded", "selector"]

    def filter_selector(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        """kubectl -l syntax over the namespaces' labels (matched here, as the API server would), among
        ``queryset``'s rows: those of the managed cluster the page or the API scoped it to (the default
        cluster's rows alone would make ``/m/<name>/namespaces/?selector=`` match nothing)."""
        requirements = parse_requirements(value)
        if not requirements:
            return queryset
        ids = [
            pk
            for pk, labels in queryset.order_by().values_list("pk", "labels")
            if all(r.matches(labels or {}) for r in requirements)
        ]
        return queryset.filter(pk__in=ids)

    def filter_offloaded(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(offloaded=value == "true")

    def filter_q(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        value = value.strip()
        if not value:
            return queryset
        return queryset.filter(Q(name__icontains=value) | Q(remote_namespace_name__icontains=value))

    def filter_phase(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        if value == NOT_OFFLOADED:
            return queryset.filter(offloaded=False)
        return queryset.filter(offloaded=True, offloading_phase=value)

    def filter_cluster(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        value = value.strip()
        if not value:
            return queryset
        # Not scoped to a managed cluster here: the rows are matched by namespace id, so the result keeps to
        # the cluster ``queryset`` is scoped to (the pages and the API scope it with objects.of).
        hosted = ClusterOffloading.objects.filter(cluster_id=value, selected=True).values("namespace_id")
        return queryset.filter(pk__in=hosted)


class ChangeRequestFilterSet(django_filters.FilterSet):
    """Changes by namespace, state, action, source and bulk request (an unknown id matches nothing)."""

    bulk = IdFilter(field_name="bulk_id")

    class Meta:
        model = ChangeRequest
        fields = ["namespace", "state", "action", "source", "bulk"]


class UtcDateTimeFilter(django_filters.IsoDateTimeFilter):
    """An ISO 8601 time, compared in UTC. Python takes offsets up to 24 h, PostgreSQL only up to 16 h
    (``-22:37`` was a 500 there), and a time near year 1 or 9999 may not fit once moved to UTC: it is
    clamped to the earliest or latest time, which filters the same."""

    def filter(self, qs: Any, value: Any) -> Any:
        if value is not None and value.tzinfo is not None:
            try:
                value = value.astimezone(UTC)
            except OverflowError:
                value = (datetime.min if value.year < 2 else datetime.max).replace(tzinfo=UTC)
        return super().filter(qs, value)


def _managed_clusters(request: Any = None) -> QuerySet[ManagedCluster]:
    return ManagedCluster.objects.order_by("-is_default", "name")


class AuditFilterSet(django_filters.FilterSet):
    # The trail holds every managed cluster's events (issue 28); ``cluster`` keeps one's, by its name.
    cluster = django_filters.ModelChoiceFilter(
        field_name="managed",
        queryset=_managed_clusters,
        to_field_name="name",
        label="Managed cluster",
        empty_label="Every cluster",
        help_text="The name of a managed cluster: only its events (default: every cluster's).",
    )
    actor = django_filters.CharFilter(field_name="user_name", lookup_expr="icontains", label="Actor")
    namespace = django_filters.CharFilter(field_name="namespace", lookup_expr="icontains", label="Namespace")
    action = django_filters.ChoiceFilter(choices=AuditAction.choices, empty_label="Any action")
    source = django_filters.ChoiceFilter(choices=Source.choices, empty_label="Any source")
    outcome = django_filters.CharFilter(field_name="outcome", lookup_expr="iexact", label="Outcome")
    since = UtcDateTimeFilter(
        field_name="time",
        lookup_expr="gte",
        label="Since",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
    until = UtcDateTimeFilter(
        field_name="time", lookup_expr="lt", label="Until", widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    change = IdFilter(field_name="change_id", label="Change")

    class Meta:
        model = AuditEvent
        fields: list[str] = []
