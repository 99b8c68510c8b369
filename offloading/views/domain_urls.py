"""Page routes of the Liqo domain map (issue 28), included by
offloading/urls.py (same app namespace). Empty until those pages land."""

from django.urls import URLPattern, URLResolver

urlpatterns: list[URLPattern | URLResolver] = []
