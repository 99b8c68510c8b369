"""One FilterSet for the audit page, the audit API and its export: actor, namespace, action, source,
outcome and a time range."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import django_filters
from django import forms

from offloading.choices import AuditAction, Source
from offloading.filtersets import IdFilter
from offloading.models import AuditEvent


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


class AuditFilterSet(django_filters.FilterSet):
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
