"""Limit/offset pagination that refuses what it cannot read (DRF's silently falls back to defaults)."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

MAX_LIMIT = 1000


def _number(request: Request, name: str, minimum: int, maximum: int | None) -> int | None:
    values = request.query_params.getlist(name)
    if not values:
        return None
    if len(values) > 1:
        raise ValidationError({name: ["give it once"]})
    value = values[0]
    top = f" and at most {maximum}" if maximum is not None else ""
    if not (value.isascii() and value.isdigit()) or int(value) < minimum or (maximum and int(value) > maximum):
        raise ValidationError({name: [f"must be an integer of at least {minimum}{top}"]})
    return int(value)


class StrictLimitOffsetPagination(LimitOffsetPagination):
    max_limit = MAX_LIMIT

    def get_limit(self, request: Request) -> int | None:
        limit = _number(request, self.limit_query_param, 1, self.max_limit)
        return self.default_limit if limit is None else limit

    def get_offset(self, request: Request) -> int:
        return _number(request, self.offset_query_param, 0, None) or 0

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.limit_query_param:
                parameter["schema"].update(minimum=1, maximum=self.max_limit)
            elif parameter["name"] == self.offset_query_param:
                parameter["schema"].update(minimum=0)
        return parameters
