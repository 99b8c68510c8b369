"""The Content-Security-Policy: no inline script or style anywhere, and the pages (htmx included) and
the API docs still work under it in a real browser, with no violation reported."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser import login


@pytest.mark.django_db
def test_every_page_carries_the_policy_without_unsafe_inline(admin_client: Any, fleet: Any) -> None:
    for url in ("/namespaces/", "/namespaces/payments/offload/", "/accounts/login/", "/audit/", "/bulk/"):
        policy = admin_client.get(url)["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "style-src 'self'" in policy, url
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy, url
        assert "frame-ancestors 'none'" in policy
    # The API docs: Swagger UI sets inline styles, allowed there only; never inline scripts.
    docs = admin_client.get("/api/docs/")["Content-Security-Policy"]
    assert "script-src 'self';" in docs + ";" and "style-src 'self' 'unsafe-inline'" in docs


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_htmx_pages_and_the_api_docs_run_under_the_policy(
    browser_page: Any,
    live_server: Any,
    admin_user: Any,
    fleet: Any,
) -> None:
    page = browser_page
    violations: list[str] = []
    page.on(
        "console",
        lambda message: (
            violations.append(f"{page.url}: {message.text[:60]}") if "Content Security Policy" in message.text else None
        ),
    )
    login(page, live_server)

    # htmx: the live preview follows the selector (a request and a swap, under the policy).
    page.goto(f"{live_server.url}/namespaces/payments/offload/")
    preview = page.locator("#preview")
    preview.get_by_text("2 of 2 clusters selected").wait_for()
    page.fill("textarea[name=cluster_selector]", "topology.kubernetes.io/region in (eu-west)")
    preview.get_by_text("1 of 2 clusters selected").wait_for()

    # The API docs: Swagger UI renders the operations from the schema.
    page.goto(f"{live_server.url}/api/docs/")
    page.locator(".swagger-ui .opblock").first.wait_for(timeout=60_000)  # builds the schema first

    assert violations == []
