"""Alert payloads of the paging tools people use: PagerDuty Events API v2 and Slack webhooks.

Both go through :class:`~agentledger.alerts.sinks.WebhookSink` (retries, dead letter); only the
body differs. The alert's id is PagerDuty's ``dedup_key``, so every sighting of one condition
updates one incident and the alert's closed event (a fix, or an ack, which closes it here)
resolves it. Slack incoming webhooks cannot update a message: a closed alert posts a
"resolved" message naming the same alert id.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from agentledger.events.models import Alert

PAGERDUTY_EVENTS_URL = "https://events.pagerduty.com/v2/enqueue"
#: PagerDuty's severities are critical, error, warning and info.
_PD_SEVERITY = {"critical": "critical", "warning": "warning", "info": "info"}
_PD_SUMMARY_MAX = 1024
_SLACK_ICON = {
    "critical": ":rotating_light:",
    "warning": ":warning:",
    "info": ":information_source:",
}


def _where(alert: Alert) -> dict[str, Any]:
    fields = {
        "run_id": alert.run_id,
        "step": alert.step,
        "effect": alert.effect,
        "idempotency_key": alert.idempotency_key,
        "worker_id": alert.worker_id,
    }
    return {k: v for k, v in fields.items() if v is not None}


def pagerduty_body(alert: Alert, routing_key: str) -> dict[str, Any]:
    """An Events API v2 event: ``trigger`` while the alert is open, ``resolve`` once closed."""
    if alert.state == "closed":
        return {"routing_key": routing_key, "event_action": "resolve", "dedup_key": alert.alert_id}
    timestamp = datetime.fromtimestamp(alert.occurred_at / 1000, tz=UTC).isoformat()
    return {
        "routing_key": routing_key,
        "event_action": "trigger",
        "dedup_key": alert.alert_id,
        "payload": {
            "summary": alert.summary[:_PD_SUMMARY_MAX],
            "source": alert.source or "agentledger",
            "severity": _PD_SEVERITY[alert.severity],
            "timestamp": timestamp,
            "component": alert.run_id or alert.worker_id or "agentledger",
            "group": alert.source or "agentledger",
            "class": alert.code,
            "custom_details": {
                "action": alert.action,
                "count": alert.count,
                **_where(alert),
                "detail": json.loads(alert.detail_json),
            },
        },
        "client": "agentledger",
    }


def slack_body(alert: Alert) -> dict[str, Any]:
    """An incoming-webhook message: ``text`` (the notification) and mrkdwn ``blocks``."""
    where = ", ".join(f"{k} `{v}`" for k, v in _where(alert).items())
    named = f"{alert.code} (alert {alert.alert_id}): {alert.summary}"
    if alert.state == "closed":
        text = f":white_check_mark: RESOLVED {named}"
        lines = [text]
    else:
        text = f"{_SLACK_ICON[alert.severity]} {alert.severity.upper()} {named}"
        lines = [text, f"*Action:* {alert.action}" if alert.action else "", f"seen {alert.count}x"]
    if where:
        lines.append(where)
    section = {"type": "mrkdwn", "text": "\n".join(x for x in lines if x)}
    return {"text": text, "blocks": [{"type": "section", "text": section}]}
