"""notification routing: per-project defaults, per-job overrides, notices, grouping, quiet windows

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-06 01:00:00

- `notification_routes`: a project's default (job_id NULL) or a job's override: the events
  notified (failure, dead_letter, overdue, recovery, success) and the channels they go to.
- `notices`: finished runs worth telling about (failure, recovery, success), once each.
- `job_notify_state`: which jobs are failing (their next success is a recovery).
- `notice_cursors`: how far the notice pass has read finished runs.
- `alert_channels`: group_seconds (default 600) and a quiet window (start, end, time zone).
- `alert_deliveries`: the notice a delivery carries, its group and how many it tells of.

Downgrading drops all of it; deliveries of notices are deleted first (the old schema cannot say
what they were).
"""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def _json():
    return sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


@contextmanager
def _rebuilding(table: str) -> Iterator[Any]:
    """`batch_alter_table` for a change SQLite can only make by copying the table (a column's NOT
    NULL): the copy keeps the table's AUTOINCREMENT (an id is never handed out twice) and its counter, which a plain batch copy would drop and restart at the highest id."""
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        with op.batch_alter_table(table) as batch:
            yield batch
        return
    saved = bind.execute(sa.text("SELECT seq FROM sqlite_sequence WHERE name = :t"), {"t": table}).scalar()
    with op.batch_alter_table(table, recreate="always", table_kwargs={"sqlite_autoincrement": True}) as batch:
        yield batch
    if saved is not None:
        bind.execute(sa.text("UPDATE sqlite_sequence SET seq = max(seq, :seq) WHERE name = :t"), {"seq": saved, "t": table})
        bind.execute(
            sa.text("INSERT INTO sqlite_sequence (name, seq) SELECT :t, :seq WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = :t)"),
            {"seq": saved, "t": table},
        )


def upgrade():
    op.create_table(
        "notification_routes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("events", _json(), nullable=False),
        sa.Column("channel_ids", _json(), nullable=True),
        sa.Column("updated_by", sa.String(length=200), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_notification_routes_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_notification_routes_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_notification_routes")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_notification_routes_project_id"), "notification_routes", ["project_id"])
    op.create_index(
        "uq_notification_routes_project_default",
        "notification_routes",
        ["project_id"],
        unique=True,
        postgresql_where=sa.text("job_id IS NULL"),
        sqlite_where=sa.text("job_id IS NULL"),
    )
    op.create_index(
        "uq_notification_routes_job",
        "notification_routes",
        ["job_id"],
        unique=True,
        postgresql_where=sa.text("job_id IS NOT NULL"),
        sqlite_where=sa.text("job_id IS NOT NULL"),
    )
    op.create_table(
        "notices",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=True),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("execution_id", sa.Integer(), nullable=True),
        sa.Column("event", sa.String(length=20), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("dedup_key", sa.String(length=200), nullable=False),
        sa.Column("details", _json(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("event IN ('failure', 'recovery', 'success')", name=op.f("ck_notices_event")),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_notices_project_id_projects"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_notices_job_id_jobs"), ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_notices")),
        sa.UniqueConstraint("dedup_key", name=op.f("uq_notices_dedup_key")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_notices_project_id"), "notices", ["project_id"])
    op.create_index(op.f("ix_notices_job_id"), "notices", ["job_id"])
    op.create_index(op.f("ix_notices_created_at"), "notices", ["created_at"])
    op.create_table(
        "job_notify_state",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("failing_since", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_notify_state_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_job_notify_state")),
    )
    op.create_table(
        "notice_cursors",
        sa.Column("name", sa.String(length=40), nullable=False),
        sa.Column("scanned_until", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_notice_cursors")),
    )
    with _rebuilding("alert_channels") as batch:
        batch.add_column(sa.Column("group_seconds", sa.Integer(), server_default="600", nullable=False))
        batch.add_column(sa.Column("quiet_start", sa.String(length=5), nullable=True))
        batch.add_column(sa.Column("quiet_end", sa.String(length=5), nullable=True))
        batch.add_column(sa.Column("quiet_timezone", sa.String(length=64), nullable=True))
        batch.create_check_constraint(op.f("ck_alert_channels_group_seconds_not_negative"), sa.text("group_seconds >= 0"))
        batch.create_check_constraint(
            op.f("ck_alert_channels_quiet_pair"), sa.text("(quiet_start IS NULL) = (quiet_end IS NULL)")
        )
    with _rebuilding("alert_deliveries") as batch:
        batch.add_column(sa.Column("notice_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("group_key", sa.String(length=200), nullable=True))
        batch.add_column(sa.Column("grouped", sa.Integer(), server_default="1", nullable=False))
        batch.add_column(sa.Column("group_open", sa.Boolean(), server_default=sa.text("false"), nullable=False))
        batch.create_foreign_key(
            op.f("fk_alert_deliveries_notice_id_notices"), "notices", ["notice_id"], ["id"], ondelete="SET NULL"
        )
        batch.create_index(op.f("ix_alert_deliveries_notice_id"), ["notice_id"])
        batch.create_index(
            "ix_alert_deliveries_group",
            ["channel_id", "group_key", "id"],
            postgresql_where=sa.text("group_key IS NOT NULL"),
            sqlite_where=sa.text("group_key IS NOT NULL"),
        )


def downgrade():
    op.get_bind().execute(sa.text("DELETE FROM alert_deliveries WHERE notice_id IS NOT NULL OR group_key IS NOT NULL"))
    with _rebuilding("alert_deliveries") as batch:
        batch.drop_index("ix_alert_deliveries_group")
        batch.drop_index(op.f("ix_alert_deliveries_notice_id"))
        batch.drop_constraint(op.f("fk_alert_deliveries_notice_id_notices"), type_="foreignkey")
        batch.drop_column("group_open")
        batch.drop_column("grouped")
        batch.drop_column("group_key")
        batch.drop_column("notice_id")
    with _rebuilding("alert_channels") as batch:
        batch.drop_constraint(op.f("ck_alert_channels_quiet_pair"), type_="check")
        batch.drop_constraint(op.f("ck_alert_channels_group_seconds_not_negative"), type_="check")
        batch.drop_column("quiet_timezone")
        batch.drop_column("quiet_end")
        batch.drop_column("quiet_start")
        batch.drop_column("group_seconds")
    op.drop_table("notice_cursors")
    op.drop_table("job_notify_state")
    op.drop_index(op.f("ix_notices_created_at"), table_name="notices")
    op.drop_index(op.f("ix_notices_job_id"), table_name="notices")
    op.drop_index(op.f("ix_notices_project_id"), table_name="notices")
    op.drop_table("notices")
    op.drop_index("uq_notification_routes_job", table_name="notification_routes")
    op.drop_index("uq_notification_routes_project_default", table_name="notification_routes")
    op.drop_index(op.f("ix_notification_routes_project_id"), table_name="notification_routes")
    op.drop_table("notification_routes")
