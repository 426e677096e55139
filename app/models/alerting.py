"""Alert channels (where alerts go) and deliveries (one row per alert per channel).

A delivery is a row before it is a request: the engine's delivery loop
(app/services/engine/deliveries.py) sends pending rows, records each try and schedules the next
with backoff, so delivery never blocks the scheduler or a worker and nothing is lost on restart.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, CheckConstraint, ForeignKey, Index, Integer, String, Text, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.clock import utcnow
from app.domain.channel_messages import masked_url
from app.extensions import Model
from app.models.types import JSONType, SealedText, UTCDateTime
from app.secret_box import UNREADABLE_HINT, is_unreadable

CHANNEL_KINDS = ("webhook", "slack", "teams", "email")
# Kinds whose target is a URL, and so a secret (a Slack or Teams URL is its own credential).
URL_CHANNEL_KINDS = ("webhook", "slack", "teams")
DELIVERY_STATUSES = ("pending", "delivered", "failed")
# The alert kinds a channel may be routed (dead letters from workers; the rest from the alert pass).
ALERT_KINDS = ("dead_letter", "overdue", "consecutive_failures", "auto_paused", "queue_backlog", "worker_lost")
# What a channel may be limited to: the alert kinds and the notices of finished runs.
RECEIVABLE_KINDS = (*ALERT_KINDS, "failure", "recovery", "success")
# A URL target written `env:NAME` is read from the delivering process's environment at each send:
# the database never holds it.
ENV_PREFIX = "env:"
# One message per job and event per this many seconds on a channel, unless a channel says otherwise.
DEFAULT_GROUP_SECONDS = 600


def unreadable_reason(kind: str, target: str | None, secret: str | None) -> str | None:
    """Why a channel's stored target or signing secret cannot be used (no listed key opens it),
    and what to do; None when both read. The pages, the API, the CLI and the delivery log say this."""
    names = [
        name
        for name, value in (("address" if kind == "email" else "URL", target), ("signing secret", secret))
        if is_unreadable(value)
    ]
    if not names:
        return None
    hint = UNREADABLE_HINT.format(it="them" if len(names) > 1 else "it")
    return f"the {' and the '.join(names)} cannot be decrypted: {hint}"


class AlertChannel(Model):
    """Where some of one project's alert kinds (empty: all) go: a signed webhook, a Slack or Teams
    incoming webhook (their URLs are secrets), or an email address."""

    __tablename__ = "alert_channels"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    kind: Mapped[str] = mapped_column(String(10))
    # The webhook, Slack or Teams URL (shown masked after creation) or `env:NAME` (the URL is the
    # variable NAME of the delivering process), or the email address; sealed at rest with
    # CHANNEL_SECRET_KEY (app/secret_box.py), its length checked as plaintext by the use case.
    target: Mapped[str] = mapped_column(SealedText)
    # The webhook's signing key (HMAC-SHA256); never shown again after creation; sealed at rest.
    secret: Mapped[str | None] = mapped_column(SealedText)
    # Routing: the alert kinds this channel receives; an empty list means every kind.
    kinds: Mapped[list] = mapped_column(JSONType, default=list)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True, server_default=text("true"))
    # Grouping: notices of one job and event within this many seconds become one message that
    # counts them (0: a message each).
    group_seconds: Mapped[int] = mapped_column(
        Integer, default=DEFAULT_GROUP_SECONDS, server_default=str(DEFAULT_GROUP_SECONDS)
    )
    # The quiet window ("22:00" to "07:00" in quiet_timezone, default UTC): messages due inside
    # it are held until it ends, then sent (grouped).
    quiet_start: Mapped[str | None] = mapped_column(String(5))
    quiet_end: Mapped[str | None] = mapped_column(String(5))
    quiet_timezone: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    project = relationship("Project")

    __table_args__ = (
        CheckConstraint("kind IN ('webhook', 'email', 'slack', 'teams')", name="kind"),
        CheckConstraint("length(name) > 0", name="name_not_empty"),
        UniqueConstraint("project_id", "name", name="uq_alert_channels_project_name"),
        CheckConstraint("group_seconds >= 0", name="group_seconds_not_negative"),
        CheckConstraint("(quiet_start IS NULL) = (quiet_end IS NULL)", name="quiet_pair"),
        {"sqlite_autoincrement": True},
    )

    @property
    def shown_target(self) -> str:
        """The target as pages and lists show it: a URL masked (it is a credential), an email
        address as it is."""
        if is_unreadable(self.target) or self.kind not in URL_CHANNEL_KINDS or self.target.startswith(ENV_PREFIX):
            return self.target  # "(unreadable)", an address, or the name of a variable (not the secret itself)
        return masked_url(self.target)

    @property
    def unreadable(self) -> str | None:
        """Why the stored target or signing secret cannot be used, and what to do (None: both read)."""
        return unreadable_reason(self.kind, self.target, self.secret)

    def receives(self, alert_kind: str) -> bool:
        """Whether this channel's routing takes alerts of `alert_kind` (tests always go through)."""
        return self.enabled and (alert_kind == "test" or not self.kinds or alert_kind in self.kinds)


class AlertDelivery(Model):
    """One alert (or a test message) to one channel: pending until sent, or failed for good."""

    __tablename__ = "alert_deliveries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    channel_id: Mapped[int] = mapped_column(ForeignKey("alert_channels.id", ondelete="CASCADE"), index=True)
    alert_id: Mapped[int | None] = mapped_column(ForeignKey("alerts.id", ondelete="SET NULL"), index=True)
    # A notice's delivery: the newest notice it carries ("job:3:failure" groups them).
    notice_id: Mapped[int | None] = mapped_column(ForeignKey("notices.id", ondelete="SET NULL"), index=True)
    group_key: Mapped[str | None] = mapped_column(String(200))
    # How many notices this one message tells of.
    grouped: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    # Whether later notices of its group may still join it: true until the delivery loop takes it.
    group_open: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))
    # The alert's kind, or "test" for a channel's send-test message.
    kind: Mapped[str] = mapped_column(String(40))
    # The JSON document sent (fixed when the delivery is created, so a retry sends the same body).
    payload: Mapped[dict] = mapped_column(JSONType, default=dict)
    status: Mapped[str] = mapped_column(String(12), default="pending", server_default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime)
    last_error: Mapped[str | None] = mapped_column(Text)
    response_status: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    channel = relationship("AlertChannel")

    __table_args__ = (
        CheckConstraint("status IN ('pending', 'delivered', 'failed')", name="status"),
        CheckConstraint("(status = 'delivered') = (delivered_at IS NOT NULL)", name="delivered_at_iff_delivered"),
        # The delivery loop reads only what is still pending, in due order.
        Index(
            "ix_alert_deliveries_due",
            "next_attempt_at",
            postgresql_where=text("status = 'pending'"),
            sqlite_where=text("status = 'pending'"),
        ),
        # The notice pass finds a channel's newest delivery of a group.
        Index(
            "ix_alert_deliveries_group",
            "channel_id",
            "group_key",
            "id",
            postgresql_where=text("group_key IS NOT NULL"),
            sqlite_where=text("group_key IS NOT NULL"),
        ),
        # One delivery per alert per channel, even with several schedulers fanning out at once.
        Index("uq_alert_deliveries_alert_channel", "alert_id", "channel_id", unique=True),
        {"sqlite_autoincrement": True},
    )
