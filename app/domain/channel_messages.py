"""What each kind of alert channel receives: the message shapes of Slack, Microsoft Teams and email
for an alert, a notice (a failure, recovery or success, perhaps grouped) or a channel's test
message, and how a channel URL is shown.

Pure: a delivery's stored payload (`deliveries.alert_payload`, or a test message) in, a document
out. No I/O, no Flask, no SQLAlchemy.

- Slack: an incoming-webhook message, `text` (the notification fallback) plus Block Kit `blocks`:
  a header, the job and status as fields, the error excerpt as code, buttons linking back.
- Teams: a message carrying one Adaptive Card (version 1.4), as incoming webhooks and Workflows
  accept it: a title, a FactSet (job, status, when), the excerpt, Action.OpenUrl links.
- Email: a subject, a plain-text part and an HTML part (every value escaped).

Links need the installation's address (`BASE_URL`); without it a message has no links.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

EXCERPT_CHARS = 500
SLACK_HEADER_CHARS = 150  # Block Kit's limit for a header's text
TITLES = {
    "dead_letter": "Job failed for good",
    "failure": "Job failed",
    "overdue": "Job is overdue",
    "consecutive_failures": "Job keeps failing",
    "auto_paused": "Job paused after repeated failures",
    "queue_backlog": "Queue is backing up",
    "worker_lost": "Worker lost",
    "recovery": "Job is working again",
    "success": "Job succeeded",
    "test": "Cronwell test message",
}


@dataclass(frozen=True)
class Notice:
    """The facts every shape shows, taken from a delivery payload."""

    title: str
    kind: str
    job: str | None
    excerpt: str
    when: str | None
    links: tuple[tuple[str, str], ...]  # (label, absolute URL)
    count: int = 1  # how many notices one grouped message tells of


def notice_from_payload(payload: dict[str, Any], base_url: str | None) -> Notice:
    """The facts of an alert payload (`{"type": "alert", "alert": {...}}`) or a test message."""
    if payload.get("type") == "test":
        return Notice(
            TITLES["test"], "test", None, str(payload.get("message", ""))[:EXCERPT_CHARS], payload.get("created_at"), ()
        )
    if payload.get("type") == "notice":
        return _notice_facts(payload.get("notice") or {}, base_url)
    alert = payload.get("alert") or {}
    kind = str(alert.get("kind") or "alert")
    job = alert.get("job_name") or (f"job {alert['job_id']}" if alert.get("job_id") else None)
    return Notice(
        title=TITLES.get(kind, kind.replace("_", " ").capitalize()) + (f": {job}" if job else ""),
        kind=kind,
        job=job,
        excerpt=str(alert.get("message") or "")[:EXCERPT_CHARS],
        when=alert.get("created_at"),
        links=_links(alert, base_url),
    )


PLURALS = {"failure": "failures", "recovery": "recoveries", "success": "successes"}


def _notice_facts(notice: dict[str, Any], base_url: str | None) -> Notice:
    """The facts of a notice (a failure, recovery or success; grouped: how many since when)."""
    event = str(notice.get("event") or "notice")
    job = notice.get("job_name") or (f"job {notice['job_id']}" if notice.get("job_id") else None)
    count = int(notice.get("count") or 1)
    excerpt = str(notice.get("message") or "")
    if count > 1:
        excerpt = f"{count} {PLURALS.get(event, event)} since {notice.get('first_at')}; the latest: {excerpt}"
    return Notice(
        title=TITLES.get(event, event.capitalize()) + (f": {job}" if job else ""),
        kind=event,
        job=job,
        excerpt=excerpt[:EXCERPT_CHARS],
        when=notice.get("created_at"),
        links=_links(notice, base_url),
        count=count,
    )


def _links(alert: dict[str, Any], base_url: str | None) -> tuple[tuple[str, str], ...]:
    if not base_url:
        return ()
    base = base_url.rstrip("/")
    links = []
    if alert.get("execution_id"):
        links.append(("Open execution", f"{base}/executions/{int(alert['execution_id'])}"))
    if alert.get("job_id"):
        links.append(("Open job", f"{base}/jobs/{int(alert['job_id'])}"))
    links.append(("Alerts", f"{base}/alerts/"))
    return tuple(links)


def _slack_escape(text: str) -> str:
    """Slack's mrkdwn and plain_text treat &, < and > as markup: escape exactly those."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_message(notice: Notice) -> dict[str, Any]:
    """An incoming-webhook message with Block Kit blocks."""
    header = notice.title if len(notice.title) <= SLACK_HEADER_CHARS else notice.title[: SLACK_HEADER_CHARS - 1] + "…"
    blocks: list[dict[str, Any]] = [{"type": "header", "text": {"type": "plain_text", "text": header}}]
    fields = [{"type": "mrkdwn", "text": f"*Status*\n{_slack_escape(notice.kind)}"}]
    if notice.count > 1:
        fields.append({"type": "mrkdwn", "text": f"*Count*\n{notice.count}"})
    if notice.job:
        fields.insert(0, {"type": "mrkdwn", "text": f"*Job*\n{_slack_escape(notice.job)}"})
    blocks.append({"type": "section", "fields": fields})
    if notice.excerpt:
        code = _slack_escape(notice.excerpt).replace("```", "'''")
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"```{code}```"}})
    if notice.links:
        blocks.append(
            {
                "type": "actions",
                "elements": [
                    {"type": "button", "text": {"type": "plain_text", "text": label}, "url": url}
                    for label, url in notice.links
                ],
            }
        )
    if notice.when:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"Cronwell · {notice.when}"}]})
    return {"text": _slack_escape(notice.title), "blocks": blocks}


def teams_message(notice: Notice) -> dict[str, Any]:
    """A message with one Adaptive Card attachment."""
    facts = [{"title": "Status", "value": notice.kind}]
    if notice.count > 1:
        facts.append({"title": "Count", "value": str(notice.count)})
    if notice.job:
        facts.insert(0, {"title": "Job", "value": notice.job})
    if notice.when:
        facts.append({"title": "When", "value": notice.when})
    body: list[dict[str, Any]] = [
        {"type": "TextBlock", "text": notice.title, "weight": "Bolder", "size": "Medium", "wrap": True},
        {"type": "FactSet", "facts": facts},
    ]
    if notice.excerpt:
        body.append({"type": "TextBlock", "text": notice.excerpt, "wrap": True, "fontType": "Monospace"})
    card = {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": body,
    }
    if notice.links:
        card["actions"] = [{"type": "Action.OpenUrl", "title": label, "url": url} for label, url in notice.links]
    return {
        "type": "message",
        "attachments": [
            {"contentType": "application/vnd.microsoft.card.adaptive", "contentUrl": None, "content": card}
        ],
    }


def email_parts(notice: Notice) -> tuple[str, str, str]:
    """(subject, plain text, HTML) of the email for `notice`."""
    subject = f"[Cronwell] {notice.kind}: {' '.join(notice.excerpt.split())[:120]}"
    lines = [notice.title, ""]
    if notice.job:
        lines.append(f"Job: {notice.job}")
    lines.append(f"Status: {notice.kind}")
    if notice.count > 1:
        lines.append(f"Count: {notice.count}")
    if notice.when:
        lines.append(f"When: {notice.when}")
    if notice.excerpt:
        lines += ["", notice.excerpt]
    if notice.links:
        lines += [""] + [f"{label}: {url}" for label, url in notice.links]
    text = "\n".join(lines) + "\n"
    esc = html.escape
    rows = "".join(
        f"<tr><th align='left'>{esc(name)}</th><td>{esc(value)}</td></tr>"
        for name, value in (
            ("Job", notice.job),
            ("Status", notice.kind),
            ("Count", str(notice.count) if notice.count > 1 else None),
            ("When", notice.when),
        )
        if value
    )
    excerpt = f"<pre>{esc(notice.excerpt)}</pre>" if notice.excerpt else ""
    links = "".join(f"<a href='{esc(url)}'>{esc(label)}</a> " for label, url in notice.links)
    page = f"<html><body><h2>{esc(notice.title)}</h2><table>{rows}</table>{excerpt}<p>{links}</p></body></html>"
    return subject, text, page


def masked_url(url: str) -> str:
    """A channel URL as shown after creation: its scheme, host and last four characters. Slack and
    Teams URLs carry their credential in the path, so the rest is never shown again."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return "…"
    tail = url[-4:] if len(url) > 12 else ""
    return f"{parts.scheme}://{host}/…{tail}"
