"""End-to-end fixtures: a real Cronwell (gunicorn + `flask scheduler run` + `flask worker run`) on a
temporary SQLite database, and Debian's headless Chromium driven by Playwright.

No tool downloads a browser: Chromium comes from the `chromium` Debian package at
/usr/bin/chromium (override with CRONWELL_CHROMIUM). Run with `pytest -m e2e tests/e2e`.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.helpers.servers import REDIS_URL, free_port

PROJECT_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = PROJECT_ROOT / "test-artifacts"
CHROMIUM = os.environ.get("CRONWELL_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
ADMIN_PASSWORD = "e2e-password-1"
BIN = Path(sys.executable).parent


def _redis_reachable() -> bool:
    try:
        import redis

        return bool(redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping())
    except Exception:  # noqa: BLE001 - any failure means "run without Redis"
        return False


class Stack:
    """The running processes and where their logs go."""

    def __init__(self, workdir: Path, env: dict, base_url: str) -> None:
        self.workdir, self.env, self.base_url = workdir, env, base_url
        self.processes: dict[str, subprocess.Popen] = {}

    def run(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess:  # noqa: A002 - subprocess's name
        return subprocess.run(
            [str(BIN / "flask"), *args],
            cwd=PROJECT_ROOT,
            env=self.env,
            input=input,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )

    def start(self, name: str, argv: list[str]) -> None:
        log = open(self.workdir / f"{name}.log", "w")
        self.processes[name] = subprocess.Popen(
            argv, cwd=PROJECT_ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def logs(self) -> str:
        parts = []
        for name in self.processes:
            text = (self.workdir / f"{name}.log").read_text(errors="replace")
            parts.append(f"----- {name} (last 3000 chars) -----\n{text[-3000:]}")
        return "\n".join(parts)

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for process in self.processes.values():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """Migrated database, an admin account, then the web server, a scheduler and a worker."""
    workdir = tmp_path_factory.mktemp("e2e")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLASK_", "CRONWELL_", "WEBUI_"))}
    env.update(
        {
            "FLASK_APP": "app",
            "DATABASE_URL": f"sqlite:///{workdir / 'cronwell.sqlite3'}",
            "INSTANCE_DIR": str(workdir / "instance"),
            "SECRET_KEY": uuid.uuid4().hex,
            "CHANNEL_SECRET_KEY": base64.urlsafe_b64encode(os.urandom(32)).decode(),
            "DEBUG": "0",
            "LOG_FORMAT": "text",
            "LOG_LEVEL": "INFO",
            "DEV_ADMIN_PASSWORD": ADMIN_PASSWORD,
            "SCHEDULER_TICK_SECONDS": "1",
            "WORKER_POLL_SECONDS": "1",
            "HEARTBEAT_STALE_SECONDS": "30",
        }
    )
    env.pop("SCHEDULER_CLI_SECRET", None)
    env.pop("REDIS_URL", None)
    if _redis_reachable():
        # Shared cache across the three processes, under a prefix nobody else uses.
        env.update({"REDIS_URL": REDIS_URL, "CACHE_KEY_PREFIX": f"cronwell-e2e-{uuid.uuid4().hex}:"})
    stack = Stack(workdir, env, f"http://127.0.0.1:{port}")
    stack.run("db", "upgrade")
    stack.run("ensure-dev-user")
    stack.start(
        "web",
        [str(BIN / "gunicorn"), "--workers", "2", "--bind", f"127.0.0.1:{port}", "--graceful-timeout", "5", "wsgi:app"],
    )
    stack.start("scheduler", [str(BIN / "flask"), "scheduler", "run", "--tick-seconds", "1"])
    stack.start("worker", [str(BIN / "flask"), "worker", "run", "--workers", "2"])
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(stack.base_url + "/healthz", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("the web server did not come up\n" + stack.logs())
            time.sleep(0.2)
        yield stack
    finally:
        stack.stop()
        if env.get("CACHE_KEY_PREFIX"):
            import redis

            client = redis.Redis.from_url(REDIS_URL)
            keys = list(client.scan_iter(match=env["CACHE_KEY_PREFIX"] + "*"))
            if keys:
                client.delete(*keys)


@pytest.fixture(scope="session")
def browser():
    """One Chromium for every browser test of the process (`make test` keeps them on one worker)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium package (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield instance
        instance.close()


@pytest.fixture
def page(browser):
    """A fresh browser context; console errors (CSP violations above all) are collected."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.console_errors = []  # type: ignore[attr-defined]

    def on_console(msg) -> None:
        # A form answered with 400 (inline validation errors) is expected; everything else,
        # CSP refusals above all, is not.
        if msg.type == "error" and "status of 400" not in msg.text:
            page.console_errors.append(msg.text)

    page.on("console", on_console)
    page.on("pageerror", lambda exc: page.console_errors.append(str(exc)))
    yield page
    context.close()


@pytest.fixture(scope="session", autouse=True)
def artifacts_dir():
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
