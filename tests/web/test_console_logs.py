"""Quieter development logs: HTMX polling at DEBUG, gunicorn's own lines not
named like errors."""

from __future__ import annotations

import json
import logging
import re
from datetime import timedelta
from types import SimpleNamespace

from app.gunicorn_logs import GunicornLogger, _name_gunicorn_plainly


def _requests(level: int) -> dict[str, str]:
    """path -> level of the access lines for a poll, a page and an action, on a private logger at
    `level` (gunicorn's own loggers are process-wide, so they are left alone)."""
    access_log = logging.Logger("test.access", level)
    seen: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = seen.append
    access_log.addHandler(handler)
    glog = SimpleNamespace(access_log=access_log, access_log_enabled=True, error=lambda *a, **k: None)
    response = SimpleNamespace(status="200 OK", sent=123, headers={})
    for environ in (
        {"REQUEST_METHOD": "GET", "PATH_INFO": "/dashboard/panels/summary", "HTTP_HX_REQUEST": "true"},
        {"REQUEST_METHOD": "GET", "PATH_INFO": "/jobs/"},
        {"REQUEST_METHOD": "POST", "PATH_INFO": "/alerts/1/resolve", "HTTP_HX_REQUEST": "true"},
    ):
        GunicornLogger.access(glog, response, SimpleNamespace(headers=[]), environ, timedelta(milliseconds=5))
    return {record.path: record.levelname for record in seen}


def test_htmx_polling_is_logged_at_debug_and_other_requests_at_info():
    assert _requests(logging.DEBUG) == {
        "/dashboard/panels/summary": "DEBUG",
        "/jobs/": "INFO",
        "/alerts/1/resolve": "INFO",  # an action is not a poll
    }
    # At the usual level the polls are left out; pages and actions are not.
    assert _requests(logging.INFO) == {"/jobs/": "INFO", "/alerts/1/resolve": "INFO"}


def test_gunicorn_lines_are_named_gunicorn_not_gunicorn_error():
    record = logging.LogRecord("gunicorn.error", logging.INFO, __file__, 1, "Booting worker", None, None)
    assert _name_gunicorn_plainly(record) and record.name == "gunicorn"


def _run_all():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "run_all.py"
    spec = importlib.util.spec_from_file_location("run_all", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_make_run_relays_every_process_in_one_line_format():
    run_all = _run_all()
    record = "2026-12-01T02:37:08.829Z INFO gunicorn: Starting gunicorn"
    assert run_all.uniform(record, "web", as_json=False) == record  # already a record: as it is
    assert run_all.uniform('{"level": "INFO"}', "web", as_json=True) == '{"level": "INFO"}'
    plain = run_all.uniform("scheduler s-1 started (tick <= 5s)", "scheduler", as_json=False)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+Z INFO scheduler: scheduler s-1 started \(tick <= 5s\)", plain)
    as_json = json.loads(run_all.uniform("worker w-1 started", "worker", as_json=True))
    assert as_json["logger"] == "worker" and as_json["level"] == "INFO" and as_json["message"] == "worker w-1 started"
    assert run_all.uniform('  File "x.py", line 1', "worker", as_json=False) == '  File "x.py", line 1'


def test_the_run_banner_promises_admin_admin_only_where_that_account_exists(app, app_env):
    from tests.factories import make_user

    run_all = _run_all()
    assert "flask user create NAME --superuser" in run_all.sign_in_hint(app_env)
    make_user("alice", "a-long-password")
    assert "admin/admin" not in run_all.sign_in_hint(app_env)
    make_user("admin", "admin")
    assert "admin/admin" in run_all.sign_in_hint(app_env)
