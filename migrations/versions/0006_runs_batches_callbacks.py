"""job kinds, part 2: ad-hoc runs with overrides, batches, callbacks

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 01:00:00

- `batches`: one job run once per item (each item a config override), an optional on-complete
  task, who submitted it, when it was cancelled and when its last item ended;
- executions gain `config_override` (ad-hoc runs, batch items, callbacks), `batch_id`,
  `parent_id` (a callback's parent execution) and `callback_task` (the task a callback runs);
  the trigger vocabulary gains `callback` and `batch`;
- jobs gain `on_success` / `on_failure` (a task) and their configs.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_TRIGGERS_OLD = "trigger IN ('schedule', 'catch_up', 'manual', 'retry')"
_TRIGGERS_NEW = "trigger IN ('schedule', 'catch_up', 'manual', 'retry', 'callback', 'batch')"


def _json():
    return sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade():
    op.create_table(
        "batches",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("item_count", sa.Integer(), nullable=False),
        sa.Column("on_complete", sa.String(length=100), nullable=True),
        sa.Column("on_complete_config", _json(), server_default="{}", nullable=False),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("cancelled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("cancelled_by", sa.String(length=200), nullable=True),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("item_count >= 1", name=op.f("ck_batches_item_count_positive")),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_batches_job_id_jobs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_batches")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_batches_job_id"), "batches", ["job_id"], unique=False)
    op.create_index(
        "ix_batches_open",
        "batches",
        ["id"],
        postgresql_where=sa.text("completed_at IS NULL"),
        sqlite_where=sa.text("completed_at IS NULL"),
    )

    with op.batch_alter_table("executions") as batch:
        batch.add_column(sa.Column("config_override", _json(), nullable=True))
        batch.add_column(sa.Column("batch_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("parent_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("callback_task", sa.String(length=100), nullable=True))
        batch.create_foreign_key(
            op.f("fk_executions_batch_id_batches"), "batches", ["batch_id"], ["id"], ondelete="CASCADE"
        )
        batch.create_foreign_key(
            op.f("fk_executions_parent_id_executions"), "executions", ["parent_id"], ["id"], ondelete="SET NULL"
        )
        batch.drop_constraint(op.f("ck_executions_trigger"), type_="check")
        batch.create_check_constraint(op.f("ck_executions_trigger"), sa.text(_TRIGGERS_NEW))
    op.create_index(
        "ix_executions_batch_id",
        "executions",
        ["batch_id", "status"],
        postgresql_where=sa.text("batch_id IS NOT NULL"),
        sqlite_where=sa.text("batch_id IS NOT NULL"),
    )
    op.create_index(
        "ix_executions_parent_id",
        "executions",
        ["parent_id"],
        postgresql_where=sa.text("parent_id IS NOT NULL"),
        sqlite_where=sa.text("parent_id IS NOT NULL"),
    )

    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("on_success", sa.String(length=100), nullable=True))
        batch.add_column(sa.Column("on_success_config", _json(), server_default="{}", nullable=False))
        batch.add_column(sa.Column("on_failure", sa.String(length=100), nullable=True))
        batch.add_column(sa.Column("on_failure_config", _json(), server_default="{}", nullable=False))


def downgrade():
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("on_failure_config")
        batch.drop_column("on_failure")
        batch.drop_column("on_success_config")
        batch.drop_column("on_success")

    bind = op.get_bind()
    # The old vocabulary has no callback or batch runs: they go with the batches.
    bind.execute(sa.text("DELETE FROM executions WHERE trigger IN ('callback', 'batch')"))
    op.drop_index("ix_executions_parent_id", table_name="executions")
    op.drop_index("ix_executions_batch_id", table_name="executions")
    with op.batch_alter_table("executions") as batch:
        batch.drop_constraint(op.f("ck_executions_trigger"), type_="check")
        batch.create_check_constraint(op.f("ck_executions_trigger"), sa.text(_TRIGGERS_OLD))
        batch.drop_constraint(op.f("fk_executions_parent_id_executions"), type_="foreignkey")
        batch.drop_constraint(op.f("fk_executions_batch_id_batches"), type_="foreignkey")
        batch.drop_column("callback_task")
        batch.drop_column("parent_id")
        batch.drop_column("batch_id")
        batch.drop_column("config_override")

    op.drop_index("ix_batches_open", table_name="batches")
    op.drop_index(op.f("ix_batches_job_id"), table_name="batches")
    op.drop_table("batches")
