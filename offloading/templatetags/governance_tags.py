"""``{% governance_panel change %}``: the approval and the schedule of a change on its page (issue 29)."""

from __future__ import annotations

from typing import Any

from django import template
from django.core.exceptions import ObjectDoesNotExist

from offloading.governance import approvals, decisions
from offloading.models import ChangeRequest

register = template.Library()


@register.inclusion_tag("offloading/governance/_change_panel.html", takes_context=True)
def governance_panel(context: Any, change: ChangeRequest) -> dict[str, Any]:
    try:
        schedule = change.schedule
    except ObjectDoesNotExist:
        schedule = None
    return {
        "change": change,
        "approval": decisions.current_approval(change),
        "schedule": schedule,
        "waiting": change.state in approvals.WAITING,
        "request": context.get("request"),
        "csrf_token": context.get("csrf_token"),
    }
