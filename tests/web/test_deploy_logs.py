"""Structured logs: one JSON object per line with an event, text for people, secrets masked, and
gunicorn's logs through the same formatters."""

from __future__ import annotations

import io
import json
import logging
import sys
import threading
from datetime import timedelta
from types import SimpleNamespace

import pytest

from app.gunicorn_logs import GunicornLogger
from app.logs import MASK, Redactor, configure_logging, make_formatter, secret_values

SECRETS = {
    "SECRET_KEY": "sk-0123456789abcdef",
    "SCHEDULER_CLI_SECRET": "cli-secret-xyz",
    "METRICS_TOKEN": "metrics-token-42",
    "DEV_ADMIN_PASSWORD": "first admin words",
    "DATABASE_URL": "postgresql://cronwell:db-pass-77@db:5432/cronwell",
    "REDIS_URL": "redis://:redis-pass-88@cache:6379/0",
}


def capture(fmt: str = "json", secrets=None) -> tuple[logging.Logger, io.StringIO]:
    """A private logger writing through Cronwell's formatter into a buffer."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(make_formatter(fmt, secrets if secrets is not None else []))
    logger = logging.getLogger(f"cronwell.test.{fmt}.{id(stream)}")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    return logger, stream


def lines(stream: io.StringIO) -> list[dict]:
    out = stream.getvalue().splitlines()
    return [json.loads(line) for line in out]


def test_json_is_one_object_per_line_with_the_standard_fields():
    logger, stream = capture()
    logger.info(
        "execution finished",
        extra={
            "event": "execution_finished",
            "execution_id": 7,
            "job_id": 3,
            "worker_id": "worker-a-1",
            "status": "succeeded",
        },
    )
    logger.warning("multi\nline message")
    first, second = lines(stream)
    assert set(first) >= {"time", "level", "logger", "message", "pid", "event"}
    assert first["time"].endswith("Z") and "T" in first["time"]
    assert (first["event"], first["execution_id"], first["job_id"], first["worker_id"]) == (
        "execution_finished",
        7,
        3,
        "worker-a-1",
    )
    assert second["event"] == "log" and second["message"] == "multi\nline message"


def test_exceptions_stay_inside_the_json_line():
    logger, stream = capture()
    try:
        raise ValueError("bad value")
    except ValueError:
        logger.exception("it failed", extra={"event": "oops"})
    [record] = lines(stream)
    assert "ValueError: bad value" in record["exc_info"] and record["event"] == "oops"


def test_secret_values_come_from_the_settings_and_url_passwords():
    found = secret_values(SECRETS)
    assert set(found) == {
        "sk-0123456789abcdef",
        "cli-secret-xyz",
        "metrics-token-42",
        "first admin words",
        "db-pass-77",
        "redis-pass-88",
    }
    assert secret_values({"SECRET_KEY": "abc"}) == []  # too short to mask safely


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_secrets_never_reach_the_output(fmt):
    logger, stream = capture(fmt, secret_values(SECRETS))
    logger.info(
        "connecting to %s with key %s",
        SECRETS["DATABASE_URL"],
        SECRETS["SECRET_KEY"],
        extra={
            "event": "x",
            "cli_secret": "anything",
            "password": "hunter2hunter2",
            "payload": {"token": "t0k3n-value", "note": f"used {SECRETS['METRICS_TOKEN']}"},
            "url": "https://user:inline-pass@example.test/path",
        },
    )
    try:
        raise RuntimeError(f"auth failed for {SECRETS['SCHEDULER_CLI_SECRET']}")
    except RuntimeError:
        logger.exception("boom")
    output = stream.getvalue()
    for secret in (
        "sk-0123456789abcdef",
        "db-pass-77",
        "anything",
        "hunter2hunter2",
        "t0k3n-value",
        "metrics-token-42",
        "inline-pass",
        "cli-secret-xyz",
    ):
        assert secret not in output, (secret, output)
    assert MASK in output and "postgresql://cronwell:***@db:5432/cronwell" in output


def test_redactor_keeps_ordinary_fields():
    redactor = Redactor(["s3cr3t-value"])
    assert redactor.value({"job_id": 3, "keys": ["a"], "status": "ok"}) == {"job_id": 3, "keys": ["a"], "status": "ok"}
    assert redactor.value({"password": None}) == {"password": None}


def test_text_format_is_for_people():
    logger, stream = capture("text")
    logger.info("tick", extra={"event": "scheduler_tick", "due": 2})
    line = stream.getvalue().strip()
    assert " INFO cronwell.test.text" in line and line.endswith("tick event=scheduler_tick due=2")


def test_an_unknown_format_is_refused():
    with pytest.raises(ValueError, match="LOG_FORMAT"):
        make_formatter("xml", [])


def test_a_tick_report_is_one_log_record_with_its_fields():
    from app.services.engine.scheduler import TickReport
    from cli.process import Status

    logger, stream = capture()
    status = Status("scheduler", "s-1", as_log=True)
    status.logger = logger
    report = TickReport(due=1, created=2, missed=0, duration_ms=4.5)
    status(report)
    [record] = lines(stream)
    assert record["event"] == "scheduler_tick" and record["scheduler_id"] == "s-1"
    # `created` is a LogRecord attribute, so that one field is logged as created_count.
    assert (record["due"], record["created_count"], record["missed"], record["ms"]) == (1, 2, 0, 4.5)
    assert (
        record["message"]
        == report.line()
        == "tick due=1 created=2 missed=0 coalesced=0 recovered=0 pruned=0 aged=0 expired=0 ms=4.5"
    )


def test_status_of_the_long_running_commands_become_named_events(app, capsys, monkeypatch):
    from app.services.engine.worker import WorkerStats
    from cli.process import Status

    app.config["LOG_FORMAT"] = "json"
    logger, stream = capture()
    monkeypatch.setattr(logging, "getLogger", lambda name=None: logger)
    with app.app_context():
        status = Status.for_app("worker", "worker-h-1")
    status.emit("started", "worker worker-h-1 started (4 slots, queues all)", slots=4, queues="all")
    status(WorkerStats(claimed=3, succeeded=2))
    status.emit("stopped", "worker worker-h-1 stopped")
    records = lines(stream)
    assert [(r["event"], r["worker_id"]) for r in records] == [
        ("worker_started", "worker-h-1"),
        ("worker_summary", "worker-h-1"),
        ("worker_stopped", "worker-h-1"),
    ]
    assert (records[0]["slots"], records[1]["claimed"], records[1]["succeeded"], records[1]["failed"]) == (4, 3, 2, 0)
    assert capsys.readouterr().out == ""  # nothing free-form on stdout

    app.config["LOG_FORMAT"] = "text"
    with app.app_context():
        Status.for_app("worker", "w")(WorkerStats(claimed=1, succeeded=1))
    assert (
        capsys.readouterr().out
        == "worker claimed=1 succeeded=1 failed=0 timed_out=0 retried=0 dead_lettered=0 cancelled=0 discarded=0\n"
    )
    assert lines(stream) == records  # and nothing logged


def test_json_mode_routes_warnings_and_uncaught_exceptions_into_the_log(monkeypatch, capsys):
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(logging, "_warnings_showwarning", None, raising=False)
    try:
        configure_logging("json", "INFO", secrets=[])
        try:
            raise KeyError("lost")
        except KeyError:
            sys.excepthook(*sys.exc_info())
    finally:
        logging.captureWarnings(False)
        configure_logging("text", "WARNING", secrets=[])
    [record] = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert record["event"] == "uncaught_exception" and "KeyError" in record["exc_info"]


def test_gunicorn_access_log_is_one_structured_record_per_request(monkeypatch):
    monkeypatch.setenv("LOG_FORMAT", "json")
    cfg = SimpleNamespace(
        loglevel="info",
        errorlog="-",
        accesslog="-",
        capture_output=False,
        syslog=False,
        logconfig_dict={},
        logconfig_json=None,
        logconfig=None,
        disable_redirect_access_to_syslog=False,
        user=0,
        group=0,
    )
    glog = GunicornLogger(cfg)
    stream = io.StringIO()
    for handler in glog.access_log.handlers:
        handler.setStream(stream)
    response = SimpleNamespace(status="200 OK", sent=512, headers={})
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": "/jobs/",
        "QUERY_STRING": "token=never-logged",
        "REMOTE_ADDR": "10.0.0.5",
        "HTTP_AUTHORIZATION": "Bearer never-logged",
        "RAW_URI": "/jobs/?token=x",
        "SERVER_PROTOCOL": "HTTP/1.1",
    }
    glog.access(response, SimpleNamespace(headers=[]), environ, timedelta(milliseconds=12.5))
    [record] = lines(stream)
    assert record["event"] == "http_request" and record["logger"] == "gunicorn.access"
    assert (record["method"], record["path"], record["status"], record["bytes"], record["remote"]) == (
        "GET",
        "/jobs/",
        200,
        512,
        "10.0.0.5",
    )
    assert record["duration_ms"] == 12.5
    assert "never-logged" not in stream.getvalue()
