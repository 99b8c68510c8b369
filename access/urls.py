from django.urls import include, path

from access import views

app_name = "access"

urlpatterns = [
    path("tokens/", views.token_list, name="tokens"),
    path("tokens/<int:pk>/revoke/", views.token_revoke, name="token_revoke"),
    # Single sign-on; answers 404 unless OIDC_* is configured (access.middleware).
    path("oidc/", include("mozilla_django_oidc.urls")),
]
