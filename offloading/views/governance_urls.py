"""Page routes of the governance flow (issue 29), included by offloading/urls.py (same app namespace)."""

from django.urls import URLPattern, URLResolver, path

from offloading.views import governance

VERBS = ("approve", "reject", "cancel", "break-glass")

urlpatterns: list[URLPattern | URLResolver] = [
    path("approvals/", governance.approvals_page, name="governance_approvals"),
    *(
        path(f"changes/<int:pk>/{verb}/", governance.change_step, {"verb": verb}, name=f"governance_change_{verb}")
        for verb in VERBS
    ),
    *(
        path(f"bulk/<int:pk>/{verb}/", governance.bulk_step, {"verb": verb}, name=f"governance_bulk_{verb}")
        for verb in VERBS
    ),
]
