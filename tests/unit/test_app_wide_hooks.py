"""Blueprints install no app-wide hooks: context processors, request hooks, template filters and
error handlers for the whole app are registered by the factory (app/web/__init__.py)."""

from __future__ import annotations

import re
from pathlib import Path

APP_DIR = Path(__file__).resolve().parents[2] / "app"
APP_WIDE = re.compile(
    r"\.(app_context_processor|before_app_request|after_app_request|teardown_app_request|app_errorhandler"
    r"|app_template_\w+|app_url_defaults|app_url_value_preprocessor)\b"
)


def test_no_blueprint_module_registers_an_app_wide_hook():
    offenders = [
        f"{path.relative_to(APP_DIR.parent)}:{number}: {line.strip()}"
        for path in sorted(APP_DIR.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if APP_WIDE.search(line)
    ]
    assert offenders == [], "register app-wide hooks in app/web/__init__.py:\n" + "\n".join(offenders)
