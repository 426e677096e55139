"""Fixtures for the REST API tests: a JSON client, people of each role in two organizations."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from app.clock import utcnow
from app.services.caller import Caller
from app.services.use_cases import tenancy
from tests.factories import make_user
from tests.helpers.api import PASSWORD, ApiClient
from tests.helpers.processes import PROJECT_ROOT, wait_for
from tests.helpers.scenario import http_get
from tests.helpers.servers import free_port


@pytest.fixture
def other_org(app):
    """A second organization `acme` with its project `acme/main`."""
    system = Caller.system()
    tenancy.add_organization("acme", now=utcnow(), caller=system)
    return tenancy.add_project("acme", "main", now=utcnow(), caller=system)


@pytest.fixture
def people(app):
    """admin, operator and viewer of the default organization."""
    return {role: make_user(role, PASSWORD, role=role) for role in ("admin", "operator", "viewer")}


@pytest.fixture
def api(app):
    return ApiClient(app)


@pytest.fixture
def cli(app):
    """Run `flask ARGS...` in-process with Click's runner; stdout and stderr come apart."""
    runner = app.test_cli_runner()

    def invoke(*args, **kwargs):
        return runner.invoke(args=[str(a) for a in args], **kwargs)

    return invoke


@pytest.fixture
def api_server(app, app_env, tmp_path):
    """A real gunicorn serving the app on a free loopback port, on the test's database.

    Yields (base URL, log path). One worker, so a denylist or a rate limit held in memory is the
    server's own; the process is stopped (SIGTERM, then killed) at the end."""
    port = free_port()
    env = {
        **os.environ,
        **app_env,
        "GUNICORN_BIND": f"127.0.0.1:{port}",
        "GUNICORN_WORKERS": "1",
        "GUNICORN_THREADS": "4",
        "LOG_FORMAT": "json",
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prometheus"),
        "API_AUTH_RATE_LIMIT": "100000 per minute",
        "API_TOKEN_RATE_LIMIT": "100000 per minute",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("REDIS_URL", None)
    log_path = tmp_path / "gunicorn.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--config", "gunicorn.conf.py", "wsgi:app"],
            cwd=PROJECT_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(
            lambda: process.poll() is None and http_get(f"{base}/healthz")[0] == 200,
            within=60,
            interval=0.2,
            what=lambda: f"gunicorn to answer\n{log_path.read_text(errors='replace')[-3000:]}",
        )
        yield base, log_path
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
