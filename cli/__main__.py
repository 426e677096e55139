"""`python -m cli <command>`: the `flask` command line without Flask's plugin scan.

`flask` loads every installed package's `flask.commands` entry point before it reads the command
name or loads the app. Cronwell installs no such plugin (tests/unit/test_worker_imports.py fails
if one appears), but a package a deployer adds may, and its command and everything it imports
would then sit in every long-running process. Every Cronwell command is the app's own, so this
entry point is the same command line without that scan: `python -m cli worker run --workers 4`
is `flask worker run --workers 4`. The app is found the same way (`--app`, FLASK_APP, else
wsgi.py), `.env` files are read the same way, and the app kind follows the command as it does
under `flask` (`app.process_kind`).
"""

from __future__ import annotations

from flask.cli import FlaskGroup


class AppCommandsOnly(FlaskGroup):
    """Flask's command group, without the third-party plugin commands."""

    def _load_plugin_commands(self) -> None:
        # Flask's only hook for the scan (Flask 3.1).
        self._loaded_plugin_commands = True


cli = AppCommandsOnly(name="cli", help="Cronwell's commands (the same as `flask <command>`, without Flask plugins).")


def main() -> None:
    cli.main()


if __name__ == "__main__":
    main()
