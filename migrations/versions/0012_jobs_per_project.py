"""jobs belong to a project: job names unique within a project, not site-wide

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01 05:00:00

- jobs gain `project_id` (NOT NULL, FK to projects), filled from each job's queue: a job was in
  its queue's project all along, now the row says so;
- the site-wide `uq_jobs_name` becomes `uq_jobs_project_id_name` (project_id, name): two
  organizations may both have a job called `nightly`, and neither learns the other's exists by
  being refused. Its index leads with project_id, so it is also the index the foreign key and the
  per-project lookups use (no separate ix_jobs_project_id).

Names differing only in case are the same name: as before this revision, that rule is
the job use case's (app/services/use_cases/jobs.py), now checked within the project, while the
database keeps exact duplicates out. An expression index on lower(name) is not used: SQLite cannot
reflect one, so any later batch rebuild of the table would silently drop it.

Downgrade puts the site-wide constraint back; it refuses, naming them, while jobs of different
projects share a name (rename them first: `flask job edit ID --name NEW`).

On SQLite the table is rebuilt (batch mode) with AUTOINCREMENT kept and every index put back from
its stored SQL, partial ones included (as in 0010).
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def _alter(table: str, change) -> None:
    """Run `change(batch)` on `table`; on SQLite keep AUTOINCREMENT and every index (as 0010 does)."""
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        with op.batch_alter_table(table) as batch:
            change(batch)
        return
    indexes = bind.execute(
        sa.text("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = :t AND sql IS NOT NULL"),
        {"t": table},
    ).fetchall()
    # The copy's AUTOINCREMENT counter would restart at the highest id copied, handing out again
    # the ids of jobs deleted before (bookmarks and the event log still name them).
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
    # A plain ADD COLUMN first (no rebuild), filled, then made NOT NULL in the rebuild.
    op.add_column("jobs", sa.Column("project_id", sa.Integer(), nullable=True))
    op.execute("UPDATE jobs SET project_id = (SELECT queues.project_id FROM queues WHERE queues.id = jobs.queue_id)")

    def jobs(batch):
        batch.alter_column("project_id", existing_type=sa.Integer(), nullable=False)
        batch.create_foreign_key(
            op.f("fk_jobs_project_id_projects"), "projects", ["project_id"], ["id"], ondelete="RESTRICT"
        )
        batch.drop_constraint(op.f("uq_jobs_name"), type_="unique")
        batch.create_unique_constraint(op.f("uq_jobs_project_id_name"), ["project_id", "name"])

    _alter("jobs", jobs)


def downgrade():
    query = sa.text("SELECT name FROM jobs GROUP BY name HAVING count(*) > 1 ORDER BY name LIMIT 6")
    shared = list(op.get_bind().execute(query).scalars())
    if shared:
        listed = ", ".join(repr(name) for name in shared[:5]) + (", ..." if len(shared) > 5 else "")
        raise RuntimeError(
            "cannot downgrade below 0012: job names must be unique across the whole installation there,"
            f" and jobs of different projects share these names: {listed}; rename them first"
            " (flask job edit ID --name NEW)"
        )

    def jobs(batch):
        batch.drop_constraint(op.f("uq_jobs_project_id_name"), type_="unique")
        batch.drop_constraint(op.f("fk_jobs_project_id_projects"), type_="foreignkey")
        batch.create_unique_constraint(op.f("uq_jobs_name"), ["name"])
        batch.drop_column("project_id")

    _alter("jobs", jobs)
