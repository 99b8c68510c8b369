from django.urls import URLPattern, URLResolver, include, path
from rest_framework.routers import DefaultRouter

from offloading.api import audit, changes, views

router = DefaultRouter()
router.register("clusters", views.ClusterViewSet)
router.register("namespaces", views.NamespaceViewSet)
router.register("changes", changes.ChangeRequestViewSet)
router.register("bulk", changes.BulkRequestViewSet)
router.register("audit", audit.AuditEventViewSet)

app_name = "api"

urlpatterns: list[URLPattern | URLResolver] = [
    path("snapshot/", views.SnapshotView.as_view(), name="snapshot"),
    path("", include("offloading.api.governance_urls")),
    path("", include("offloading.api.gitops_urls")),
    path("", include(router.urls)),
]
