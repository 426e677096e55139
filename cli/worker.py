"""`flask worker ...`: see the commands below."""
from __future__ import annotations

import click
from flask.cli import AppGroup

worker_cli = AppGroup("worker", help="Run the worker process.")
