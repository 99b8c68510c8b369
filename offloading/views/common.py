"""Helpers shared by the page modules."""

from __future__ import annotations

from typing import Any

import yaml
from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails

from offloading.changes.errors import ChangeRejected
from offloading.forms import SPEC_FIELD_TO_FORM
from offloading.models import Namespace


def dump_yaml(obj: Any) -> str:
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)


# The form field of each field a refusal names (spec and API field names); others are form-wide.
FIELD_TO_FORM = {**SPEC_FIELD_TO_FORM, "namespaceSelector": "namespace_selector"}


def reject_into(form: Any, exc: ChangeRejected) -> None:
    """Put a refusal of the change flow on the form: each message on the field it names when the form
    has that field, otherwise as a form-wide error (for example "changed since you loaded it")."""
    for key, messages in exc.errors.items():
        target = FIELD_TO_FORM.get(key)
        for message in messages:
            form.add_error(target if target in form.fields else None, message)


def status_context(namespace: Namespace) -> dict[str, Any]:
    rows = list(namespace.cluster_states.all()) if namespace.offloaded else []
    return {"namespace": namespace, "cluster_rows": rows}


class HtmxHttpRequest(HttpRequest):
    """A request as django-htmx's middleware leaves it (for type checking)."""

    htmx: HtmxDetails
