"""The NamespaceOffloading manifest `liqoctl offload namespace --output yaml|json` prints (d.1)."""

from __future__ import annotations

from typing import Any

from liqo_rules import constants as c
from liqo_rules.goformat import go_json, go_yaml
from liqo_rules.spec import FIELD_MAPPING, FIELD_POD, FIELD_REMOTE_NAME, FIELD_SELECTOR, defaults_view

# liqoctl offload namespace --output yaml|json.


def _go_requirement(expr: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"key": expr.get("key", ""), "operator": expr.get("operator", "")}
    if expr.get("values"):
        out["values"] = list(expr["values"])
    return out


def _go_term(term: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if term.get("matchExpressions"):
        out["matchExpressions"] = [_go_requirement(e) for e in term["matchExpressions"]]
    if term.get("matchFields"):
        out["matchFields"] = [_go_requirement(e) for e in term["matchFields"]]
    return out


def manifest(namespace: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The NamespaceOffloading object liqoctl builds, as a dict in Go struct field order."""
    d = defaults_view(spec)
    go_spec: dict[str, Any] = {FIELD_MAPPING: d[FIELD_MAPPING]}
    if d.get(FIELD_REMOTE_NAME):
        go_spec[FIELD_REMOTE_NAME] = d[FIELD_REMOTE_NAME]
    go_spec[FIELD_POD] = d[FIELD_POD]
    terms = ((d.get(FIELD_SELECTOR) or {}).get("nodeSelectorTerms")) or []
    go_spec[FIELD_SELECTOR] = {"nodeSelectorTerms": [_go_term(t) for t in terms]}
    return {
        "kind": c.KIND,
        "apiVersion": c.API_VERSION,
        "metadata": {"name": c.OFFLOADING_NAME, "namespace": namespace},
        "spec": go_spec,
        "status": {},
    }


def render_manifest(namespace: str, spec: dict[str, Any], output: str = "yaml") -> str:
    """Exactly what `liqoctl offload namespace NS ... --output yaml|json` prints for one namespace.

    YAML: sorted keys followed by a `---` line; JSON: 4-space MarshalIndent in Go field order plus newline.
    """
    obj = manifest(namespace, spec)
    if output == "yaml":
        return go_yaml(obj) + "---\n"
    if output == "json":
        return go_json(obj) + "\n"
    raise ValueError(f"unsupported output format {output!r}")
