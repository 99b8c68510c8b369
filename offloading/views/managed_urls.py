"""Page routes of the managed clusters (issue 28: the list, registering one, and the namespace page's
section that follows a namespace into its twins on the managed providers), included by
offloading/urls.py (same app namespace)."""

from django.urls import URLPattern, URLResolver, path

from offloading.views import managed, twins

urlpatterns: list[URLPattern | URLResolver] = [
    path("managed-clusters/", managed.managed_list, name="managed_cluster_list"),
    path("managed-clusters/register/", managed.managed_register, name="managed_cluster_register"),
    path("namespaces/<str:name>/twins/", twins.namespace_twins, name="namespace_twins"),
]
