"""Helpers of the browser tests (Debian's Chromium driven by Playwright): where Chromium is, where
screenshots go, how long an ``expect`` waits, signing in, and waiting until htmx is idle. The
``browser_page`` fixture that uses them is in tests/fixtures/browser.py."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from tests.fixtures.personas import ADMIN_PASSWORD

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOTS = Path(os.environ.get("LIQO_DASH_SCREENSHOTS", Path(__file__).resolve().parent.parent / "screenshots"))
# What a slow CI machine needs for an ``expect`` (Playwright's default is 5 s); one that holds returns at once.
EXPECT_TIMEOUT_MS = 20_000

# Added to every page before its own scripts: when the user last typed or changed a field, and when a
# trigger with a delay (``input changed delay:300ms``) last fired, so that ``htmx_idle`` also knows about
# a request htmx has not sent yet because its delay is still running.
TRACK_INPUT = """(() => {
  window.__liqoInputAt = -Infinity;
  window.__liqoDelayedAt = -Infinity;
  const mark = () => { window.__liqoInputAt = performance.now(); };
  document.addEventListener("input", mark, true);
  document.addEventListener("change", mark, true);
  document.addEventListener("htmx:trigger", (event) => {
    const spec = (event.target && event.target.getAttribute && event.target.getAttribute("hx-trigger")) || "";
    if (spec.includes("delay:")) window.__liqoDelayedAt = performance.now();
  }, true);
})();"""

# Idle: the page has loaded, no htmx request is in flight or queued (htmx marks the element that sent
# one with ``htmx-request`` until its response is swapped in, and sends a queued one in the same task),
# and no delayed trigger can still fire: either one fired after the last input (a later trigger of the
# same element cancels a pending delay), or the longest delay on the page, plus a second, has passed.
HTMX_IDLE = """() => {
  if (document.readyState !== "complete" || document.querySelector(".htmx-request")) return false;
  const inputAt = window.__liqoInputAt ?? -Infinity;
  if ((window.__liqoDelayedAt ?? -Infinity) >= inputAt) return true;
  let longest = 0;
  for (const el of document.querySelectorAll("[hx-trigger]")) {
    for (const m of el.getAttribute("hx-trigger").matchAll(/delay:([0-9.]+)(ms|s|m)?/g)) {
      longest = Math.max(longest, Number(m[1]) * ({ ms: 1, s: 1000, m: 60000 }[m[2]] ?? 1));  // as htmx reads it
    }
  }
  return longest === 0 || performance.now() - inputAt > longest + 1000;
}"""


def sign_in(page: Any, live_server: Any, name: str = "admin", password: str = ADMIN_PASSWORD) -> None:
    """Sign ``name`` in through the login form; the page is then on the overview, where signing in lands."""
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", name)
    page.fill("input[name=password]", password)
    page.click("main button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")


def login(page: Any, live_server: Any) -> None:
    """The admin signed in, on the namespace list."""
    sign_in(page, live_server)
    page.goto(f"{live_server.url}/namespaces/")


def htmx_idle(page: Any) -> None:
    """Wait until htmx has nothing in flight, queued or about to be sent (see HTMX_IDLE): after it, what
    the page shows is the answer to what was typed last, and no late response replaces an element."""
    page.wait_for_function(HTMX_IDLE, polling=100)
