"""REST routes of the governance flow (issue 29), included by offloading/api/urls.py before the router's."""

from django.urls import URLPattern, URLResolver

urlpatterns: list[URLPattern | URLResolver] = []
