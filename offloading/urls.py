from django.urls import path

from . import views

app_name = "offloading"

urlpatterns = [
    path("", views.home, name="home"),
    path("clusters/", views.cluster_list, name="cluster_list"),
    path("namespaces/", views.namespace_list, name="namespace_list"),
    path("matrix/", views.fleet_matrix, name="fleet_matrix"),
    path("namespaces/<str:name>/", views.namespace_detail, name="namespace_detail"),
    path("namespaces/<str:name>/status/", views.namespace_status, name="namespace_status"),
    path("namespaces/<str:name>/offload/", views.offload, name="namespace_offload"),
    path("namespaces/<str:name>/offload/preview/", views.offload_preview, name="namespace_offload_preview"),
    path("namespaces/<str:name>/unoffload/", views.unoffload, name="namespace_unoffload"),
    path("changes/", views.change_list, name="change_list"),
    path("changes/<int:pk>/", views.change_detail, name="change_detail"),
    path("changes/<int:pk>/status/", views.change_status, name="change_status"),
    path("changes/<int:pk>/reapply/", views.change_reapply, name="change_reapply"),
    path("bulk/", views.bulk, name="bulk"),
    path("bulk/preview/", views.bulk_preview, name="bulk_preview"),
    path("bulk/<int:pk>/", views.bulk_detail, name="bulk_detail"),
    path("bulk/<int:pk>/progress/", views.bulk_progress, name="bulk_progress"),
    path("audit/", views.audit_list, name="audit_list"),
]
