"""A private PgBouncer in transaction-pooling mode in front of the shared PostgreSQL, on a free
loopback port, for as long as a `with` block lasts (Debian's `pgbouncer`, which .ci/run installs).

Its pool is deliberately small (`pool_size` server sessions for every client), so that clients
really do share server sessions transaction by transaction: what breaks behind a transaction
pooler (a prepared statement or a session setting meeting another client's session, a LISTEN
on a session that is lent out) breaks here too.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import pytest

from tests.helpers.databases import IN_CI
from tests.helpers.servers import free_port

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


def require_pgbouncer() -> None:
    if not os.access(PGBOUNCER, os.X_OK):
        message = f"pgbouncer not installed at {PGBOUNCER} (apt-get install pgbouncer)"
        if IN_CI:
            pytest.fail(message + " (CI=true: this test must run)")
        pytest.skip(message)


class PgBouncer:
    def __init__(self, *, upstream_port: int = 5432, pool_size: int = 2) -> None:
        self.port = free_port()
        self.upstream_port = upstream_port
        self.pool_size = pool_size
        self.directory = Path(tempfile.mkdtemp(prefix="cronwell-pgbouncer-"))
        self.process: subprocess.Popen | None = None

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    @property
    def log(self) -> str:
        path = self.directory / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def __enter__(self) -> PgBouncer:
        require_pgbouncer()
        d = self.directory
        (d / "users.txt").write_text('"postgres" ""\n')
        (d / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"* = host=127.0.0.1 port={self.upstream_port}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {d / 'users.txt'}\nadmin_users = postgres\n"
            f"pool_mode = transaction\ndefault_pool_size = {self.pool_size}\nmin_pool_size = 0\n"
            "reserve_pool_size = 0\nmax_client_conn = 200\nserver_reset_query =\n"
            "ignore_startup_parameters = extra_float_digits,options\n"
            f"logfile = {d / 'pgbouncer.log'}\npidfile = {d / 'pgbouncer.pid'}\n"
        )
        os.chmod(d, 0o777)
        for name in ("users.txt", "pgbouncer.ini"):
            os.chmod(d / name, 0o644)
        command = [PGBOUNCER, str(d / "pgbouncer.ini")]
        if os.geteuid() == 0:  # PgBouncer refuses to run as root
            command[1:1] = ["-u", "postgres"]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while True:
            try:
                with psycopg.connect(self.url("postgres"), connect_timeout=2, autocommit=True) as conn:
                    conn.execute("SELECT 1")
                return self
            except psycopg.OperationalError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.__exit__(None, None, None)
                    pytest.fail(f"pgbouncer did not start on port {self.port}:\n{self.log}")
                time.sleep(0.1)

    def show(self, what: str) -> list[dict]:
        """`SHOW <what>` on PgBouncer's admin console, as dicts."""
        with psycopg.connect(self.url("pgbouncer"), autocommit=True, prepare_threshold=None) as conn:
            cursor = conn.execute(f"SHOW {what}")
            names = [column.name for column in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def __exit__(self, *exc) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        shutil.rmtree(self.directory, ignore_errors=True)
