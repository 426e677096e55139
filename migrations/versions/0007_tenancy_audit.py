"""tenancy and audit (issue 15): organizations, memberships, superuser, audit log

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 01:00:00

Reserved in the chain so that work on several issues at once can each fill in its own revision
without racing for the head. Empty until its issue lands its schema.
"""

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade():
    pass


def downgrade():
    pass
