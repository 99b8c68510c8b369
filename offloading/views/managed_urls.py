"""Page routes of the managed clusters (issue 28: the list; registering, editing and removing one, its access; the
namespace page's section that follows a namespace into its twins on the managed providers; every
cluster's namespaces, and every cluster's changes, in one list),
included by offloading/urls.py (same app namespace)."""

from django.urls import URLPattern, URLResolver, path

from offloading.views import fleetwide, managed, managed_access, twins

urlpatterns: list[URLPattern | URLResolver] = [
    path("managed-clusters/", managed.managed_list, name="managed_cluster_list"),
    path("managed-clusters/register/", managed.managed_register, name="managed_cluster_register"),
    path("managed-clusters/<str:name>/edit/", managed.managed_edit, name="managed_cluster_edit"),
    path("managed-clusters/<str:name>/remove/", managed.managed_remove, name="managed_cluster_remove"),
    path("managed-clusters/<str:name>/access/", managed_access.managed_access, name="managed_cluster_access"),
    path("namespaces/<str:name>/twins/", twins.namespace_twins, name="namespace_twins"),
    path("fleet/namespaces/", fleetwide.fleet_namespaces, name="fleet_namespaces"),
    path("fleet/changes/", fleetwide.fleet_changes, name="fleet_changes"),
]
