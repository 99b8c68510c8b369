"""The live pages' version counters (offloading.views.live; bumped by the triggers of migration 0013)."""

from __future__ import annotations

from django.db import models


class LiveVersion(models.Model):
    """One row per kind of data a live page shows (``offloading.views.live.KINDS``): a counter that
    database triggers bump in the transaction of every write to that kind's tables (migration 0013),
    so that an open page's poll reads a handful of rows instead of aggregating the snapshot. A kind whose
    rows name their managed cluster also has a row per cluster, ``kind@<managed pk>`` (issue 28: a
    cluster's pages poll those; 32 characters hold the longest kind and any primary key)."""

    kind = models.CharField(max_length=32, primary_key=True)
    version = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.kind} @ {self.version}"
