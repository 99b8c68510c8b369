"""Notifications: what the dashboard tells an outgoing webhook (ALERT_WEBHOOK_URL), and when.

Detection and de-duplication live here; the delivery (HTTP, retries) is in ``alertsend``.
"""

from __future__ import annotations
