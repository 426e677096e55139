"""audit log: an append-only table of every change with before/after

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01 01:00:00

- `audit_events`: who (actor, source web|cli|api|system, client address), when, which object
  (kind, id, label, job), the action, and the before/after of the changed fields only; project and
  organization ids are plain nullable columns (history outlives what it names).
- Append-only in the database: UPDATE is always refused; DELETE only by the retention prune.
  PostgreSQL: a statement trigger that lets a DELETE through only when the transaction set
  `cronwell.audit_prune = on`. SQLite: row triggers; a DELETE goes through only while
  `audit_prune_gate` holds a row, which the prune inserts and removes in its own transaction.
  (TRUNCATE fires neither; it needs the table's owner, and nothing in Cronwell runs it.)
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

REFUSED = "audit_events is append-only: rows are never updated, and only the retention prune deletes them"

_PG_FUNCTION = f"""
CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('cronwell.audit_prune', true) = 'on' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION '{REFUSED}' USING ERRCODE = 'insufficient_privilege';
END
$$
"""


def upgrade():
    op.create_table(
        "audit_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("object_kind", sa.String(length=40), nullable=False),
        sa.Column("object_id", sa.String(length=200), nullable=False),
        sa.Column("object_label", sa.String(length=200), nullable=True),
        sa.Column("action", sa.String(length=40), nullable=False),
        sa.Column(
            "changes", sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"), nullable=False
        ),
        sa.Column("address", sa.String(length=100), nullable=True),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("project_id", sa.Integer(), nullable=True),
        sa.Column("organization_id", sa.Integer(), nullable=True),
        sa.CheckConstraint("source IN ('web', 'cli', 'api', 'system')", name=op.f("ck_audit_events_source")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_events")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_audit_events_created_at"), "audit_events", ["created_at"])
    op.create_index(op.f("ix_audit_events_actor"), "audit_events", ["actor"])
    op.create_index(op.f("ix_audit_events_job_id"), "audit_events", ["job_id"])
    op.create_index("ix_audit_events_object", "audit_events", ["object_kind", "object_id"])
    op.create_index("ix_audit_events_organization_id_id", "audit_events", ["organization_id", "id"])
    op.create_table(
        "audit_prune_gate",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_prune_gate")),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_PG_FUNCTION)
        op.execute(
            "CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events "
            "FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only()"
        )
    else:
        op.execute(
            "CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events "
            f"BEGIN SELECT RAISE(ABORT, '{REFUSED}'); END"
        )
        op.execute(
            "CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events "
            "WHEN NOT EXISTS (SELECT 1 FROM audit_prune_gate) "
            f"BEGIN SELECT RAISE(ABORT, '{REFUSED}'); END"
        )


def downgrade():
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS audit_events_append_only ON audit_events")
        op.execute("DROP FUNCTION IF EXISTS audit_events_append_only()")
    else:
        op.execute("DROP TRIGGER IF EXISTS audit_events_no_delete")
        op.execute("DROP TRIGGER IF EXISTS audit_events_no_update")
    op.drop_table("audit_prune_gate")
    op.drop_index("ix_audit_events_organization_id_id", table_name="audit_events")
    op.drop_index("ix_audit_events_object", table_name="audit_events")
    op.drop_index(op.f("ix_audit_events_job_id"), table_name="audit_events")
    op.drop_index(op.f("ix_audit_events_actor"), table_name="audit_events")
    op.drop_index(op.f("ix_audit_events_created_at"), table_name="audit_events")
    op.drop_table("audit_events")
