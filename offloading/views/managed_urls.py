"""Page routes of the managed clusters (issue 28: the list, registering one), included by
offloading/urls.py (same app namespace). Empty until those pages land."""

from django.urls import URLPattern, URLResolver

urlpatterns: list[URLPattern | URLResolver] = []
