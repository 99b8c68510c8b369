"""The project's URLs plus the access app's (until liqo_dash/urls.py includes them)."""

from django.urls import include, path

from liqo_dash.urls import urlpatterns as project_urlpatterns

urlpatterns = [path("", include("access.urls")), *project_urlpatterns]
