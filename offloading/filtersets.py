"""FilterSets shared by the pages and the REST API."""

from __future__ import annotations

import django_filters
from django.db.models import Q, QuerySet

from .liqo import constants as liqo
from .models import ClusterOffloading, Namespace

NOT_OFFLOADED = "none"


class NamespaceFilterSet(django_filters.FilterSet):
    q = django_filters.CharFilter(method="filter_q", label="Search")
    phase = django_filters.ChoiceFilter(
        method="filter_phase",
        label="Phase",
        empty_label="Any state",
        choices=[(NOT_OFFLOADED, "Not offloaded"), *((p, p) for p in liqo.PHASES)],
    )
    cluster = django_filters.CharFilter(method="filter_cluster", label="Offloaded to cluster")

    class Meta:
        model = Namespace
        fields = ["q", "phase", "cluster"]

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
        hosted = ClusterOffloading.objects.filter(cluster_id=value, selected=True).values("namespace_id")
        return queryset.filter(pk__in=hosted)
