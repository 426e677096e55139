"""Servers for tests: free ports, the shared Redis, and private servers for the fault scenarios (a
PostgreSQL cluster and a Redis that the test owns, so it can stop, restart and cut them off
without touching the shared servers on 5432 and 6379).

The private servers listen on loopback only, on a free port, with their files in a temporary directory that is
removed at the end. Every start and stop is bounded in time.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import pytest

from tests.helpers.databases import IN_CI

PG_BIN = Path(os.environ.get("CRONWELL_PG_BIN", "/usr/lib/postgresql/15/bin"))
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


REDIS_URL = os.environ.get("CRONWELL_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def require_redis() -> None:
    """Skip the test when the shared Redis is unreachable; fail it under CI=true."""
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except Exception as exc:  # noqa: BLE001 - any failure means unreachable
        message = f"Redis unreachable at {REDIS_URL}: {exc}"
        if IN_CI:
            pytest.fail(message + " (CI=true: this test must run)")
        pytest.skip(message)


def _unavailable(message: str) -> None:
    if IN_CI:
        pytest.fail(message + " (CI=true: the fault scenarios must run)")
    pytest.skip(message)


def _poll(condition, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


class PrivatePostgres:
    """A throw-away PostgreSQL cluster run as the `postgres` user (trust auth, loopback only)."""

    def __init__(self) -> None:
        if not (PG_BIN / "initdb").exists():
            _unavailable(f"no PostgreSQL binaries in {PG_BIN}")
        try:
            self.owner = pwd.getpwnam("postgres")
        except KeyError:
            _unavailable("no `postgres` system user to run a private cluster")
        self.root = Path(tempfile.mkdtemp(prefix="cronwell-fault-pg-"))
        os.chown(self.root, self.owner.pw_uid, self.owner.pw_gid)
        self.data = self.root / "data"
        self.port = free_port()
        self.log = self.root / "server.log"
        self._as_postgres(
            [str(PG_BIN / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"],
            timeout=120,
        )

    def _as_postgres(self, argv: list[str], timeout: float) -> subprocess.CompletedProcess:
        result = subprocess.run(
            ["runuser", "-u", "postgres", "--", *argv], capture_output=True, text=True, timeout=timeout, cwd=self.root
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"{' '.join(argv)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}\n{self.server_log()}"
            )
        return result

    def server_log(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""

    @property
    def admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _pg_ctl(self, *args: str, timeout: float = 60) -> None:
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        self._as_postgres(
            [str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o", options, *args],
            timeout=timeout,
        )

    def start(self) -> None:
        self._pg_ctl("start")
        if not _poll(self.accepting, 30):
            raise RuntimeError(f"private PostgreSQL did not accept connections:\n{self.server_log()}")

    def stop(self) -> None:
        """Fast shutdown: open sessions are terminated, as in a real restart or failover."""
        if self.running():
            self._pg_ctl("stop", "-m", "fast")

    def restart(self) -> None:
        self._pg_ctl("restart", "-m", "fast")
        if not _poll(self.accepting, 30):
            raise RuntimeError(f"private PostgreSQL did not come back:\n{self.server_log()}")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def accepting(self) -> bool:
        try:
            with psycopg.connect(self.admin_url, connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def create_database(self, name: str, template: str | None = None) -> str:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        return self.url(name)

    def destroy(self) -> None:
        try:
            self.stop()
        except Exception:  # noqa: BLE001 - best effort; the directory goes anyway
            pass
        shutil.rmtree(self.root, ignore_errors=True)


class PrivateRedis:
    """A Redis on a free loopback port with no persistence, stopped and started at will."""

    def __init__(self) -> None:
        if not Path(REDIS_SERVER).exists():
            _unavailable("no redis-server binary")
        self.root = Path(tempfile.mkdtemp(prefix="cronwell-fault-redis-"))
        self.port = free_port()
        self.pidfile = self.root / "redis.pid"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        subprocess.run(
            [
                REDIS_SERVER,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "yes",
                "--pidfile",
                str(self.pidfile),
                "--dir",
                str(self.root),
                "--logfile",
                str(self.root / "redis.log"),
            ],
            check=True,
            timeout=30,
            capture_output=True,
        )
        if not _poll(self.accepting, 15):
            raise RuntimeError("private Redis did not start")

    def stop(self) -> None:
        pid = self._pid()
        if pid is None:
            return
        try:
            os.kill(pid, 15)
        except ProcessLookupError:
            return
        if not _poll(lambda: not Path(f"/proc/{pid}").exists(), 15):
            os.kill(pid, 9)
        self.pidfile.unlink(missing_ok=True)

    def freeze(self) -> None:
        """SIGSTOP: the port stays open but nothing answers (a hung server, not a refused one)."""
        os.kill(self._pid(), signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self._pid(), signal.SIGCONT)

    def _pid(self) -> int | None:
        try:
            return int(self.pidfile.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def accepting(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def destroy(self) -> None:
        if self._pid() is not None:
            try:
                self.thaw()
            except ProcessLookupError:
                pass
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
