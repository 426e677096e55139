"""Alert delivery: signed webhooks and email, from rows, with retries.

Delivery is an outbox. `fan_out` turns every recent alert into one `alert_deliveries` row per
channel whose project, kinds and notification route send it there (dead letters raised by
workers included: the pass reads the alerts table, so no code path has to remember to deliver);
the notice pass (notices.py) queues the deliveries of failures, recoveries and successes, grouped. `send_due` sends
the pending rows whose time has come and records each try: delivered, or retried after
ALERT_DELIVERY_BACKOFF_SECONDS x 2^(attempt-1), or failed for good after
ALERT_DELIVERY_MAX_ATTEMPTS. A row is taken by moving its next_attempt_at past the send's timeout
in a short transaction (SKIP LOCKED on PostgreSQL), and no transaction is open while the request
runs, so a slow receiver never holds a lock and a crash mid-send only retries it. The loop
(`DeliveryLoop`) runs in its own thread of the scheduler process (or `flask alerts deliver`), so
delivery never blocks a tick or a worker turn, and survives restarts: what is pending is in the table.

Webhook: POST of the JSON payload with `X-Cronwell-Timestamp` (Unix seconds) and
`X-Cronwell-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>" keyed by the channel's
secret>`; any 2xx answer is delivered. Slack and Teams: POST of the message shaped from the payload
(app/domain/channel_messages.py) to the channel's incoming-webhook URL. Email: one message with a
text and an HTML part through SMTP_HOST:SMTP_PORT.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import smtplib
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.message import EmailMessage
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import Row, and_, func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine

from app.clock import iso_z, utcnow
from app.database import write_transaction
from app.domain import channel_messages, notify_routing
from app.models import Alert, AlertChannel, AlertDelivery, Job, Queue
from app.models.alerting import ENV_PREFIX, unreadable_reason
from app.sensitive import is_own_secret
from app.services.engine import routing, wakeups

log = logging.getLogger("cronwell.deliveries")

channels_t, deliveries_t, alerts_t = AlertChannel.__table__, AlertDelivery.__table__, Alert.__table__
FAN_OUT_WINDOW = timedelta(hours=24)
BATCH = 50


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The X-Cronwell-Signature value: `sha256=` + hex HMAC-SHA256 of `<timestamp>.<body>`."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def alert_payload(alert: Row[Any], *, project_id: int | None, job_name: str | None = None) -> dict[str, Any]:
    """The JSON document a channel receives for an alert (a webhook as it is; Slack, Teams and
    email as the message app/domain/channel_messages.py shapes from it)."""
    return {
        "type": "alert",
        "alert": {
            "id": alert.id,
            "kind": alert.kind,
            "message": alert.message,
            "job_id": alert.job_id,
            "job_name": job_name,
            "execution_id": alert.execution_id,
            "queue_id": alert.queue_id,
            "project_id": project_id,
            "created_at": iso_z(alert.created_at),
        },
    }


def retry_delay(backoff_seconds: int, attempt: int) -> timedelta:
    """Delay before try `attempt + 1`: backoff x 2^(attempt-1), capped at an hour."""
    return timedelta(seconds=min(3600, backoff_seconds * 2 ** max(0, attempt - 1)))


# --- fan-out --------------------------------------------------------------------------------


def fan_out(conn: Connection, *, now: datetime) -> int:
    """Create the missing delivery rows for recent alerts; returns how many were created."""
    return insert_deliveries(conn, missing_deliveries(conn, now=now))


def missing_deliveries(conn: Connection, *, now: datetime) -> list[dict[str, Any]]:
    """The delivery rows recent alerts still need (a read: the loop writes only when there are some).

    Dead letters and overdue jobs follow their job's notification route (notify_routing); the
    other kinds go to every channel of the alert's project. A channel limited to some kinds
    receives only those, and a message due in a channel's quiet window waits for its end."""
    channels = conn.execute(select(channels_t).where(channels_t.c.enabled)).fetchall()
    if not channels:
        return []
    queues_t, jobs_t = Queue.__table__, Job.__table__
    job_queue = queues_t.alias("job_queue")
    alert_queue = queues_t.alias("alert_queue")
    oldest = min(c.created_at for c in channels)
    alerts = conn.execute(
        select(
            alerts_t,
            jobs_t.c.name.label("job_name"),
            job_queue.c.project_id.label("job_project"),
            alert_queue.c.project_id.label("queue_project"),
        )
        .select_from(
            alerts_t.outerjoin(jobs_t, jobs_t.c.id == alerts_t.c.job_id)
            .outerjoin(job_queue, job_queue.c.id == jobs_t.c.queue_id)
            .outerjoin(alert_queue, alert_queue.c.id == alerts_t.c.queue_id)
        )
        .where(alerts_t.c.created_at >= max(oldest, now - FAN_OUT_WINDOW))
        .order_by(alerts_t.c.id)
        .limit(1000)
    ).fetchall()
    if not alerts:
        return []
    done = set(
        conn.execute(
            select(deliveries_t.c.alert_id, deliveries_t.c.channel_id).where(
                deliveries_t.c.alert_id.in_([a.id for a in alerts])
            )
        ).all()
    )
    tables = routing.load(conn)
    rows = []
    for alert in alerts:
        project_id = getattr(alert, "project_id", None) or alert.job_project or alert.queue_project
        routed = None
        if alert.kind in notify_routing.ROUTED_ALERT_KINDS and alert.job_id is not None:
            route = tables.route_for(alert.job_id, project_id)
            routed = {c.id for c in notify_routing.routed_channels(route, alert.kind, tables.channels[project_id])}
        for channel in channels:
            if (alert.id, channel.id) in done or alert.created_at < channel.created_at:
                continue
            if project_id is not None and channel.project_id != project_id:
                continue  # routing per project; alerts of no project (a lost worker) go to every project
            if channel.kinds and alert.kind not in channel.kinds:
                continue
            if routed is not None and channel.id not in routed:
                continue
            rules = routing.channel_rules(channel)
            rows.append(
                dict(
                    channel_id=channel.id,
                    alert_id=alert.id,
                    kind=alert.kind,
                    payload=alert_payload(alert, project_id=project_id, job_name=alert.job_name),
                    status="pending",
                    attempts=0,
                    next_attempt_at=notify_routing.quiet_until(
                        now, rules.quiet_start, rules.quiet_end, rules.quiet_timezone
                    )
                    or now,
                    created_at=now,
                    updated_at=now,
                )
            )
    return rows


def _earliest_pending(conn: Connection) -> datetime | None:
    """When the next pending delivery is due (a retry's back-off, a quiet window's end)."""
    found = conn.execute(select(func.min(deliveries_t.c.next_attempt_at)).where(deliveries_t.c.status == "pending"))
    return found.scalar()


def insert_deliveries(conn: Connection, rows: list[dict[str, Any]]) -> int:
    """Insert delivery rows, skipping any another loop inserted first; returns how many went in."""
    if not rows:
        return 0
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    # ON CONFLICT: another scheduler's loop may fan out the same alert at the same moment.
    result = conn.execute(
        insert(deliveries_t)
        .on_conflict_do_nothing(index_elements=["alert_id", "channel_id"])
        .returning(deliveries_t.c.id),
        rows,
    )
    return len(result.fetchall())


# --- sending --------------------------------------------------------------------------------


@dataclass
class Outcome:
    ok: bool
    status: int | None = None
    error: str | None = None


def send_webhook(url: str, secret: str | None, payload: dict[str, Any], *, now: datetime, timeout: float) -> Outcome:
    """POST the alert document, signed with the channel's secret (HMAC-SHA256 over timestamp.body)."""
    body = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    timestamp = str(int(now.timestamp()))
    headers = {"X-Cronwell-Timestamp": timestamp}
    if secret:
        headers["X-Cronwell-Signature"] = sign(secret, timestamp, body)
    return _post(url, body, headers, timeout=timeout)


def post_json(url: str, document: dict[str, Any], *, timeout: float) -> Outcome:
    """POST `document` as JSON (a Slack or Teams incoming webhook); any 2xx answer is delivered."""
    return _post(url, json.dumps(document, separators=(",", ":")).encode(), {}, timeout=timeout)


def _post(url: str, body: bytes, headers: dict[str, str], *, timeout: float) -> Outcome:
    headers = {"Content-Type": "application/json", "User-Agent": "Cronwell-Alerts", **headers}
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - http(s) checked on save
            return Outcome(200 <= response.status < 300, response.status)
    except urllib.error.HTTPError as exc:
        return Outcome(False, exc.code, f"HTTP {exc.code}")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        # The reason only: the URL is the channel's secret and never goes into the delivery log.
        return Outcome(False, None, str(getattr(exc, "reason", exc))[:500])


def send_email(address: str, payload: dict[str, Any], *, settings: dict[str, Any], timeout: float) -> Outcome:
    """One message with a plain-text and an HTML part through SMTP_HOST:SMTP_PORT."""
    subject, text, page = channel_messages.email_parts(
        channel_messages.notice_from_payload(payload, settings.get("BASE_URL"))
    )
    message = EmailMessage()
    message["From"] = settings.get("SMTP_FROM", "cronwell@localhost")
    message["To"] = address
    message["Subject"] = subject
    message.set_content(text)
    message.add_alternative(page, subtype="html")
    try:
        with smtplib.SMTP(
            settings.get("SMTP_HOST", "localhost"), settings.get("SMTP_PORT", 25), timeout=timeout
        ) as smtp:
            smtp.send_message(message)
        return Outcome(True, 250)
    except (smtplib.SMTPException, OSError) as exc:
        return Outcome(False, None, str(exc)[:500])


def resolve_target(
    target: str, environ: Mapping[str, str] | None = None, *, channel: str
) -> tuple[str | None, str | None]:
    """A channel's URL: as stored, or for `env:NAME` the value of NAME in this process's
    environment (never one of Cronwell's own credentials). Returns (url, None) or (None, why);
    `channel` is the channel's name, for the reason."""
    if not target.startswith(ENV_PREFIX):
        return target, None
    name = target[len(ENV_PREFIX) :]
    if is_own_secret(name):
        return None, f"refused: {name} holds Cronwell's own credentials"
    value = (os.environ if environ is None else environ).get(name, "").strip()
    if not value:
        return None, f"environment variable {name} is not set"
    try:
        scheme = urlsplit(value).scheme
    except ValueError:
        # An unclosed or bad [host]. Saved URLs were checked; a variable is read only here. The
        # exception's text may quote the host, and the URL is the channel's secret: not said.
        return None, f"channel {channel!r}: environment variable {name} holds an invalid URL"
    if scheme not in ("http", "https"):
        return None, f"environment variable {name} does not hold an http:// or https:// URL"
    return value, None


def send_one(
    kind: str,
    target: str,
    secret: str | None,
    payload: dict[str, Any],
    *,
    now: datetime,
    settings: dict[str, Any],
    channel: str,
) -> Outcome:
    """Send one delivery's payload to a channel of `kind` (named `channel`), in that kind's shape."""
    timeout = float(settings.get("ALERT_DELIVERY_TIMEOUT_SECONDS", 10))
    if kind != "email":
        url, refused = resolve_target(target, channel=channel)
        if url is None:
            return Outcome(False, None, refused)
        target = url
    if kind == "webhook":
        return send_webhook(target, secret, payload, now=now, timeout=timeout)
    if kind == "email":
        return send_email(target, payload, settings=settings, timeout=timeout)
    notice = channel_messages.notice_from_payload(payload, settings.get("BASE_URL"))
    shape = channel_messages.slack_message if kind == "slack" else channel_messages.teams_message
    return post_json(target, shape(notice), timeout=timeout)


def _take_due(
    engine: Engine, now: datetime, limit: int, timeout: float, *, delivery_id: int | None = None
) -> list[Any]:
    """Take up to `limit` due rows (or the one `delivery_id`): each one's next_attempt_at moves
    past the send's timeout, so another loop leaves it alone while this one sends (and retries it
    if this one dies)."""
    with write_transaction(engine) as conn:
        query = (
            select(deliveries_t.c.id)
            .where(deliveries_t.c.status == "pending", deliveries_t.c.next_attempt_at <= now)
            .order_by(deliveries_t.c.next_attempt_at, deliveries_t.c.id)
            .limit(limit)
        )
        if delivery_id is not None:
            query = query.where(deliveries_t.c.id == delivery_id)
        if conn.dialect.name == "postgresql":
            query = query.with_for_update(skip_locked=True)
        ids = list(conn.execute(query).scalars())
        if not ids:
            return []
        # Taken: a notice that comes now starts the next message of its group (notices.py).
        conn.execute(
            update(deliveries_t)
            .where(deliveries_t.c.id.in_(ids))
            .values(next_attempt_at=now + timedelta(seconds=timeout * 2 + 5), group_open=False)
        )
        return list(
            conn.execute(
                select(
                    deliveries_t,
                    channels_t.c.kind.label("channel_kind"),
                    channels_t.c.name.label("channel_name"),
                    channels_t.c.target,
                    channels_t.c.secret,
                )
                .join(channels_t, channels_t.c.id == deliveries_t.c.channel_id)
                .where(deliveries_t.c.id.in_(ids))
                .order_by(deliveries_t.c.id)
            ).fetchall()
        )


def send_due(engine: Engine, *, now: datetime, settings: dict[str, Any], limit: int = BATCH) -> dict[str, int]:
    """Send the due pending deliveries; returns counts of delivered, retrying and failed."""
    timeout = float(settings.get("ALERT_DELIVERY_TIMEOUT_SECONDS", 10))
    counts = {"delivered": 0, "retrying": 0, "failed": 0}
    for row in _take_due(engine, now, limit, timeout):
        counts[_try_once(engine, row, now=now, settings=settings)] += 1
    return counts


def send_now(engine: Engine, delivery_id: int, *, now: datetime, settings: dict[str, Any]) -> str | None:
    """Send one pending delivery at once (a channel's "send test"), recorded like any try;
    returns delivered / retrying / failed, or None if it was not pending or another loop has it."""
    timeout = float(settings.get("ALERT_DELIVERY_TIMEOUT_SECONDS", 10))
    rows = _take_due(engine, now, 1, timeout, delivery_id=delivery_id)
    return _try_once(engine, rows[0], now=now, settings=settings) if rows else None


def _try_once(engine: Engine, row: Any, *, now: datetime, settings: dict[str, Any]) -> str:
    """Send a taken row and record the try: delivered, retrying (after backoff) or failed."""
    max_attempts = int(settings.get("ALERT_DELIVERY_MAX_ATTEMPTS", 8))
    backoff = int(settings.get("ALERT_DELIVERY_BACKOFF_SECONDS", 10))
    # A URL or secret no listed key opens fails the delivery at once, with why and what to do:
    # retrying with the same keys cannot succeed, and sending a marker would be sending nonsense.
    unreadable = unreadable_reason(row.channel_kind, row.target, row.secret)
    if unreadable:
        outcome = Outcome(False, None, f"not sent: {unreadable}")
    else:
        outcome = send_one(
            row.channel_kind, row.target, row.secret, row.payload, now=now, settings=settings, channel=row.channel_name
        )
    attempts = row.attempts + 1
    values = {"attempts": attempts, "response_status": outcome.status, "updated_at": now}
    if outcome.ok:
        values.update(status="delivered", delivered_at=now, last_error=None)
        result = "delivered"
    elif attempts >= max_attempts or unreadable:
        values.update(status="failed", last_error=outcome.error)
        result = "failed"
        log.error(
            "alert delivery failed for good",
            extra={"event": "alert_delivery_failed", "delivery_id": row.id, "error": outcome.error},
        )
    else:
        values.update(last_error=outcome.error, next_attempt_at=now + retry_delay(backoff, attempts))
        result = "retrying"
    with write_transaction(engine) as conn:
        conn.execute(
            update(deliveries_t)
            .where(and_(deliveries_t.c.id == row.id, deliveries_t.c.status == "pending"))
            .values(**values)
        )
    return result


# --- the loop -------------------------------------------------------------------------------


class DeliveryLoop:
    """fan_out + send_due, once (`run_once(now)`, what tests call) or until told to stop.

    Between passes it sleeps until the earliest pending delivery's next attempt or a NOTIFY on
    `cronwell_alerts` (an alert opened, a notice or a test message queued), at most
    LISTENING_POLL_SECONDS as a safety net; without LISTEN (SQLite, LISTEN_NOTIFY=0) it looks
    every `interval` seconds."""

    LISTENING_POLL_SECONDS = 30.0

    def __init__(self, engine: Engine, settings: dict[str, Any], *, clock: Callable[[], datetime] = utcnow) -> None:
        self.engine = engine
        self.settings = settings
        self.clock = clock
        self.next_attempt_at: datetime | None = None  # the earliest pending one, as the last pass saw it

    def run_once(self, now: datetime | None = None) -> dict[str, int]:
        now = now or self.clock()
        # Look first with a plain read, so an installation without channels (or with nothing
        # due) never takes the write lock for this (SQLite has one for the whole database).
        with self.engine.connect() as conn:
            has_channels = conn.execute(select(channels_t.c.id).where(channels_t.c.enabled).limit(1)).first()
            self.next_attempt_at = _earliest_pending(conn)
        has_due = self.next_attempt_at is not None and self.next_attempt_at <= now
        created = 0
        if has_channels:
            with self.engine.connect() as conn:
                rows = missing_deliveries(conn, now=now)
            if rows:
                with write_transaction(self.engine) as conn:
                    created = insert_deliveries(conn, rows)
        if not (has_due or created):
            return {"queued": 0, "delivered": 0, "retrying": 0, "failed": 0}
        counts = send_due(self.engine, now=now, settings=self.settings)
        with self.engine.connect() as conn:
            self.next_attempt_at = _earliest_pending(conn)
        return {"queued": created, **counts}

    def run_forever(self, should_stop: Callable[[], bool], *, interval: float = 1.0) -> None:
        listener = wakeups.Listener.open(self.engine, [wakeups.ALERTS_CHANNEL])
        try:
            while not should_stop():
                try:
                    self.run_once()
                except Exception as exc:  # noqa: BLE001 - the database may be away; try again later
                    log.warning(
                        "alert delivery pass failed", extra={"event": "delivery_pass_failed", "error": str(exc)[:300]}
                    )
                if not listener.active:  # LISTEN again after a lost connection (or poll, without it)
                    listener = wakeups.Listener.open(self.engine, [wakeups.ALERTS_CHANNEL])
                cap = self.LISTENING_POLL_SECONDS if listener.active else interval
                wait = cap
                if self.next_attempt_at is not None:
                    wait = max(0.1, min(cap, (self.next_attempt_at - self.clock()).total_seconds()))
                listener.wait(wait, should_stop)
        finally:
            listener.close()

    def start_thread(self, should_stop: Callable[[], bool]) -> threading.Thread:
        """Run the loop in a daemon thread (the scheduler process does this)."""
        thread = threading.Thread(target=self.run_forever, args=(should_stop,), name="alert-deliveries", daemon=True)
        thread.start()
        return thread
