"""Page routes of the gitops flow (issue 29), included by offloading/urls.py (same app namespace)."""

from django.urls import URLPattern, URLResolver

urlpatterns: list[URLPattern | URLResolver] = []
