"""Page routes of the Liqo domain map (issue 28), included by offloading/urls.py (same app namespace)."""

from django.urls import URLPattern, URLResolver, path

from offloading.views import domain, live

urlpatterns: list[URLPattern | URLResolver] = [
    # A live page: it polls itself; live.page answers 304 while nothing it shows has changed.
    path("domain/", live.page(domain.domain_map), name="domain_map"),
]
