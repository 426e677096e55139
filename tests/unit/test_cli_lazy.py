"""The command table (cli/__init__.py): every `flask` command of Cronwell's is a row, the row's
name and help line are the command's own, and a lazy row runs the real command."""

from __future__ import annotations

import importlib

import pytest

from app import CLI, HELP, WEB, create_app
from cli import COMMANDS, LazyCommand

# Registered on the web app by its extensions, not by cli/.
EXTENSION_COMMANDS = {"openapi"}


@pytest.mark.parametrize(("name", "module", "attr", "short_help"), COMMANDS, ids=[row[0] for row in COMMANDS])
def test_a_row_names_its_command_and_its_help_line(name, module, attr, short_help):
    command = getattr(importlib.import_module(f"cli.{module}"), attr)
    assert command.name == name
    assert command.get_short_help_str(limit=100) == short_help  # Click's own first line of the help


def test_every_command_of_the_web_app_has_a_row(tmp_path):
    app = create_app(
        {"TESTING": True},
        env={"DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}", "INSTANCE_DIR": str(tmp_path)},
        kind=WEB,
    )
    assert set(app.cli.commands) - EXTENSION_COMMANDS == {row[0] for row in COMMANDS}


@pytest.mark.parametrize("kind", [CLI, HELP])
def test_the_command_line_kinds_register_lazy_rows_that_run_the_real_command(kind, tmp_path):
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}", "INSTANCE_DIR": str(tmp_path)}
    app = create_app({"TESTING": True}, env=env, kind=kind)
    assert {type(command) for command in app.cli.commands.values()} == {LazyCommand}
    # What each process imports is checked in a fresh interpreter (tests/unit/test_worker_imports.py).
    result = app.test_cli_runner().invoke(args=["schedule", "preview", "--every", "90m", "--count", "2"])
    assert result.exit_code == 0, result.output
    assert len([line for line in result.output.splitlines() if "UTC" in line or "Z" in line]) >= 2, result.output
    listing = app.test_cli_runner().invoke(args=["--help"])
    assert "Validate and preview schedules (no job needed)." in listing.output
