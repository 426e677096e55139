"""The foreign keys that point at executions become set-based triggers on PostgreSQL (ADR 0011)

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01 20:00:00

Five foreign keys point at `executions.id`: attempts and dead letters (ON DELETE CASCADE), alerts,
retries (`retry_of_id`) and callbacks (`parent_id`) (ON DELETE SET NULL). PostgreSQL runs each
constraint's action as a row trigger: five queries per deleted execution, about two thirds of a
retention batch's cost (one 5,000-row delete: 112-165 ms with them, 8-13 ms without;
docs/performance.md, "10M executions"). On PostgreSQL this migration replaces the constraints by
triggers that keep the same rules:

- Deleting executions (any statement, including the cascade from a deleted job or batch): one
  statement-level trigger with the deleted rows as a transition table deletes their attempts and
  dead letters and clears the alerts', retries' and callbacks' references, five set-based
  statements per DELETE instead of five queries per row. It runs at READ COMMITTED only (each of
  its statements then sees every row committed before it, as the constraints' own queries do);
  at REPEATABLE READ or SERIALIZABLE it refuses the delete (ADR 0011 says why).
- Inserting or changing a reference (an attempt, a dead letter, an alert, a retry, a callback):
  a row trigger, only for a non-NULL (changed) value, locks the execution FOR KEY SHARE as the
  constraint's check does, or raises foreign_key_violation.
- An execution's id never changes (the constraints allowed it only while nothing referred to it);
  TRUNCATE executions is refused while attempts, dead letters or alerts still refer to its rows.

The triggers are created before the constraints are dropped, in one transaction: no moment
without either. Existing rows satisfy the rules (the constraints held). The models still declare
the foreign keys: SQLite keeps them, the ORM joins on them, and autogenerate leaves them out on
PostgreSQL (`app.models.execution.autogenerate_filter`). The downgrade adds the constraints back (validating every
row, under a lock that blocks writes to the five tables while it reads them) and then drops the
triggers.
"""

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

# (table, column, ON DELETE action, constraint name) of each foreign key to executions.id.
REFERENCES = (
    ("attempts", "execution_id", "CASCADE", "fk_attempts_execution_id_executions"),
    ("dead_letters", "execution_id", "CASCADE", "fk_dead_letters_execution_id_executions"),
    ("alerts", "execution_id", "SET NULL", "fk_alerts_execution_id_executions"),
    ("executions", "retry_of_id", "SET NULL", "fk_executions_retry_of_id_executions"),
    ("executions", "parent_id", "SET NULL", "fk_executions_parent_id_executions"),
)


def _on_delete(table: str, column: str, action: str) -> str:
    """The set-based form of one constraint's ON DELETE action, for the ids in `gone`."""
    if action == "CASCADE":
        return f"DELETE FROM {table} WHERE {column} = ANY (gone);"
    return f"UPDATE {table} SET {column} = NULL WHERE {column} = ANY (gone) AND {column} IS NOT NULL;"


# Statement-level: the deleted rows arrive as the transition table `deleted`. Each statement below
# takes its own snapshot (READ COMMITTED, a VOLATILE function), so it sees every reference
# committed before it runs; a reference whose transaction still runs holds its execution FOR KEY
# SHARE, so the DELETE that fired this waited for it. The ids go in as one array: an index scan
# per table with the array's keys, whatever the planner thinks of a transition table's size.
DELETED = """
CREATE FUNCTION executions_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    gone integer[] := ARRAY(SELECT id FROM deleted);
BEGIN
    IF cardinality(gone) = 0 THEN
        RETURN NULL;
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'executions can only be deleted at READ COMMITTED isolation'
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'The triggers that keep attempts, dead letters and alerts consistent with executions '
                         'must see rows committed after the transaction began (ADR 0011).';
    END IF;
    {actions}
    RETURN NULL;
END
$$;
CREATE TRIGGER executions_deleted AFTER DELETE ON executions REFERENCING OLD TABLE AS deleted
    FOR EACH STATEMENT EXECUTE FUNCTION executions_deleted();

CREATE FUNCTION executions_id_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the id of execution % cannot change', OLD.id USING ERRCODE = 'restrict_violation';
END
$$;
CREATE TRIGGER executions_id_fixed BEFORE UPDATE OF id ON executions
    FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id) EXECUTE FUNCTION executions_id_fixed();

CREATE FUNCTION executions_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM attempts) OR EXISTS (SELECT 1 FROM dead_letters)
       OR EXISTS (SELECT 1 FROM alerts WHERE execution_id IS NOT NULL) THEN
        RAISE EXCEPTION 'cannot truncate executions while attempts, dead letters or alerts refer to its rows'
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Truncate them in the same statement: TRUNCATE executions, attempts, dead_letters, alerts CASCADE.';
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER executions_truncated AFTER TRUNCATE ON executions
    FOR EACH STATEMENT EXECUTE FUNCTION executions_truncated();
"""

# Row-level, fired only for a non-NULL new or changed reference: what the constraint's check does
# (`SELECT 1 FROM executions WHERE id = $1 FOR KEY SHARE`). The lock keeps the execution from
# being deleted until this transaction ends; a DELETE already under way makes it wait, and once
# that commits the row is gone and the check fails.
CHECK = """
CREATE FUNCTION executions_check_{column}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM executions WHERE id = NEW.{column} FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'insert or update on table "%" violates foreign key constraint "%"', TG_TABLE_NAME, TG_ARGV[0]
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = TG_ARGV[0], TABLE = TG_TABLE_NAME,
                  DETAIL = format('Key ({column})=(%s) is not present in table "executions".', NEW.{column});
    END IF;
    RETURN NULL;
END
$$;
"""

CHECK_TRIGGERS = """
CREATE TRIGGER {table}_{column}_inserted AFTER INSERT ON {table}
    FOR EACH ROW WHEN (NEW.{column} IS NOT NULL) EXECUTE FUNCTION executions_check_{column}('{name}');
CREATE TRIGGER {table}_{column}_updated AFTER UPDATE OF {column} ON {table}
    FOR EACH ROW WHEN (NEW.{column} IS NOT NULL AND NEW.{column} IS DISTINCT FROM OLD.{column})
    EXECUTE FUNCTION executions_check_{column}('{name}');
"""


def upgrade():
    if op.get_bind().dialect.name != "postgresql":
        return  # SQLite keeps the declared foreign keys
    actions = "\n    ".join(_on_delete(table, column, action) for table, column, action, _ in REFERENCES)
    op.execute(DELETED.replace("{actions}", actions))
    for column in sorted({column for _, column, _, _ in REFERENCES}):
        op.execute(CHECK.format(column=column))
    for table, column, _, name in REFERENCES:
        op.execute(CHECK_TRIGGERS.format(table=table, column=column, name=name))
    for table, _, _, name in REFERENCES:
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")


def downgrade():
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, column, action, name in REFERENCES:
        op.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT {name} FOREIGN KEY ({column}) REFERENCES executions (id)"
            f" ON DELETE {action}"
        )
    for table, column, _, _ in REFERENCES:
        op.execute(f"DROP TRIGGER {table}_{column}_inserted ON {table}")
        op.execute(f"DROP TRIGGER {table}_{column}_updated ON {table}")
    for column in sorted({column for _, column, _, _ in REFERENCES}):
        op.execute(f"DROP FUNCTION executions_check_{column}()")
    for name in ("executions_deleted", "executions_id_fixed", "executions_truncated"):
        op.execute(f"DROP TRIGGER {name} ON executions")
        op.execute(f"DROP FUNCTION {name}()")
