"""Page routes of the gitops flow (issue 29), included by offloading/urls.py (same app namespace)."""

from django.urls import URLPattern, URLResolver, path

from offloading.views import gitops

urlpatterns: list[URLPattern | URLResolver] = [
    path("changes/<int:pk>/handoff/", gitops.change_handoff, name="change_handoff"),
    path("bulk/<int:pk>/handoff/", gitops.bulk_handoff, name="bulk_handoff"),
]
