"""`flask task ...`: the task catalog's commands, and `run` (a one-off run, cli/task_run.py)."""

from __future__ import annotations

from flask.cli import AppGroup

from cli.task_run import run_task

task_cli = AppGroup("task", help="Registered tasks: run one without a job.")
task_cli.add_command(run_task)
