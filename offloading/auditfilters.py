"""One FilterSet for the audit page, the audit API and its export: actor, namespace, action, source,
outcome and a time range."""

from __future__ import annotations

import django_filters
from django import forms

from offloading.choices import AuditAction, Source
from offloading.filtersets import IdFilter
from offloading.models import AuditEvent


class AuditFilterSet(django_filters.FilterSet):
    actor = django_filters.CharFilter(field_name="user_name", lookup_expr="icontains", label="Actor")
    namespace = django_filters.CharFilter(field_name="namespace", lookup_expr="icontains", label="Namespace")
    action = django_filters.ChoiceFilter(choices=AuditAction.choices, empty_label="Any action")
    source = django_filters.ChoiceFilter(choices=Source.choices, empty_label="Any source")
    outcome = django_filters.CharFilter(field_name="outcome", lookup_expr="iexact", label="Outcome")
    since = django_filters.IsoDateTimeFilter(
        field_name="time",
        lookup_expr="gte",
        label="Since",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
    until = django_filters.IsoDateTimeFilter(
        field_name="time", lookup_expr="lt", label="Until", widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    change = IdFilter(field_name="change_id", label="Change")

    class Meta:
        model = AuditEvent
        fields: list[str] = []
