"""Page routes of the Liqo domain (issue 28: managed clusters, the domain map), included by
offloading/urls.py (same app namespace). Empty until those pages land."""

from django.urls import URLPattern, URLResolver

urlpatterns: list[URLPattern | URLResolver] = []
