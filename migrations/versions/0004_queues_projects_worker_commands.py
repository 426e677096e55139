"""queues and projects as rows; worker commands; slots and cancel requests on executions

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 22:50:00

A queue was a free string copied onto jobs and executions. Now:
- `projects` (one `default` row) and `queues` (unique name within a project, optional
  concurrency limit, pause with who/when/why, default priority, a slot counter for the limit);
- every distinct queue string found on jobs or executions becomes a queue row of the default
  project (plus `default`), and jobs.queue / executions.queue become queue_id foreign keys;
- executions gain `holds_slot` (started under a limit) and `cancel_requested_at/by` (an operator
  asked to stop a running task); attempts may end `cancelled`;
- `worker_commands`: drain or stop orders for one worker, kept until acted on.
"""

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_ATTEMPT_STATUSES_OLD = "status IN ('running', 'succeeded', 'failed', 'timed_out', 'abandoned')"
_ATTEMPT_STATUSES_NEW = "status IN ('running', 'succeeded', 'failed', 'timed_out', 'abandoned', 'cancelled')"


def upgrade():
    now = datetime.now(UTC)  # noqa: TID251 - a migration stamps the rows it creates
    op.create_table(
        "projects",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("description", sa.Text(), server_default="", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_projects")),
        sa.UniqueConstraint("name", name=op.f("uq_projects_name")),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "queues",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("description", sa.Text(), server_default="", nullable=False),
        sa.Column("concurrency_limit", sa.Integer(), nullable=True),
        sa.Column("priority", sa.Integer(), server_default="0", nullable=False),
        sa.Column("paused", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("paused_by", sa.String(length=200), nullable=True),
        sa.Column("paused_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("paused_reason", sa.Text(), nullable=True),
        sa.Column("slots_taken", sa.Integer(), server_default="0", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "concurrency_limit IS NULL OR concurrency_limit >= 1", name=op.f("ck_queues_concurrency_limit_positive")
        ),
        sa.CheckConstraint("slots_taken >= 0", name=op.f("ck_queues_slots_taken_nonnegative")),
        sa.CheckConstraint("priority BETWEEN -1000 AND 1000", name=op.f("ck_queues_priority_range")),
        sa.CheckConstraint("(paused) = (paused_at IS NOT NULL)", name=op.f("ck_queues_paused_at_iff_paused")),
        sa.CheckConstraint("length(name) > 0", name=op.f("ck_queues_name_not_empty")),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_queues_project_id_projects"), ondelete="RESTRICT"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_queues")),
        sa.UniqueConstraint("project_id", "name", name="uq_queues_project_name"),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "worker_commands",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.String(length=200), nullable=False),
        sa.Column("command", sa.String(length=16), nullable=False),
        sa.Column("issued_by", sa.String(length=200), nullable=False),
        sa.Column("issued_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("acted_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("command IN ('drain', 'stop')", name=op.f("ck_worker_commands_command")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_worker_commands")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_worker_commands_worker_id"), "worker_commands", ["worker_id"], unique=False)

    # Data: the default project, and a queue row for every queue name in use.
    bind = op.get_bind()
    bind.execute(
        sa.text("INSERT INTO projects (name, description, created_at) VALUES ('default', '', :now)"), {"now": now}
    )
    names = {"default"}
    names |= {row[0] for row in bind.execute(sa.text("SELECT DISTINCT queue FROM jobs"))}
    names |= {row[0] for row in bind.execute(sa.text("SELECT DISTINCT queue FROM executions"))}
    for name in sorted(names):
        bind.execute(
            sa.text(
                "INSERT INTO queues (project_id, name, description, priority, paused, slots_taken, created_at, updated_at)"
                " SELECT id, :name, '', 0, false, 0, :now, :now FROM projects WHERE name = 'default'"
            ),
            {"name": name, "now": now},
        )

    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("queue_id", sa.Integer(), nullable=True))
    bind.execute(sa.text("UPDATE jobs SET queue_id = (SELECT q.id FROM queues AS q WHERE q.name = jobs.queue)"))
    with op.batch_alter_table("jobs") as batch:
        batch.alter_column("queue_id", existing_type=sa.Integer(), nullable=False)
        batch.create_foreign_key(op.f("fk_jobs_queue_id_queues"), "queues", ["queue_id"], ["id"], ondelete="RESTRICT")
        batch.create_index(op.f("ix_jobs_queue_id"), ["queue_id"], unique=False)
        batch.drop_column("queue")

    with op.batch_alter_table("executions") as batch:
        batch.add_column(sa.Column("queue_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("holds_slot", sa.Boolean(), server_default=sa.text("false"), nullable=False))
        batch.add_column(sa.Column("cancel_requested_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("cancel_requested_by", sa.String(length=200), nullable=True))
    bind.execute(
        sa.text("UPDATE executions SET queue_id = (SELECT q.id FROM queues AS q WHERE q.name = executions.queue)")
    )
    with op.batch_alter_table("executions") as batch:
        batch.create_foreign_key(
            op.f("fk_executions_queue_id_queues"), "queues", ["queue_id"], ["id"], ondelete="SET NULL"
        )
        batch.drop_column("queue")
    op.create_index(
        "ix_executions_queue_running",
        "executions",
        ["queue_id"],
        postgresql_where=sa.text("status = 'running'"),
        sqlite_where=sa.text("status = 'running'"),
    )

    with op.batch_alter_table("attempts") as batch:
        batch.drop_constraint(op.f("ck_attempts_status"), type_="check")
        batch.create_check_constraint(op.f("ck_attempts_status"), sa.text(_ATTEMPT_STATUSES_NEW))
    op.create_index("ix_executions_finished_at", "executions", ["finished_at"])
    op.create_index("ix_executions_queue_id", "executions", ["queue_id", "id"])


def downgrade():
    bind = op.get_bind()
    with op.batch_alter_table("attempts") as batch:
        batch.drop_constraint(op.f("ck_attempts_status"), type_="check")
    bind.execute(sa.text("UPDATE attempts SET status = 'abandoned' WHERE status = 'cancelled'"))
    with op.batch_alter_table("attempts") as batch:
        batch.create_check_constraint(op.f("ck_attempts_status"), sa.text(_ATTEMPT_STATUSES_OLD))

    op.drop_index("ix_executions_queue_id", table_name="executions")
    op.drop_index("ix_executions_finished_at", table_name="executions")
    op.drop_index("ix_executions_queue_running", table_name="executions")
    with op.batch_alter_table("executions") as batch:
        batch.add_column(sa.Column("queue", sa.String(length=64), server_default="default", nullable=False))
    bind.execute(
        sa.text(
            "UPDATE executions SET queue = COALESCE((SELECT q.name FROM queues AS q WHERE q.id = executions.queue_id),"
            " 'default')"
        )
    )
    with op.batch_alter_table("executions") as batch:
        batch.drop_constraint(op.f("fk_executions_queue_id_queues"), type_="foreignkey")
        batch.drop_column("queue_id")
        batch.drop_column("holds_slot")
        batch.drop_column("cancel_requested_at")
        batch.drop_column("cancel_requested_by")

    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("queue", sa.String(length=64), server_default="default", nullable=False))
    bind.execute(sa.text("UPDATE jobs SET queue = (SELECT q.name FROM queues AS q WHERE q.id = jobs.queue_id)"))
    with op.batch_alter_table("jobs") as batch:
        batch.drop_constraint(op.f("fk_jobs_queue_id_queues"), type_="foreignkey")
        batch.drop_index(op.f("ix_jobs_queue_id"))
        batch.drop_column("queue_id")

    op.drop_index(op.f("ix_worker_commands_worker_id"), table_name="worker_commands")
    op.drop_table("worker_commands")
    op.drop_table("queues")
    op.drop_table("projects")
