"""Page routes of the managed clusters (issue 28: the list, registering one), included by
offloading/urls.py (same app namespace)."""

from django.urls import URLPattern, URLResolver, path

from offloading.views import managed

urlpatterns: list[URLPattern | URLResolver] = [
    path("managed-clusters/", managed.managed_list, name="managed_cluster_list"),
    path("managed-clusters/register/", managed.managed_register, name="managed_cluster_register"),
]
