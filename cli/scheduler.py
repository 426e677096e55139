"""`flask scheduler ...`: see the commands below."""
from __future__ import annotations

import click
from flask.cli import AppGroup

scheduler_cli = AppGroup("scheduler", help="Run the scheduler process.")
