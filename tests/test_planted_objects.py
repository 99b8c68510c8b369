"""Whatever the cluster holds, every page works: objects written the way kubectl, GitOps or an older
liqoctl write them (messy but valid: the API server with Liqo's CRDs accepts each of them, under
``fieldValidation=Strict``) are planted in the sandbox through its HTTP API, the snapshot picks them up,
and then every page, fragment and API GET (plus the previews and a bulk dry run) answers without a 5xx;
in Chromium no page is wider than the window at 1440 and 420 px and cluster data is bidi-isolated.

The corpus is fixed (`plant_corpus`); on top of it a Hypothesis strategy derived from the CRD's schema
(`sandbox.crds.NAMESPACE_OFFLOADING_SPEC`) and from the label grammar plants 25 more offloadings, with a
fixed seed so a CI run is reproducible.
"""

from __future__ import annotations

import itertools
import re
import traceback
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from liqo_rules.constants import GROUP, PLURAL, VERSION
from offloading.cluster import kube
from offloading.models import ManagedCluster
from offloading.snapshot import informer
from offloading.snapshot import inventory as _inventory  # noqa: F401 - registers pods and events
from offloading.snapshot.refresh import refresh
from sandbox.crds import NAMESPACE_OFFLOADING_SPEC, SELECTOR_OPERATORS, Schema
from tests.fixtures.personas import ADMIN_PASSWORD

pytestmark = [pytest.mark.e2e]

SCREENSHOT_DIR = Path(__file__).resolve().parent.parent / "var" / "screenshots"
BIDI = "\u202e\u2066\u2067\u2068\u2069\u200f"
RLO_TEXT = "payment to \u202eexe.daolnwod"
ZERO_WIDTH = "\u200b\u200c\u200d\ufeff"
LONG_URL = "https://example.com/" + "a1b2c3d4e5" * 102  # 1,040 characters, no break opportunity
SPACES_NS = "planted-spaces"
LONG_NS = "planted-" + "n" * 55  # 63 characters
PREFIX = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])  # a 253-character DNS subdomain
LONG_KEY = PREFIX + "/" + "k" * 63  # the longest label key
LONG_VALUE = "v" + "-_." * 20 + "xv"  # 63 characters
HUGE_KEY = "x" * 3000  # no label key, but the CRD has no pattern: the API server stores it
PLANTED = {"planted": "yes"}


def _expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


def _terms(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeSelectorTerms": list(terms)}


REGION = "topology.kubernetes.io/region"
CORPUS: dict[str, dict[str, Any]] = {
    # namespace -> (labels, annotations, spec of its NamespaceOffloading or None)
    SPACES_NS: {
        "labels": {**PLANTED, "team": "pay"},
        "spec": {
            "podOffloadingStrategy": "Remote",
            "clusterSelector": _terms(
                {"matchExpressions": [_expr(REGION, "In", "eu south 1", "eu-south-1")]},
                {"matchExpressions": [_expr("cores", "Gt", "4"), _expr("cores", "Lt", "64")]},
                {"matchExpressions": [_expr("liqo.io/provider", "Exists"), _expr("gpu", "DoesNotExist")]},
                {"matchFields": [_expr("metadata.name", "NotIn", "naples", "turin")]},
                {},
                {"matchExpressions": [_expr(REGION, "In", "eu" + BIDI + "-south" + ZERO_WIDTH)]},
            ),
        },
    },
    "planted-many-terms": {
        "labels": PLANTED,
        "spec": {
            "clusterSelector": _terms(*({"matchExpressions": [_expr(f"k{i}", "In", f"v{i}")]} for i in range(50)))
        },
    },
    "planted-wide-term": {
        "labels": PLANTED,
        "spec": {
            "namespaceMappingStrategy": "EnforceSameName",
            "clusterSelector": _terms(
                {"matchExpressions": [_expr(f"key-{i}", "NotIn", f"value {i}") for i in range(50)]}
            ),
        },
    },
    LONG_NS: {
        "labels": {**PLANTED, LONG_KEY: LONG_VALUE, "owner": "v" * 63},
        "annotations": {
            "note": RLO_TEXT + " \u2066isolated?\u2069 \u200fRTL-mark" + ZERO_WIDTH,
            "long": "y" * 4000,
            PREFIX + "/" + "a" * 63: LONG_URL,
        },
        "spec": {
            "clusterSelector": _terms(
                {"matchExpressions": [_expr(LONG_KEY, "In", LONG_VALUE, "w" * 63)]},
                {"matchExpressions": [_expr(LONG_KEY, "NotIn", *("v" * 60 + f"{i:03}" for i in range(30)))]},
            )
        },
    },
    "planted-huge-key": {
        "labels": PLANTED,
        "spec": {"clusterSelector": _terms({"matchExpressions": [_expr(HUGE_KEY, "In", "a")]})},
    },
    "planted-selected-name": {
        "labels": PLANTED,
        "spec": {
            "namespaceMappingStrategy": "SelectedName",
            "remoteNamespaceName": "Not A Namespace " + "r" * 300 + RLO_TEXT,
            "clusterSelector": _terms(),
        },
    },
    "planted-empty-selector": {"labels": PLANTED, "spec": {"clusterSelector": _terms()}},
    "planted-plain": {"labels": {**PLANTED, "zero-width": "ok"}, "annotations": {"zw": ZERO_WIDTH * 10}, "spec": None},
}


def _event(name: str, namespace: str, involved: dict[str, Any], message: str, kind: str = "Warning") -> dict[str, Any]:
    now = timezone.now().strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": involved,
        "reason": "Planted",
        "message": message,
        "type": kind,
        "count": 1,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "source": {"component": "kubectl-planted"},
    }


def plant_corpus(k8s: Any) -> None:
    """The fixed corpus, written as kubectl would (the official client, fieldValidation=Strict)."""
    for name, item in CORPUS.items():
        meta = {"name": name, "labels": item["labels"], "annotations": item.get("annotations") or {}}
        k8s.core.create_namespace({"metadata": meta}, field_validation="Strict")
        if item["spec"] is not None:
            body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "NamespaceOffloading"}
            body |= {"metadata": {"name": "offloading"}, "spec": item["spec"]}
            k8s.custom.create_namespaced_custom_object(GROUP, VERSION, name, PLURAL, body, field_validation="Strict")
    ns_ref = {"kind": "Namespace", "name": SPACES_NS, "apiVersion": "v1"}
    off_ref = {"kind": "NamespaceOffloading", "name": "offloading", "namespace": SPACES_NS}
    off_ref |= {"apiVersion": f"{GROUP}/{VERSION}"}
    events = [
        _event("planted-url", "default", ns_ref, "Failed to fetch " + LONG_URL),
        _event("planted-rlo", "default", ns_ref, RLO_TEXT, "Normal"),
        _event("planted-bidi", SPACES_NS, off_ref, "Invalid ClusterSelector: " + BIDI + ZERO_WIDTH + " " + "z" * 600),
        _event("planted-long-ns", "default", {"kind": "Namespace", "name": LONG_NS, "apiVersion": "v1"}, LONG_URL),
    ]
    for ev in events:
        k8s.core.create_namespaced_event(ev["metadata"]["namespace"], ev, field_validation="Strict")
    # A peer's VirtualNode with the longest label key and value (copied onto its Node by the sandbox).
    vn = k8s.custom.get_namespaced_custom_object(GROUP, VERSION, "liqo-tenant-milan", "virtualnodes", "milan")
    vn["spec"]["labels"] = {**vn["spec"]["labels"], LONG_KEY: LONG_VALUE, "note.example.com/x": "y" * 63}
    k8s.custom.replace_namespaced_custom_object(
        GROUP, VERSION, "liqo-tenant-milan", "virtualnodes", "milan", vn, field_validation="Strict"
    )


def _relist(kind: str) -> None:
    sync = informer.SYNCED[kind]
    seen: set[str] = set()
    for items, _ in kube.list_pages(kind):
        sync.apply([("ADDED", obj) for obj in items], timezone.now(), relist=True)
        seen |= {sync.key(obj) for obj in items}
    sync.relisted(seen, timezone.now())


def snapshot(sandbox: Any) -> None:
    sandbox.wait_idle(30)
    assert refresh().ok
    for kind in ("pods", "events"):
        _relist(kind)


# -- every page, fragment and API answer ------------------------------------------------------------
def _get_urls(namespaces: list[str]) -> list[str]:
    urls = [
        "/",
        "/namespaces/",
        "/namespaces/?offloaded=true",
        "/namespaces/?offloaded=false&phase=Ready",
        "/namespaces/?q=planted",
        "/namespaces/?selector=planted%3Dyes",
        "/namespaces/?cluster=milan",
        "/namespaces/?sort=-name",
        "/clusters/",
        "/clusters/milan/",
        "/clusters/florence/",
        "/matrix/",
        "/matrix/?selector=planted%3Dyes",
        "/fleet/namespaces/",
        "/fleet/namespaces/?q=planted&offloaded=yes",
        "/audit/",
        "/audit/?cluster=default&namespace=planted",
        "/managed-clusters/",
        "/changes/",
        "/bulk/",
        "/live/freshness/",
        "/api/v1/snapshot/",
        "/api/v1/namespaces/",
        "/api/v1/namespaces/?selector=planted%3Dyes",
        "/api/v1/namespaces/?q=planted&limit=1000",
        "/api/v1/clusters/",
        "/api/v1/clusters/milan/",
        "/api/v1/changes/",
        "/api/v1/audit/",
        "/api/v1/audit/?cluster=default",
        "/api/v1/audit/export/?format=csv&cluster=default",
        "/api/v1/bulk/",
        # The default cluster under its own prefix (offloading/switcher.py: every cluster's pages and resources).
        "/m/default/",
        "/m/default/namespaces/?q=planted",
        "/m/default/clusters/milan/",
        "/m/default/matrix/?selector=planted%3Dyes",
        "/m/default/audit/",
        "/m/default/changes/",
        "/api/v1/m/default/snapshot/",
        "/api/v1/m/default/namespaces/?selector=planted%3Dyes",
        "/api/v1/m/default/changes/",
        "/api/v1/m/default/audit/",
        "/api/v1/m/default/bulk/",
    ]
    for name in namespaces:
        urls += [
            f"/namespaces/{name}/",
            f"/namespaces/{name}/status/",
            f"/namespaces/{name}/reflection/",
            f"/namespaces/{name}/offload/",
            f"/namespaces/{name}/unoffload/",
            f"/api/v1/namespaces/{name}/",
            f"/m/default/namespaces/{name}/",
            f"/m/default/namespaces/{name}/offload/",
            f"/api/v1/m/default/namespaces/{name}/",
        ]
    return urls


def _form(spec: dict[str, Any]) -> dict[str, str]:
    return {
        "namespace_mapping_strategy": spec.get("namespaceMappingStrategy", "DefaultName"),
        "pod_offloading_strategy": spec.get("podOffloadingStrategy", "LocalAndRemote"),
        "remote_namespace_name": spec.get("remoteNamespaceName", ""),
        "cluster_selector": "region in (eu south 1)\n!gpu,cores>4\n" + LONG_KEY + "=" + LONG_VALUE,
    }


def exercise(client: Any, namespaces: list[str], specs: dict[str, dict[str, Any] | None]) -> list[str]:
    """Request everything; the failures (5xx or an exception) as text."""
    failures: list[str] = []

    def check(method: str, url: str, **kwargs: Any) -> None:
        try:
            response = getattr(client, method)(url, **kwargs)
        except Exception:  # noqa: BLE001 - every failure is reported, with its traceback
            failures.append(f"{method.upper()} {url}: {traceback.format_exc()}")
            return
        if response.status_code >= 500:
            failures.append(f"{method.upper()} {url}: {response.status_code}")

    for url in _get_urls(namespaces):
        check("get", url)
    selector_form = {
        "action": "offload",
        "namespace_selector": "planted=yes",
        "namespace_mapping_strategy": "DefaultName",
        "pod_offloading_strategy": "LocalAndRemote",
        "cluster_selector": "region in (eu south 1)",
    }
    check("post", "/bulk/preview/", data=selector_form)
    check("post", "/bulk/preview/", data={**selector_form, "action": "unoffload"})
    check("post", "/m/default/bulk/preview/", data=selector_form)
    bulk_api = {"action": "offload", "namespaceSelector": "planted=yes", "dryRun": True}
    for spec in ({}, {"clusterSelector": CORPUS[SPACES_NS]["spec"]["clusterSelector"]}):
        check("post", "/api/v1/bulk/", data={**bulk_api, "spec": spec}, content_type="application/json")
    check(
        "post",
        "/api/v1/bulk/",
        data={"action": "unoffload", "namespaceSelector": "planted=yes", "dryRun": True},
        content_type="application/json",
    )
    for name in namespaces:
        spec = specs.get(name) or {}
        check("post", f"/namespaces/{name}/offload/preview/", data=_form(spec))
        check("post", f"/m/default/namespaces/{name}/offload/preview/", data=_form(spec))
        for body in ({"selectors": ["region in (eu south 1)"]}, {"clusterSelector": spec.get("clusterSelector")}, spec):
            body = {k: v for k, v in body.items() if v is not None}
            check("post", f"/api/v1/namespaces/{name}/preview/", data=body, content_type="application/json")
    return failures


@pytest.mark.django_db(transaction=True)
def test_every_page_and_api_answers_the_planted_corpus(admin_client: Any, sandbox: Any, k8s: Any) -> None:
    plant_corpus(k8s)
    snapshot(sandbox)
    from offloading.models import Namespace
    from offloading.models.inventory import KubeEvent

    assert set(CORPUS) <= set(Namespace.objects.values_list("name", flat=True))
    assert KubeEvent.objects.filter(namespace=SPACES_NS, reason="Planted").count() == 3
    names = [*CORPUS, "alpha"]
    ManagedCluster.objects.create(name="turin", context="turin")  # a second cluster: the header's switcher
    failures = exercise(admin_client, names, {name: CORPUS[name]["spec"] for name in CORPUS})
    assert not failures, "\n".join(failures)
    prefixed = admin_client.get(f"/m/default/namespaces/{SPACES_NS}/")
    assert prefixed.status_code == 200 and 'id="cluster-switcher"' in prefixed.content.decode()
    page = admin_client.get(f"/namespaces/{SPACES_NS}/").content.decode()
    assert "eu south 1" in page and LONG_URL in page


# -- Hypothesis: offloadings derived from the CRD schema, labels from the label grammar -------------
LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
DNS_PREFIX = r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?){0,3}"
label_names = st.from_regex(rf"\A{LABEL_NAME}\Z")
label_keys = st.one_of(
    label_names, st.tuples(st.from_regex(rf"\A{DNS_PREFIX}\Z"), label_names).map(lambda pair: "/".join(pair))
)
label_values = st.one_of(st.just(""), label_names)
# Selector values are free strings in the CRD: spaces, bidi controls and zero-width characters included.
selector_values = st.one_of(
    label_values,
    st.text(alphabet=st.sampled_from("ab -._09" + BIDI + ZERO_WIDTH), min_size=1, max_size=40),
    st.integers(-(2**63), 2**63 - 1).map(str),
)


def strategy_for(schema: Schema, name: str = "") -> st.SearchStrategy[Any]:
    """A strategy for values `schema` accepts; the selector's strings follow the documented semantics
    (operators, label keys) so that most examples are meaningful, not only valid."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "object" and "properties" in schema:
        props = schema["properties"]
        required = {k: strategy_for(v, k) for k, v in props.items() if k in schema.get("required", [])}
        optional = {k: strategy_for(v, k) for k, v in props.items() if k not in required}
        return st.fixed_dictionaries(required, optional=optional)
    if kind == "array":
        sizes = {"nodeSelectorTerms": 6, "matchExpressions": 5, "matchFields": 2, "values": 4}
        return st.lists(strategy_for(schema["items"], name), max_size=sizes.get(name, 3))
    if kind == "string":
        if name == "operator":
            return st.sampled_from(SELECTOR_OPERATORS)
        if name == "key":
            return label_keys
        if name == "values":
            return selector_values
        if name == "remoteNamespaceName":
            return st.one_of(st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?\Z"), st.text(min_size=1, max_size=80))
        return st.text(max_size=20)
    raise AssertionError(f"no strategy for {schema}")


def _creatable(spec: dict[str, Any]) -> bool:
    """Liqo's webhook refuses SelectedName without a remote name on CREATE."""
    return spec.get("namespaceMappingStrategy") != "SelectedName" or bool(spec.get("remoteNamespaceName"))


offloading_specs = strategy_for(NAMESPACE_OFFLOADING_SPEC).filter(_creatable)
namespace_labels = st.dictionaries(label_keys, label_values, max_size=6)
_counter = itertools.count()


@pytest.mark.django_db(transaction=True)
def test_generated_offloadings_never_break_a_page(admin_client: Any, sandbox: Any, k8s: Any) -> None:
    @seed(20240611)
    @settings(
        max_examples=25,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(spec=offloading_specs, labels=namespace_labels)
    def planted(spec: dict[str, Any], labels: dict[str, str]) -> None:
        name = f"hyp-{next(_counter)}"
        k8s.core.create_namespace(
            {"metadata": {"name": name, "labels": {**labels, **PLANTED}}}, field_validation="Strict"
        )
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "NamespaceOffloading", "metadata": {"name": "offloading"}}
        k8s.custom.create_namespaced_custom_object(
            GROUP, VERSION, name, PLURAL, {**body, "spec": spec}, field_validation="Strict"
        )
        snapshot(sandbox)
        failures = exercise(admin_client, [name], {name: spec})
        assert not failures, "\n".join(failures)

    planted()
    from offloading.models import Namespace

    assert Namespace.objects.filter(name__startswith="hyp-", offloaded=True).count() == 25


# -- the browser: no page wider than the window, cluster data bidi-isolated -------------------------
# (``chromium``: the session's, tests/fixtures/browser.py)


# Text nodes that hold a bidi control whose element is not isolated: the element showing the value must
# have a computed unicode-bidi of isolate (isolate-override, plaintext), or be inside <bdi>. (Chromium
# isolates block elements such as td and div by default; an inline one, a chip, code or a link, leaks
# the override into the text after it.)
NOT_ISOLATED = r"""() => {
  const controls = /[\u202a-\u202e\u2066-\u2069\u200e\u200f]/;
  const out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode, el = node.parentElement;
    if (!controls.test(node.data) || el.closest("bdi, script, style, template")) continue;
    const bidi = getComputedStyle(el).unicodeBidi;
    if (bidi === "isolate" || bidi === "isolate-override" || bidi === "plaintext") continue;
    out.push(el.tagName + "." + el.className + ": " + JSON.stringify(node.data.slice(0, 60)));
  }
  return out;
}"""
# The elements past the window's right edge, outside any box that scrolls sideways, whose children are
# not past it themselves (where the width comes from).
OVERFLOWING = """() => {
  const w = window.innerWidth, out = [];
  const past = (el) => el.getBoundingClientRect().right > w + 1 && el.getBoundingClientRect().width > 0;
  for (const el of document.querySelectorAll("body *")) {
    if (!past(el) || [...el.children].some(past)) continue;
    let p = el.parentElement, scrolled = false;
    while (p) { const o = getComputedStyle(p).overflowX; if (o === "auto" || o === "scroll" || o === "hidden") { scrolled = true; break; } p = p.parentElement; }
    if (!scrolled) out.push(el.tagName + "." + el.className + "#" + el.id + " right=" + Math.round(el.getBoundingClientRect().right) + " " + JSON.stringify((el.textContent || "").slice(0, 40)));
  }
  return out.slice(0, 6);
}"""


def _browser_urls() -> list[str]:
    urls = ["/", "/namespaces/", "/namespaces/?q=planted", "/clusters/", "/clusters/milan/", "/matrix/"]
    urls += ["/audit/", "/audit/?cluster=default", "/changes/", "/bulk/"]
    for name in CORPUS:
        urls += [f"/namespaces/{name}/", f"/namespaces/{name}/offload/"]
    urls += [f"/namespaces/{SPACES_NS}/unoffload/"]
    urls += ["/m/default/namespaces/?q=planted", f"/m/default/namespaces/{SPACES_NS}/"]
    return urls


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_no_page_is_wider_than_the_window_and_bidi_is_isolated(
    chromium: Any, live_server: Any, admin_user: Any, sandbox: Any, k8s: Any
) -> None:
    plant_corpus(k8s)
    snapshot(sandbox)
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    for width in (1440, 420):
        page = chromium.new_page(viewport={"width": width, "height": 900})
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("input[name=username]", "admin")
        page.fill("input[name=password]", ADMIN_PASSWORD)
        page.click("main button[type=submit]")
        page.wait_for_url(f"{live_server.url}/")
        for url in _browser_urls():
            response = page.goto(live_server.url + url)
            assert response is not None and response.status < 500, f"{url}: {response and response.status}"
            page.wait_for_load_state("networkidle")
            extra = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            if extra > 0:
                problems.append(f"{width}px {url}: {extra}px too wide: {page.evaluate(OVERFLOWING)}")
            loose = page.evaluate(NOT_ISOLATED)
            if loose:
                problems.append(f"{width}px {url}: bidi not isolated: {loose[:5]}")
        page.goto(f"{live_server.url}/namespaces/{SPACES_NS}/")
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(SCREENSHOT_DIR / f"planted-namespace-{width}.png"), full_page=True)
        page.goto(f"{live_server.url}/namespaces/{LONG_NS}/")
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(SCREENSHOT_DIR / f"planted-long-namespace-{width}.png"), full_page=True)
        page.close()
    assert not problems, "\n".join(problems)


def test_the_corpus_is_what_kubernetes_allows() -> None:
    from liqo_rules.selectors.labels import is_label_key, is_label_value

    assert len(LONG_NS) == 63 and len(LONG_KEY) == 253 + 1 + 63 and len(LONG_VALUE) == 63 and len(LONG_URL) >= 1040
    for item in CORPUS.values():
        assert all(is_label_key(k) and is_label_value(v) for k, v in item["labels"].items())
    assert not is_label_value("eu south 1") and not is_label_key(HUGE_KEY)
    assert re.search("[\u202e]", RLO_TEXT)
