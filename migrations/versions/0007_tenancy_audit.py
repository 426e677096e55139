"""tenancy: organizations, projects in organizations, memberships, superuser

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 01:00:00

- `organizations` (one `default` row) and `memberships` (user, organization, role
  admin|operator|viewer; one per user and organization);
- `projects` gain `organization_id`: every existing project moves into the default organization,
  and a project's name is unique within its organization instead of site-wide;
- users gain `superuser` and lose `role`: each existing user becomes a member of the default
  organization with the role they had, and every existing admin becomes a superuser (before
  this revision an admin could do everything in the installation, so an upgrade takes no right
  away from anyone; `flask user set-role` narrows it afterwards).
Jobs and executions reach their project through their queue (jobs.queue_id -> queues.project_id
-> projects.organization_id), which is indexed at every step. Alerts gain `project_id`, since an
alert outlives its job (existing ones: their job's project, else the default project).
The audit log is revision 0011.
"""

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_ROLES = "role IN ('admin', 'operator', 'viewer')"


def upgrade():
    now = datetime.now(UTC)  # noqa: TID251 - a migration stamps the rows it creates
    op.create_table(
        "organizations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_organizations")),
        sa.UniqueConstraint("name", name=op.f("uq_organizations_name")),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "memberships",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("organization_id", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(_ROLES, name=op.f("ck_memberships_role")),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_memberships_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_memberships_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memberships")),
        sa.UniqueConstraint("user_id", "organization_id", name="uq_memberships_user_organization"),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_memberships_organization_id"), "memberships", ["organization_id"], unique=False)

    bind = op.get_bind()
    bind.execute(sa.text("INSERT INTO organizations (name, created_at) VALUES ('default', :now)"), {"now": now})

    with op.batch_alter_table("projects") as batch:
        batch.add_column(sa.Column("organization_id", sa.Integer(), nullable=True))
    bind.execute(sa.text("UPDATE projects SET organization_id = (SELECT id FROM organizations WHERE name = 'default')"))
    with op.batch_alter_table("projects") as batch:
        batch.alter_column("organization_id", existing_type=sa.Integer(), nullable=False)
        batch.create_foreign_key(
            op.f("fk_projects_organization_id_organizations"),
            "organizations",
            ["organization_id"],
            ["id"],
            ondelete="RESTRICT",
        )
        batch.drop_constraint(op.f("uq_projects_name"), type_="unique")
        batch.create_unique_constraint("uq_projects_organization_name", ["organization_id", "name"])

    with op.batch_alter_table("alerts") as batch:
        batch.add_column(sa.Column("project_id", sa.Integer(), nullable=True))
        batch.create_foreign_key(
            op.f("fk_alerts_project_id_projects"), "projects", ["project_id"], ["id"], ondelete="SET NULL"
        )
        batch.create_index(op.f("ix_alerts_project_id"), ["project_id"], unique=False)
    # An alert whose job is gone cannot tell its project any more: it stays with the default one.
    bind.execute(
        sa.text(
            "UPDATE alerts SET project_id = COALESCE((SELECT q.project_id FROM jobs AS j JOIN queues AS q"
            " ON q.id = j.queue_id WHERE j.id = alerts.job_id), (SELECT p.id FROM projects AS p JOIN organizations"
            " AS o ON o.id = p.organization_id WHERE p.name = 'default' AND o.name = 'default'))"
        )
    )

    with op.batch_alter_table("users") as batch:
        batch.add_column(sa.Column("superuser", sa.Boolean(), server_default=sa.text("false"), nullable=False))
    bind.execute(
        sa.text(
            "INSERT INTO memberships (user_id, organization_id, role, created_at)"
            " SELECT u.id, o.id, u.role, :now FROM users AS u, organizations AS o WHERE o.name = 'default'"
        ),
        {"now": now},
    )
    bind.execute(sa.text("UPDATE users SET superuser = true WHERE role = 'admin'"))
    with op.batch_alter_table("users") as batch:
        batch.drop_constraint(op.f("ck_users_role"), type_="check")
        batch.drop_column("role")


def downgrade():
    bind = op.get_bind()
    with op.batch_alter_table("users") as batch:
        batch.add_column(sa.Column("role", sa.String(length=16), server_default="viewer", nullable=False))
    # The highest role a user holds anywhere (admin for a superuser) becomes their one role.
    bind.execute(
        sa.text(
            "UPDATE users SET role = CASE"
            " WHEN superuser THEN 'admin'"
            " WHEN EXISTS (SELECT 1 FROM memberships AS m WHERE m.user_id = users.id AND m.role = 'admin') THEN 'admin'"
            " WHEN EXISTS (SELECT 1 FROM memberships AS m WHERE m.user_id = users.id AND m.role = 'operator')"
            " THEN 'operator' ELSE 'viewer' END"
        )
    )
    with op.batch_alter_table("users") as batch:
        batch.alter_column("role", existing_type=sa.String(length=16), server_default=None)
        batch.create_check_constraint(op.f("ck_users_role"), sa.text(_ROLES))
        batch.drop_column("superuser")

    with op.batch_alter_table("alerts") as batch:
        batch.drop_index(op.f("ix_alerts_project_id"))
        batch.drop_constraint(op.f("fk_alerts_project_id_projects"), type_="foreignkey")
        batch.drop_column("project_id")

    # Project names become site-wide again: a name used in several organizations keeps it once
    # (the default organization's, else the oldest) and the others get their organization's name
    # as a prefix.
    bind.execute(
        sa.text(
            "UPDATE projects SET name = (SELECT o.name FROM organizations AS o WHERE o.id = projects.organization_id)"
            " || '-' || name WHERE EXISTS (SELECT 1 FROM projects AS p WHERE p.name = projects.name AND p.id <> projects.id"
            " AND (p.organization_id = (SELECT id FROM organizations WHERE name = 'default') OR"
            " (projects.organization_id <> (SELECT id FROM organizations WHERE name = 'default') AND p.id < projects.id)))"
        )
    )
    with op.batch_alter_table("projects") as batch:
        batch.drop_constraint("uq_projects_organization_name", type_="unique")
        batch.create_unique_constraint(op.f("uq_projects_name"), ["name"])
        batch.drop_constraint(op.f("fk_projects_organization_id_organizations"), type_="foreignkey")
        batch.drop_column("organization_id")

    op.drop_index(op.f("ix_memberships_organization_id"), table_name="memberships")
    op.drop_table("memberships")
    op.drop_table("organizations")
