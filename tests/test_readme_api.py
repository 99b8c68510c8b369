"""The README's API examples, run as they are written (curl, through bash) against a live server with a
token from ``create_api_token`` and the demo scenario (``make run``): a sandbox started with it and the
snapshot refreshed from it, so the names in the examples are those a reader of the README sees. Each
command's status and the quoted parts of its answer are those the README documents after it."""

from __future__ import annotations

import io
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from offloading.cluster import kube
from offloading.models import Namespace
from offloading.snapshot.refresh import refresh

pytestmark = pytest.mark.django_db(transaction=True)

README = Path(__file__).resolve().parent.parent / "README.md"
_EXPECT = re.compile(r"# (\d{3})((?: `[^`]+`)*)\s*$")


def examples() -> list[tuple[str, int, list[str]]]:
    """(command, documented status, documented fragments) of each curl in the README's REST API section."""
    section = README.read_text().split("## REST API", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    found: list[tuple[str, int, list[str]]] = []
    command = ""
    for line in block.replace("\\\n", " ").splitlines():
        expected = _EXPECT.match(line)
        if line.startswith("curl "):
            command = line
        elif expected and command:
            found.append((command, int(expected.group(1)), re.findall(r"`([^`]+)`", expected.group(2))))
            command = ""
    return found


def test_the_readme_documents_its_examples() -> None:
    found = examples()
    assert len(found) >= 5
    assert {status for _c, status, _f in found} >= {200, 202, 400, 412}


@pytest.fixture
def demo(tmp_path: Path, settings: Any) -> Iterator[Any]:
    """The demo scenario (what ``make run`` loads) in a sandbox, the dashboard's snapshot refreshed from it."""
    from sandbox import Sandbox

    with Sandbox(scenario="demo", controller_delay=0.0, port=0) as sb:
        kubeconfig = sb.write_kubeconfig(tmp_path / "kubeconfig")
        settings.LIQO_DASH = {**settings.LIQO_DASH, "KUBECONFIG": str(kubeconfig), "KUBE_CONFIG_MODE": "kubeconfig"}
        kube.reset_client()
        sb.wait_idle()
        refresh()
        assert Namespace.objects.filter(name="web-frontend", offloading_phase="Ready").exists()
        yield sb
    kube.reset_client()


def test_the_readme_api_examples_answer_what_it_says(live_server: Any, admin_user: Any, demo: Any) -> None:
    out = io.StringIO()
    call_command("create_api_token", admin_user.get_username(), "--name", "readme", stdout=out)
    env = {**os.environ, "TOKEN": out.getvalue().strip(), "API": f"{live_server.url}/api/v1"}
    for command, status, fragments in examples():
        ran = subprocess.run(
            ["bash", "-c", command + " -w '\\n%{http_code}'"], env=env, capture_output=True, text=True, timeout=60
        )
        body, _, code = ran.stdout.rpartition("\n")
        assert ran.returncode == 0 and int(code) == status, (command, ran.stdout[-2000:], ran.stderr)
        for fragment in fragments:
            assert fragment in body, (command, fragment, body[:2000])
