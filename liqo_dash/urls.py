from csp.decorators import csp_update
from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from offloading import health, metrics, switcher
from offloading import urls as page_urls
from offloading.api import urls as api_urls
from offloading.api.docs import SwaggerView
from offloading.views import admingate

admingate.install(admin.site)  # a signed-in user who is not staff: a 403 page, not the admin's login

urlpatterns = [
    # Probes and scrapes: no login (see offloading/health.py and offloading/metrics.py).
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics_view, name="metrics"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    # Another managed cluster's API resources and pages: the same paths under m/<cluster name>/
    # (offloading/switcher.py); the paths without it address the default cluster.
    path(
        f"api/v1/{switcher.ROUTE}",
        include((switcher.per_cluster(api_urls.urlpatterns, "api", exclude=["api-root"], api=True), "api-cluster")),
    ),
    path("api/v1/", include("offloading.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves its start-up script as a file, so no inline script runs; Swagger UI still
    # sets inline styles, allowed on this page only.
    path(
        "api/docs/",
        csp_update({"style-src": ["'unsafe-inline'"]})(SwaggerView.as_view(url_name="schema")),
        name="api_docs",
    ),
    path("", include("access.urls")),
    path(
        switcher.ROUTE,
        include((switcher.per_cluster(page_urls.urlpatterns, "offloading", exclude=page_urls.FLEET_WIDE), "cluster")),
    ),
    path("", include("offloading.urls")),
]
