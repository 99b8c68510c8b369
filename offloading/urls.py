from django.urls import URLPattern, URLResolver, include, path

from offloading.views import audit, bulk, changes, drift, fleet, freshness, insight, live, reflection

app_name = "offloading"

# Pages across the managed clusters, or of none: they have no copy under a cluster's m/<name>/ prefix
# (liqo_dash/urls.py, offloading/switcher.py). The freshness badge has one: each cluster's page polls its
# cluster's snapshot state (the live-poll middleware reads the cluster's name from the path).
FLEET_WIDE = (
    "managed_cluster_list",
    "managed_cluster_register",
    "managed_cluster_edit",
    "managed_cluster_remove",
    "managed_cluster_access",
    "fleet_namespaces",
    "fleet_changes",
)

urlpatterns: list[URLPattern | URLResolver] = [
    path("", live.page(insight.overview), name="home"),
    # Live pages: they poll themselves; live.page answers 304 while nothing they show has changed.
    path("clusters/", live.page(fleet.cluster_list), name="cluster_list"),
    path("clusters/<str:cluster_id>/", live.page(insight.cluster_detail), name="cluster_detail"),
    path("namespaces/", live.page(fleet.namespace_list), name="namespace_list"),
    path("matrix/", live.page(fleet.fleet_matrix), name="fleet_matrix"),
    path("namespaces/<str:name>/", fleet.namespace_detail, name="namespace_detail"),
    path("namespaces/<str:name>/status/", live.page(fleet.namespace_status), name="namespace_status"),
    path("namespaces/<str:name>/reflection/", reflection.namespace_reflection, name="namespace_reflection"),
    path("namespaces/<str:name>/offload/", changes.offload, name="namespace_offload"),
    path("namespaces/<str:name>/offload/preview/", changes.offload_preview, name="namespace_offload_preview"),
    path("namespaces/<str:name>/unoffload/", changes.unoffload, name="namespace_unoffload"),
    path("namespaces/<str:name>/drift/accept/", drift.accept, name="drift_accept"),
    path("namespaces/<str:name>/drift/reapply/", drift.reapply_mine, name="drift_reapply"),
    path("changes/", changes.change_list, name="change_list"),
    path("changes/<int:pk>/", changes.change_detail, name="change_detail"),
    path("changes/<int:pk>/status/", live.page(changes.change_status), name="change_status"),
    path("changes/<int:pk>/reapply/", changes.change_reapply, name="change_reapply"),
    path("bulk/", bulk.bulk, name="bulk"),
    path("bulk/preview/", bulk.bulk_preview, name="bulk_preview"),
    path("bulk/<int:pk>/", bulk.bulk_detail, name="bulk_detail"),
    path("bulk/<int:pk>/progress/", live.page(bulk.bulk_progress), name="bulk_progress"),
    path("bulk/<int:pk>/retry/", bulk.bulk_retry, name="bulk_retry"),
    path("audit/", live.page(audit.audit_list), name="audit_list"),
    path("live/freshness/", freshness.freshness, name="freshness"),
    path("", include("offloading.views.governance_urls")),
    path("", include("offloading.views.gitops_urls")),
    path("", include("offloading.views.domain_urls")),
    path("", include("offloading.views.managed_urls")),
]
