"""`flask demo ...`: see the commands below."""
from __future__ import annotations

import click
from flask.cli import AppGroup

demo_cli = AppGroup("demo", help="Self-checking demonstrations of the guarantees.")
