"""10M executions (issue 19): what the executions table needs at ten million rows

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01 05:00:00

Reserved in the chain so that work on several issues at once can each fill in its own revision
without racing for the head. Empty until its issue lands its schema.
"""

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade():
    pass


def downgrade():
    pass
