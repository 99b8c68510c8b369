"""Take screenshots of a running liqo-dash (e.g. `make run`) with Debian's Chromium.

    .venv/bin/python scripts/screenshots.py http://127.0.0.1:8000 admin PASSWORD [OUT_DIR]

Pages: namespaces, clusters, a namespace detail, the offload form with a live preview, changes,
bulk, audit. Used to look at what we build at realistic sizes.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]  # fmt: skip


def main(base: str, user: str, password: str, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium", args=ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(f"{base}/accounts/login/")
        page.fill("input[name=username]", user)
        page.fill("input[name=password]", password)
        page.click("main button[type=submit]")
        page.wait_for_url(f"{base}/namespaces/")
        page.screenshot(path=str(out / "namespaces.png"), full_page=True)
        page.goto(f"{base}/clusters/")
        page.screenshot(path=str(out / "clusters.png"), full_page=True)
        offloaded = (
            page.goto(f"{base}/namespaces/?phase=SomeFailed")
            and page.locator("#namespace-table td:first-child a").first
        )
        if offloaded and offloaded.count():
            offloaded.click()
            page.wait_for_load_state()
            page.screenshot(path=str(out / "namespace-detail.png"), full_page=True)
        page.goto(f"{base}/namespaces/?phase=none")
        name = page.locator("#namespace-table td:first-child a").nth(3).inner_text()
        page.goto(f"{base}/namespaces/{name}/offload/")
        page.fill("textarea[name=cluster_selector]", "topology.kubernetes.io/region in (eu-west, eu-south)\n!staging")
        page.locator("#preview").get_by_text("clusters selected").wait_for()
        page.locator("#preview details").nth(2).click()
        page.screenshot(path=str(out / "offload-form.png"), full_page=True)
        for path, name in (("/changes/", "changes"), ("/bulk/", "bulk"), ("/audit/", "audit")):
            page.goto(f"{base}{path}")
            page.screenshot(path=str(out / f"{name}.png"), full_page=True)
        browser.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4] if len(sys.argv) > 4 else "screenshots/demo"))
