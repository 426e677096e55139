"""The built-in task catalog: registration, config validation and running tasks directly."""

from __future__ import annotations

import http.server
import os
import socket
import sqlite3
import tempfile
import threading
from dataclasses import replace

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.tasks import TaskConfigError, TaskContext, all_tasks, get_task, load_catalog, validate_config

CATALOG = {
    "sleep_for_seconds",
    "always_succeed",
    "always_fail",
    "fail_once_then_succeed",
    "generate_report",
    "cleanup_old_runs",
    "write_file_artifact",
    "http_health_check_local",
    "http_request",
    "echo",
}

load_catalog()


def make_context(tmp_path, **overrides) -> TaskContext:
    """A TaskContext whose directories live under tmp_path."""
    values = dict(
        execution_id=1,
        job_id=1,
        job_name="demo",
        idempotency_key="job-1:2030-01-01T00:00:00Z",
        attempt=1,
        artifact_dir=str(tmp_path / "artifacts"),
        database_url=f"sqlite:///{tmp_path / 'unused.db'}",
        marker_dir=str(tmp_path / "markers"),
    )
    values.update(overrides)
    return TaskContext(**values)


def run_task(name: str, config: dict, ctx: TaskContext):
    """Validate like job creation does, then run like the worker does."""
    return get_task(name).run(validate_config(name, config), ctx)


def refusal(name: str, config) -> str:
    with pytest.raises(TaskConfigError) as excinfo:
        validate_config(name, config)
    return str(excinfo.value)


# --- registration ------------------------------------------------------------------------------


def test_every_catalog_task_is_registered_with_a_description_and_a_strict_schema():
    registered = {spec.name: spec for spec in all_tasks()}
    assert CATALOG <= set(registered)
    for name in CATALOG:
        spec = registered[name]
        assert len(spec.description) > 40, name
        jsonschema.Draft202012Validator.check_schema(spec.schema)
        assert spec.schema["type"] == "object"
        assert spec.schema["additionalProperties"] is False, name


def test_loading_the_catalog_twice_is_harmless():
    load_catalog()
    assert CATALOG <= {spec.name for spec in all_tasks()}


# --- config validation -------------------------------------------------------------------------

VALID_CONFIGS = [
    ("sleep_for_seconds", {"seconds": 0.01}),
    ("sleep_for_seconds", {"seconds": 300}),
    ("always_succeed", {}),
    ("always_succeed", None),
    ("always_succeed", {"message": "hello"}),
    ("always_fail", {"message": "boom"}),
    ("fail_once_then_succeed", {}),
    ("generate_report", {}),
    ("generate_report", {"title": "Daily", "hours": 720}),
    ("cleanup_old_runs", {}),
    ("cleanup_old_runs", {"dry_run": True}),
    ("write_file_artifact", {"filename": "report.txt", "content": ""}),
    ("write_file_artifact", {"filename": ".hidden", "content": "x", "overwrite": True}),
    ("write_file_artifact", {"filename": "résumé 2030.md", "content": "x"}),
    ("http_health_check_local", {"url": "http://127.0.0.1:8000/healthz"}),
    ("http_health_check_local", {"url": "http://localhost/"}),
    ("http_health_check_local", {"url": "http://[::1]:9/x"}),
    ("http_health_check_local", {"url": "http://127.5.6.7/"}),
    ("http_health_check_local", {"url": "https://LOCALHOST:8443/?q=1", "timeout_seconds": 30, "expect_status": 204}),
]


@pytest.mark.parametrize(("name", "config"), VALID_CONFIGS)
def test_valid_configs_are_accepted(name, config):
    assert validate_config(name, config) == (config or {})


@pytest.mark.parametrize(
    ("name", "config", "key"),
    [
        ("sleep_for_seconds", {}, "seconds"),
        ("sleep_for_seconds", {"seconds": True}, "seconds"),
        ("sleep_for_seconds", {"seconds": "5"}, "seconds"),
        ("sleep_for_seconds", {"seconds": None}, "seconds"),
        ("sleep_for_seconds", {"seconds": 0}, "seconds"),
        ("sleep_for_seconds", {"seconds": -1}, "seconds"),
        ("sleep_for_seconds", {"seconds": 301}, "seconds"),
        ("sleep_for_seconds", {"seconds": float("nan")}, "seconds"),
        ("sleep_for_seconds", {"seconds": float("inf")}, "seconds"),
        ("sleep_for_seconds", {"seconds": 1, "extra": 1}, "extra"),
        ("always_succeed", {"msg": "typo"}, "msg"),
        ("always_succeed", {"message": "x" * 1001}, "message"),
        ("always_fail", {"message": 3}, "message"),
        ("fail_once_then_succeed", {"anything": 1}, "anything"),
        ("generate_report", {"hours": 0}, "hours"),
        ("generate_report", {"hours": 721}, "hours"),
        ("generate_report", {"hours": 1.5}, "hours"),
        ("generate_report", {"hours": True}, "hours"),
        ("generate_report", {"title": ""}, "title"),
        ("cleanup_old_runs", {"dry_run": "yes"}, "dry_run"),
        ("cleanup_old_runs", {"dry_run": 1}, "dry_run"),
        ("cleanup_old_runs", {"keep": 3}, "keep"),
        ("write_file_artifact", {"content": "x"}, "filename"),
        ("write_file_artifact", {"filename": "a.txt"}, "content"),
        ("write_file_artifact", {"filename": "a.txt", "content": "x", "overwrite": "no"}, "overwrite"),
        ("write_file_artifact", {"filename": "a.txt", "content": "x" * 1_000_001}, "content"),
        ("http_health_check_local", {}, "url"),
        ("http_health_check_local", {"url": "http://localhost/", "timeout_seconds": 0}, "timeout_seconds"),
        ("http_health_check_local", {"url": "http://localhost/", "timeout_seconds": 31}, "timeout_seconds"),
        ("http_health_check_local", {"url": "http://localhost/", "timeout_seconds": True}, "timeout_seconds"),
        ("http_health_check_local", {"url": "http://localhost/", "expect_status": 99}, "expect_status"),
        ("http_health_check_local", {"url": "http://localhost/", "expect_status": 600}, "expect_status"),
        ("http_health_check_local", {"url": "http://localhost/", "expect_status": "200"}, "expect_status"),
    ],
)
def test_bad_configs_are_refused_naming_the_key(name, config, key):
    assert repr(key) in refusal(name, config)


def test_a_config_that_is_not_an_object_is_refused():
    assert "JSON object" in refusal("always_succeed", ["message"])


@pytest.mark.parametrize(
    "filename",
    [
        "../x",
        "/etc/passwd",
        "a/b",
        "a\\b",
        "..",
        ".",
        "",
        "x\x00",
        "x" * 300,
        "é" * 128,
        "-rf",
        " padded",
        "tab\there",
        "new\nline",
        "bidi\u202etxt.exe",
        "x\ud800",
    ],
)
def test_unsafe_artifact_filenames_are_refused_at_job_creation(filename):
    assert "'filename'" in refusal("write_file_artifact", {"filename": filename, "content": "x"})


def test_a_255_byte_filename_is_the_longest_accepted():
    validate_config("write_file_artifact", {"filename": "x" * 255, "content": ""})
    refusal("write_file_artifact", {"filename": "x" * 256, "content": ""})


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1.example.com/",
        "http://localhost@example.com/",
        "http://user:pw@127.0.0.1/",
        "http://localhost\\@example.com/",
        "ftp://127.0.0.1/",
        "file:///etc/passwd",
        "127.0.0.1:80",
        "//127.0.0.1/",
        "http://10.0.0.1/",
        "http://example.com/",
        "http://2130706433/",
        "http://0x7f.0.0.1/",
        "http://0x7f.1/",
        "http://017700000001/",
        "http://127.000.0.1/",
        "http://127.1/",
        "http://127.0.0.256/",
        "http://0.0.0.0/",
        "http://[::2]/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::1%25eth0]/",
        "http://[::1/",
        "http://::1/",
        "http://localhost./",
        "http://localhost:0/",
        "http://localhost:99999/",
        "http://localhost:-1/",
        "http://local\nhost/",
        "http://ｌｏｃａｌｈｏｓｔ/",
        "http:///path",
    ],
)
def test_non_loopback_or_tricky_urls_are_refused(url):
    assert "'url'" in refusal("http_health_check_local", {"url": url})


# --- running tasks -----------------------------------------------------------------------------


def test_sleep_for_seconds_sleeps_and_says_so(tmp_path, capsys):
    run_task("sleep_for_seconds", {"seconds": 0.01}, make_context(tmp_path))
    assert capsys.readouterr().out == "slept for 0.01 s\n"


def test_always_succeed_prints_ok_or_the_message(tmp_path, capsys):
    ctx = make_context(tmp_path)
    assert run_task("always_succeed", {}, ctx) is None
    run_task("always_succeed", {"message": "hi"}, ctx)
    assert capsys.readouterr().out == "ok\nhi\n"


def test_always_fail_raises_the_message(tmp_path):
    with pytest.raises(RuntimeError, match="boom"):
        run_task("always_fail", {"message": "boom"}, make_context(tmp_path))
    with pytest.raises(RuntimeError):
        run_task("always_fail", {}, make_context(tmp_path))


def test_fail_once_then_succeed_fails_succeeds_and_starts_over(tmp_path, capsys):
    ctx = make_context(tmp_path)
    other_key = replace(ctx, idempotency_key="another occurrence")
    with pytest.raises(RuntimeError, match="failing once"):
        run_task("fail_once_then_succeed", {}, ctx)
    with pytest.raises(RuntimeError):  # markers are per idempotency key
        run_task("fail_once_then_succeed", {}, other_key)
    run_task("fail_once_then_succeed", {}, replace(ctx, attempt=2))
    assert "succeeding" in capsys.readouterr().out
    with pytest.raises(RuntimeError):  # the marker was removed: a fresh cycle
        run_task("fail_once_then_succeed", {}, ctx)
    # Marker names are hashes, never the operator-influenced key itself.
    assert all(name.startswith("fail-once-") and "/" not in name for name in os.listdir(ctx.marker_dir))


def test_write_file_artifact_writes_inside_the_artifact_dir(tmp_path, capsys):
    ctx = make_context(tmp_path)
    run_task("write_file_artifact", {"filename": "out.txt", "content": "héllo"}, ctx)
    assert (tmp_path / "artifacts" / "out.txt").read_text(encoding="utf-8") == "héllo"
    assert "6 bytes" in capsys.readouterr().out


def test_write_file_artifact_refuses_to_overwrite_unless_asked(tmp_path):
    ctx = make_context(tmp_path)
    run_task("write_file_artifact", {"filename": "out.txt", "content": "first, longer"}, ctx)
    with pytest.raises(FileExistsError, match="overwrite"):
        run_task("write_file_artifact", {"filename": "out.txt", "content": "second"}, ctx)
    run_task("write_file_artifact", {"filename": "out.txt", "content": "third", "overwrite": True}, ctx)
    assert (tmp_path / "artifacts" / "out.txt").read_text() == "third"


@pytest.mark.parametrize("overwrite", [False, True])
def test_write_file_artifact_refuses_a_symlink_planted_in_the_artifact_dir(tmp_path, overwrite):
    ctx = make_context(tmp_path)
    artifacts, outside = tmp_path / "artifacts", tmp_path / "outside"
    artifacts.mkdir()
    outside.mkdir()
    (outside / "victim").write_text("precious")
    (artifacts / "escape").symlink_to(outside / "victim")
    (artifacts / "dangling").symlink_to(outside / "new-file")
    (artifacts / "inner").write_text("inner")
    (artifacts / "alias").symlink_to(artifacts / "inner")
    for name in ("escape", "dangling", "alias"):
        with pytest.raises(OSError, match="refusing|already exists"):
            run_task("write_file_artifact", {"filename": name, "content": "pwned", "overwrite": overwrite}, ctx)
    assert (outside / "victim").read_text() == "precious"
    assert not (outside / "new-file").exists()
    assert (artifacts / "inner").read_text() == "inner"


def test_write_file_artifact_refuses_hard_links_and_fifos_when_overwriting(tmp_path):
    ctx = make_context(tmp_path)
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    (tmp_path / "victim").write_text("precious")
    os.link(tmp_path / "victim", artifacts / "linked")
    os.mkfifo(artifacts / "pipe")
    for name in ("linked", "pipe"):
        with pytest.raises(OSError, match="refusing"):
            run_task("write_file_artifact", {"filename": name, "content": "pwned", "overwrite": True}, ctx)
    assert (tmp_path / "victim").read_text() == "precious"


def test_write_file_artifact_checks_the_name_again_at_run_time(tmp_path):
    """A config stored before a rule existed (or written around the form) is still refused."""
    with pytest.raises(ValueError, match="filename"):
        get_task("write_file_artifact").run({"filename": "../x", "content": "x"}, make_context(tmp_path))
    assert not (tmp_path / "x").exists()


@settings(max_examples=300, deadline=None)
@given(
    filename=st.one_of(
        st.text(max_size=40),
        st.text(alphabet="./\\\x00-é ", max_size=12),
        st.lists(st.sampled_from(["..", ".", "/", "\\", "a", "%2e", "\x00"]), max_size=6).map("".join),
    )
)
def test_no_filename_lets_write_file_artifact_write_outside_the_artifact_dir(filename):
    config = {"filename": filename, "content": "x", "overwrite": True}
    try:
        validate_config("write_file_artifact", config)
    except TaskConfigError:
        return
    with tempfile.TemporaryDirectory() as sandbox:
        ctx = make_context(_Path(sandbox))
        get_task("write_file_artifact").run(config, ctx)
        assert os.listdir(sandbox) == ["artifacts"]
        assert os.listdir(ctx.artifact_dir) == [filename]


class _Path(str):
    """Just enough of pathlib for make_context, without tmp_path (hypothesis reruns the body)."""

    def __truediv__(self, other: str) -> str:
        return os.path.join(self, other)


def test_generate_report_counts_recent_executions_on_sqlite(tmp_path, capsys):
    database = tmp_path / "report.db"
    with sqlite3.connect(database) as connection:
        connection.executescript(
            """
            CREATE TABLE jobs (id INTEGER PRIMARY KEY, name TEXT, retention_count INT, retention_days INT);
            CREATE TABLE executions (id INTEGER PRIMARY KEY, job_id INT, status TEXT,
                                     finished_at DATETIME, created_at DATETIME);
            INSERT INTO jobs (id, name) VALUES (1, 'nightly'), (2, 'flaky'), (3, 'fine');
            INSERT INTO executions (job_id, status, created_at) VALUES
                (1, 'failed', datetime('now', '-1 hour')),
                (2, 'failed', datetime('now', '-2 hours')),
                (2, 'timed_out', datetime('now', '-3 hours')),
                (3, 'succeeded', datetime('now', '-1 hour')),
                (1, 'failed', datetime('now', '-30 hours'));
            """
        )
    ctx = make_context(tmp_path, database_url=f"sqlite:///{database}")
    run_task("generate_report", {"title": "Daily", "hours": 24}, ctx)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Daily"
    assert lines[2].split() == ["failed", "2"]
    assert lines[3].split() == ["succeeded", "1"]
    assert lines[4].split() == ["timed_out", "1"]
    assert lines[5].split() == ["total", "4"]
    assert [line.split() for line in lines[7:]] == [["flaky", "2"], ["nightly", "1"]]


# --- http_health_check_local against a real server on 127.0.0.1 --------------------------------


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's naming)
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "http://example.com/")
        else:
            self.send_response(500 if self.path == "/fail" else 200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format, *args):  # keep test output quiet
        pass


@pytest.fixture(scope="module")
def local_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_health_check_passes_on_the_expected_status(local_server, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("http_proxy", "http://proxy.invalid:3128")  # must be ignored
    run_task("http_health_check_local", {"url": f"{local_server}/healthz"}, make_context(tmp_path))
    out = capsys.readouterr().out
    assert "200" in out and " ms" in out


def test_health_check_fails_on_an_unexpected_status(local_server, tmp_path):
    with pytest.raises(RuntimeError, match="500"):
        run_task("http_health_check_local", {"url": f"{local_server}/fail"}, make_context(tmp_path))
    config = {"url": f"{local_server}/fail", "expect_status": 500}
    run_task("http_health_check_local", config, make_context(tmp_path))


def test_health_check_does_not_follow_redirects(local_server, tmp_path):
    with pytest.raises(RuntimeError, match="302"):
        run_task("http_health_check_local", {"url": f"{local_server}/redirect"}, make_context(tmp_path))
    config = {"url": f"{local_server}/redirect", "expect_status": 302}
    run_task("http_health_check_local", config, make_context(tmp_path))


def test_health_check_reports_a_refused_connection(tmp_path):
    with socket.socket() as probe:  # a port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ConnectionError, match="connection refused"):
        config = {"url": f"http://127.0.0.1:{port}/", "timeout_seconds": 2}
        run_task("http_health_check_local", config, make_context(tmp_path))


def test_health_check_rechecks_the_url_at_run_time(tmp_path):
    with pytest.raises(ValueError, match="not loopback"):
        get_task("http_health_check_local").run({"url": "http://example.com/"}, make_context(tmp_path))
