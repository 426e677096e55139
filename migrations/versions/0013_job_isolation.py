"""pooled isolation (issue 19): a job runs in a fresh process or in a reused pool process

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01 05:00:00

Reserved in the chain so that work on several issues at once can each fill in its own revision
without racing for the head. Empty until its issue lands its schema.
"""

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade():
    pass


def downgrade():
    pass
