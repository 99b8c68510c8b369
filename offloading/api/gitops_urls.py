"""REST routes of the gitops flow (issue 29), included by offloading/api/urls.py before the router's."""

from django.urls import URLPattern, URLResolver, path

from offloading.api import gitops

urlpatterns: list[URLPattern | URLResolver] = [
    path("changes/<int:pk>/handoff/", gitops.ChangeHandOffView.as_view(), name="changerequest-handoff"),
    path("bulk/<int:pk>/handoff/", gitops.BulkHandOffView.as_view(), name="bulkrequest-handoff"),
]
