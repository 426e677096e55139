"""The operator CLI: one Click group per noun, registered on the Flask CLI (`flask <noun> <verb>`)."""

from __future__ import annotations

import importlib

from flask import Flask

# module name -> attribute holding its Click group or command
_COMMANDS: list[tuple[str, str]] = [
    ("scheduler", "scheduler_cli"),
    ("worker", "worker_cli"),
    ("demo", "demo_cli"),
    ("verify", "verify_command"),
    ("job", "job_cli"),
    ("queue", "queue_cli"),
    ("execution", "execution_cli"),
    ("batch", "batch_cli"),
    ("alerts", "alerts_cli"),
    ("channel", "channel_cli"),
    ("audit", "audit_cli"),
    ("event", "event_cli"),
    ("schedule", "schedule_cli"),
    ("ops", "health_cli"),
    ("ops", "prune_history_cli"),
    ("ops", "ensure_dev_user_cli"),
    ("deploy", "check_deploy_cli"),
    ("deploy", "check_heartbeat_cli"),
    ("db", "db_cli"),
    ("token", "token_cli"),
    ("org", "org_cli"),
    ("project", "project_cli"),
    ("user", "user_cli"),
]

# A lean app kind's command group, where it is smaller than the module's whole group: the worker
# kind's `worker` group holds `run` alone, without `list` and `stop` (and cli/common.py's models).
_LEAN = {"worker": ("worker_run", "worker_run_cli")}


def register_commands(app: Flask, only: str | None = None) -> None:
    """Register every command, or with `only` just that module's (the worker's and the
    scheduler's lean apps: importing the other command modules costs memory they never use)."""
    if only in _LEAN:
        module_name, attr = _LEAN[only]
        app.cli.add_command(getattr(importlib.import_module(f"cli.{module_name}"), attr))
        return
    for module_name, attr in _COMMANDS:
        if only is not None and module_name != only:
            continue
        module = importlib.import_module(f"cli.{module_name}")
        app.cli.add_command(getattr(module, attr))
