"""operator insight: dead-man's switch, alert channels, jitter, auto-pause, backfill

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 01:00:00

- jobs gain jitter_seconds, pause_after_failures, expect_success_within_seconds,
  alert_after_failures (0 turns each off) and disabled_reason (why the system disabled it);
- alerts gain dedup_key (at most one open alert per key) and queue_id (a backlog alert's queue);
- executions may have trigger `backfill`;
- alert_channels (webhook or email of a project, routed by alert kind) and alert_deliveries (one
  row per alert per channel, sent by the engine's delivery loop with retries).

On SQLite a changed table is rebuilt (batch mode) with AUTOINCREMENT kept (migration 0008) and
its indexes put back from their stored SQL, partial ones included.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_TRIGGERS_BEFORE = "'schedule', 'catch_up', 'manual', 'retry', 'callback', 'batch'"
_TRIGGERS_AFTER = _TRIGGERS_BEFORE + ", 'backfill'"
_JOB_COLUMNS = ("jitter_seconds", "pause_after_failures", "expect_success_within_seconds", "alert_after_failures")


def _alter(table: str, change) -> None:
    """Run `change(batch)` on `table`; on SQLite keep AUTOINCREMENT and every index."""
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        with op.batch_alter_table(table) as batch:
            change(batch)
        return
    indexes = bind.execute(
        sa.text("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = :t AND sql IS NOT NULL"),
        {"t": table},
    ).fetchall()
    # The rebuild copies the rows into a new table, whose AUTOINCREMENT counter would restart at
    # the highest id copied: ids of rows deleted before (and that 0008 put out of reach) would be
    # handed out again. Keep the counter where it was.
    saved = bind.execute(sa.text("SELECT seq FROM sqlite_sequence WHERE name = :t"), {"t": table}).scalar()
    for name, _sql in indexes:
        op.drop_index(name, table_name=table)
    with op.batch_alter_table(table, recreate="always", table_kwargs={"sqlite_autoincrement": True}) as batch:
        change(batch)
    for _name, sql in indexes:
        bind.exec_driver_sql(sql)
    if saved is not None:
        current = bind.execute(sa.text("SELECT seq FROM sqlite_sequence WHERE name = :t"), {"t": table}).scalar()
        bind.execute(sa.text("DELETE FROM sqlite_sequence WHERE name = :t"), {"t": table})
        bind.execute(
            sa.text("INSERT INTO sqlite_sequence (name, seq) VALUES (:t, :seq)"),
            {"t": table, "seq": max(saved, current or 0)},
        )


def upgrade():
    # New columns first, as plain ALTER TABLE ADD COLUMN (no rebuild; batch mode cannot order
    # columns added by several revisions on SQLite), then the constraints in one rebuild each.
    for column in _JOB_COLUMNS:
        op.add_column("jobs", sa.Column(column, sa.Integer(), server_default="0", nullable=False))
    op.add_column("jobs", sa.Column("disabled_reason", sa.Text(), nullable=True))
    op.add_column("alerts", sa.Column("dedup_key", sa.String(length=200), nullable=True))
    op.add_column("alerts", sa.Column("queue_id", sa.Integer(), nullable=True))

    def jobs(batch):
        batch.create_check_constraint(
            op.f("ck_jobs_insight_nonnegative"),
            sa.text(" AND ".join(f"{column} >= 0" for column in _JOB_COLUMNS)),
        )

    def alerts(batch):
        batch.create_foreign_key(op.f("fk_alerts_queue_id_queues"), "queues", ["queue_id"], ["id"], ondelete="SET NULL")

    def executions(batch):
        batch.drop_constraint(op.f("ck_executions_trigger"), type_="check")
        batch.create_check_constraint(op.f("ck_executions_trigger"), sa.text(f"trigger IN ({_TRIGGERS_AFTER})"))

    _alter("jobs", jobs)
    _alter("alerts", alerts)
    _alter("executions", executions)
    op.create_index(
        "uq_alerts_open_dedup_key",
        "alerts",
        ["dedup_key"],
        unique=True,
        postgresql_where=sa.text("resolved_at IS NULL AND dedup_key IS NOT NULL"),
        sqlite_where=sa.text("resolved_at IS NULL AND dedup_key IS NOT NULL"),
    )
    op.create_index("ix_alerts_queue_id", "alerts", ["queue_id"])

    op.create_table(
        "alert_channels",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("target", sa.String(length=500), nullable=False),
        sa.Column("secret", sa.String(length=200), nullable=True),
        sa.Column(
            "kinds", sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"), nullable=False
        ),
        sa.Column("enabled", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("kind IN ('webhook', 'email')", name=op.f("ck_alert_channels_kind")),
        sa.CheckConstraint("length(name) > 0", name=op.f("ck_alert_channels_name_not_empty")),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_alert_channels_project_id_projects"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_channels")),
        sa.UniqueConstraint("project_id", "name", name="uq_alert_channels_project_name"),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_alert_channels_project_id"), "alert_channels", ["project_id"])
    op.create_table(
        "alert_deliveries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("channel_id", sa.Integer(), nullable=False),
        sa.Column("alert_id", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(length=40), nullable=False),
        sa.Column(
            "payload", sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"), nullable=False
        ),
        sa.Column("status", sa.String(length=12), server_default="pending", nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("response_status", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("status IN ('pending', 'delivered', 'failed')", name=op.f("ck_alert_deliveries_status")),
        sa.CheckConstraint(
            "(status = 'delivered') = (delivered_at IS NOT NULL)",
            name=op.f("ck_alert_deliveries_delivered_at_iff_delivered"),
        ),
        sa.ForeignKeyConstraint(
            ["channel_id"],
            ["alert_channels.id"],
            name=op.f("fk_alert_deliveries_channel_id_alert_channels"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["alert_id"], ["alerts.id"], name=op.f("fk_alert_deliveries_alert_id_alerts"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_deliveries")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_alert_deliveries_channel_id"), "alert_deliveries", ["channel_id"])
    op.create_index(op.f("ix_alert_deliveries_alert_id"), "alert_deliveries", ["alert_id"])
    op.create_index("uq_alert_deliveries_alert_channel", "alert_deliveries", ["alert_id", "channel_id"], unique=True)
    op.create_index(
        "ix_alert_deliveries_due",
        "alert_deliveries",
        ["next_attempt_at"],
        postgresql_where=sa.text("status = 'pending'"),
        sqlite_where=sa.text("status = 'pending'"),
    )


def downgrade():
    op.drop_table("alert_deliveries")
    op.drop_table("alert_channels")
    op.drop_index("ix_alerts_queue_id", table_name="alerts")
    op.drop_index("uq_alerts_open_dedup_key", table_name="alerts")
    op.get_bind().execute(sa.text("UPDATE executions SET trigger = 'manual' WHERE trigger = 'backfill'"))

    def executions(batch):
        batch.drop_constraint(op.f("ck_executions_trigger"), type_="check")
        batch.create_check_constraint(op.f("ck_executions_trigger"), sa.text(f"trigger IN ({_TRIGGERS_BEFORE})"))

    def alerts(batch):
        batch.drop_constraint(op.f("fk_alerts_queue_id_queues"), type_="foreignkey")

    def jobs(batch):
        batch.drop_constraint(op.f("ck_jobs_insight_nonnegative"), type_="check")

    _alter("executions", executions)
    _alter("alerts", alerts)
    _alter("jobs", jobs)
    for table, column in (("alerts", "queue_id"), ("alerts", "dedup_key"), ("jobs", "disabled_reason")) + tuple(
        ("jobs", column) for column in _JOB_COLUMNS
    ):
        if op.get_bind().dialect.name == "sqlite":
            op.get_bind().exec_driver_sql(f"ALTER TABLE {table} DROP COLUMN {column}")  # SQLite 3.35+, no rebuild
        else:
            op.drop_column(table, column)
