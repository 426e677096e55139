"""jobs belong to a project (issue 15): job names unique within a project, not site-wide

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01 05:00:00

Reserved in the chain so that work on several issues at once can each fill in its own revision
without racing for the head. Empty until its issue lands its schema.
"""

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade():
    pass


def downgrade():
    pass
