"""REST routes of the governance flow (issue 29), included by offloading/api/urls.py before the router's."""

from django.urls import URLPattern, URLResolver, path

from offloading.api import governance

urlpatterns: list[URLPattern | URLResolver] = [
    path("approvals/", governance.AwaitingMe.as_view(), name="approvals"),
    path("changes/<int:pk>/approve/", governance.ApproveChange.as_view(), name="change-approve"),
    path("changes/<int:pk>/reject/", governance.RejectChange.as_view(), name="change-reject"),
    path("changes/<int:pk>/cancel/", governance.CancelChange.as_view(), name="change-cancel"),
    path("changes/<int:pk>/break-glass/", governance.BreakGlassChange.as_view(), name="change-break-glass"),
    path("bulk/<int:pk>/approve/", governance.ApproveBulk.as_view(), name="bulk-approve"),
    path("bulk/<int:pk>/reject/", governance.RejectBulk.as_view(), name="bulk-reject"),
    path("bulk/<int:pk>/cancel/", governance.CancelBulk.as_view(), name="bulk-cancel"),
    path("bulk/<int:pk>/break-glass/", governance.BreakGlassBulk.as_view(), name="bulk-break-glass"),
]
