"""The operator CLI: one Click group per noun, registered on the Flask CLI (`flask <noun> <verb>`).

Start-up is paid by every command, so a command's module is imported only when that command
runs. `COMMANDS` lists each top-level command with its module, the attribute holding its Click
group or command, and the one line `flask --help` shows; a command line process (`app.CLI` and
`app.HELP` kinds) registers a `LazyCommand` per row, which imports the module when the command is
invoked (or asked for its own `--help`). A new command is one row here; a unit test fails when a
row's name or help line differs from the command's own (tests/unit/test_cli_lazy.py). The web
kind registers the real commands (tests and tools walk the whole tree).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from flask import Flask

# name, module in cli/, attribute holding its Click group or command, its line in `flask --help`
COMMANDS: list[tuple[str, str, str, str]] = [
    ("scheduler", "scheduler", "scheduler_cli", "Run the scheduler process."),
    ("worker", "worker", "worker_cli", "Run, list, stop and reload worker processes."),
    ("demo", "demo", "demo_cli", "Self-checking demonstrations of the guarantees."),
    ("verify", "verify", "verify_command", "Check the ledger: every due occurrence has exactly one execution or a misfire event, no expired..."),
    ("job", "job", "job_cli", "Create, change, inspect, run and remove jobs."),
    ("task", "task", "task_cli", "List, show and check the registered tasks, and run one without a job."),
    ("queue", "queue", "queue_cli", "Create, tune, pause and inspect queues."),
    ("execution", "execution", "execution_cli", "List, inspect, retry and cancel executions."),
    ("batch", "batch", "batch_cli", "Submit, list, inspect and cancel batches (one run of a job per item)."),
    ("workflow", "workflow", "workflow_cli", "A workflow job's runs: list, show each step, cancel, retry from a step."),
    ("alerts", "alerts", "alerts_cli", "List and resolve alerts; list dead letters."),
    ("channel", "channel", "channel_cli", "Notification channels: webhook, slack, teams and email, per project."),
    ("audit", "audit", "audit_cli", "Read the audit log: every change, who made it, when and from where."),
    ("event", "event", "event_cli", "Read the event log: misfires, overlap skips, recovered leases, changes."),
    ("schedule", "schedule", "schedule_cli", "Validate and preview schedules (no job needed)."),
    ("health", "ops", "health_cli", "Readiness, scheduler and worker heartbeats, queue depth and execution counts."),
    ("prune-history", "ops", "prune_history_cli", "Apply each job's retention (retention_count executions, retention_days of age)."),
    ("ensure-dev-user", "ops", "ensure_dev_user_cli", "Create the admin account (DEV_ADMIN_USERNAME, default admin) unless it exists."),
    ("check-deploy", "deploy", "check_deploy_cli", "Warn about settings unfit for production: auth off, DEBUG on, default SECRET_KEY, no CLI secret,..."),
    ("check-heartbeat", "deploy", "check_heartbeat_cli", "Exit 0 when a `kind` process on this host has heartbeated recently, else 1."),
    ("db", "db", "db_cli", "Migrate the database schema (Flask-Migrate, migrations/)."),
    ("token", "token", "token_cli", "Create, list and revoke API tokens."),
    ("org", "org", "org_cli", "Create, list, rename and delete organizations."),
    ("project", "project", "project_cli", "Create, list, rename and delete projects (ORG/PROJECT)."),
    ("user", "user", "user_cli", "Create and manage users: organizations, roles, passwords."),
]  # fmt: skip
# (module, attribute) of each: what tools that walk the real commands read.
_COMMANDS: list[tuple[str, str]] = [(module, attr) for _, module, attr, _ in COMMANDS]
NAMES = frozenset(name for name, *_ in COMMANDS)

# A lean app kind's command group, where it is smaller than the module's whole group: the worker
# kind's `worker` group holds `run` alone, without `list` and `stop` (and cli/common.py's models).
_LEAN = {"worker": ("worker_run", "worker_run_cli")}


class LazyCommand(click.Command):
    """Stands for the command `attr` of `cli.<module>` in `flask --help`; importing the module
    waits until the command runs (its context is the real command's)."""

    def __init__(self, name: str, module: str, attr: str, short_help: str) -> None:
        super().__init__(name, short_help=short_help, help=short_help, add_help_option=False)
        self._where = (module, attr)

    def load(self) -> click.Command:
        module, attr = self._where
        command: click.Command = getattr(importlib.import_module(f"cli.{module}"), attr)
        return command

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        return self.load().make_context(info_name, args, parent=parent, **extra)


def register_commands(app: Flask, only: str | None = None, *, lazy: bool = False) -> None:
    """Register every command (`lazy`: as `LazyCommand`s), or with `only` just that module's (the
    worker's and the scheduler's lean apps: importing the other command modules costs memory
    they never use)."""
    if only in _LEAN:
        module_name, attr = _LEAN[only]
        app.cli.add_command(getattr(importlib.import_module(f"cli.{module_name}"), attr))
        return
    for name, module_name, attr, short_help in COMMANDS:
        if only is not None and module_name != only:
            continue
        if lazy:
            app.cli.add_command(LazyCommand(name, module_name, attr, short_help))
        else:
            app.cli.add_command(getattr(importlib.import_module(f"cli.{module_name}"), attr))
