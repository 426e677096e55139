"""job kinds, part 2 (issue 14): ad-hoc runs with overrides, batches, callbacks

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 01:00:00

Reserved in the chain so that work on several issues at once can each fill in its own revision
without racing for the head. Empty until its issue lands its schema.
"""

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade():
    pass


def downgrade():
    pass
