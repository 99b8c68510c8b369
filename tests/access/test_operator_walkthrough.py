"""A walkthrough in a real browser as an operator limited to ``pay*``: the menu shows the role and the
scopes, the namespace in scope offers its controls, the one out of scope says why and offers none,
and typing the URL of a control anyway is refused. Screenshots go to ``screenshots/access-*.png``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser import SCREENSHOTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _ensure_roles() -> None:
    """transaction=True flushes the tables, and with them the role groups of the data migration."""
    from django.contrib.auth.models import Group

    from access import roles

    for role in roles.ROLES:
        Group.objects.get_or_create(name=role)


def test_an_operator_sees_only_what_they_may_do(
    browser_page: Any,
    live_server: Any,
    fleet: Any,
    make_user: Any,
) -> None:
    _ensure_roles()
    make_user("otto", "operator", globs=["pay*"])
    page = browser_page
    page.set_viewport_size({"width": 1280, "height": 800})
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "otto")
    page.fill("input[name=password]", "otto-password-123")
    page.click("main button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")  # signing in lands on the overview
    page.goto(f"{live_server.url}/namespaces/")

    # The list: the namespace in scope has its control, the other is read only.
    rows = page.locator("table tbody tr")
    assert rows.filter(has_text="payments").get_by_role("link", name="Offload").count() == 1
    shop = rows.filter(has_text="shop")
    assert shop.get_by_role("link", name="Edit").count() == 0
    assert shop.get_by_text("read only").count() == 1
    page.locator(".user-menu summary").click()
    menu = page.locator(".user-menu")
    assert "operator" in menu.inner_text() and "pay*" in menu.inner_text()
    assert menu.get_by_role("link", name="API tokens").count() == 1
    page.screenshot(path=str(SCREENSHOTS / "access-operator-list.png"), full_page=True)
    page.locator(".user-menu summary").click()

    # Out of scope: no controls, and the reason with the scopes.
    page.goto(f"{live_server.url}/namespaces/shop/")
    assert page.get_by_role("button", name="Edit offloading").count() == 0
    assert page.get_by_role("link", name="Edit offloading").count() == 0
    assert "out of scope (your scopes: pay*)" in page.locator("#not-allowed").inner_text()
    page.screenshot(path=str(SCREENSHOTS / "access-operator-out-of-scope.png"), full_page=True)

    # Typing the URL anyway: a 403 page that says why.
    response = page.goto(f"{live_server.url}/namespaces/shop/unoffload/")
    assert response is not None and response.status == 403
    assert "out of scope" in page.locator("main").inner_text()
    page.screenshot(path=str(SCREENSHOTS / "access-operator-refused.png"), full_page=True)

    # In scope: the offload form is there.
    page.goto(f"{live_server.url}/namespaces/payments/")
    page.get_by_role("button", name="Offload", exact=True).click()
    page.wait_for_url(f"{live_server.url}/namespaces/payments/offload/")
    assert page.locator("#offload-form").count() == 1
    # Bulk is in the menu for operators.
    assert page.locator("header nav").get_by_role("link", name="Bulk").count() == 1


def test_a_viewer_has_no_bulk_and_no_controls(
    browser_page: Any,
    live_server: Any,
    fleet: Any,
    make_user: Any,
) -> None:
    _ensure_roles()
    make_user("vera", "viewer")
    page = browser_page
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "vera")
    page.fill("input[name=password]", "vera-password-123")
    page.click("main button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")  # signing in lands on the overview
    page.goto(f"{live_server.url}/namespaces/")
    assert page.locator("header nav").get_by_role("link", name="Bulk").count() == 0
    assert page.locator("table tbody").get_by_role("link", name="Offload").count() == 0
    page.goto(f"{live_server.url}/namespaces/payments/")
    assert "Viewers may not offload" in page.locator("#not-allowed").inner_text()
    page.screenshot(path=str(SCREENSHOTS / "access-viewer-namespace.png"), full_page=True)
