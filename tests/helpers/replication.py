"""A PostgreSQL primary with a streaming replica, both private clusters on free loopback ports, for
the failover scenario (tests/faults/test_failover.py).

The replica is made with `pg_basebackup -R` from the primary and streams from it through a
`TcpProxy` (tests/helpers/hosts.py), so the test can hold replication back (`lag()`: WAL stops at
the proxy, exactly what a slow or cut replication link does) before it kills the primary. With
`synchronous=True` the primary waits for the replica to flush each commit
(`synchronous_standby_names`), so a commit held back by the lag is never acknowledged; without it
commits are acknowledged at once and whatever the replica had not received when the primary died
is lost: the asynchronous loss window the test measures.

Everything is stopped and removed by `destroy()`; every start, stop and promotion is bounded.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import psycopg

from tests.helpers.hosts import TcpProxy
from tests.helpers.servers import PG_BIN, PrivatePostgres, _poll, free_port


class Cluster(PrivatePostgres):
    """A private cluster with replication settings (durable commits: synchronous_commit on)."""

    extra: str = ""

    def _pg_ctl(self, *args: str, timeout: float = 60) -> None:
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c full_page_writes=off -c max_connections=200 -c wal_level=replica -c max_wal_senders=5 "
            f"-c wal_keep_size=256MB -c hot_standby=on {self.extra}"
        )
        self._as_postgres(
            [str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o", options, *args],
            timeout=timeout,
        )

    def kill(self) -> None:
        """Crash it: immediate shutdown, no checkpoint, sessions cut (as when the machine dies)."""
        if self.running():
            self._pg_ctl("stop", "-m", "immediate")

    def in_recovery(self) -> bool:
        with psycopg.connect(self.admin_url, connect_timeout=2) as conn:
            return conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]


class Standby(Cluster):
    """A replica cloned from `primary` with pg_basebackup, streaming through `link`."""

    def __init__(self, primary: Cluster, link: TcpProxy) -> None:  # no initdb: a base backup instead
        self.owner = primary.owner
        self.root = Path(tempfile.mkdtemp(prefix="cronwell-fault-replica-"))
        os.chown(self.root, self.owner.pw_uid, self.owner.pw_gid)
        self.data = self.root / "data"
        self.port = free_port()
        self.log = self.root / "server.log"
        self._as_postgres(
            [
                str(PG_BIN / "pg_basebackup"),
                "-D",
                str(self.data),
                "-h",
                "127.0.0.1",
                "-p",
                str(primary.port),
                "-U",
                "postgres",
                "-X",
                "stream",
                "-c",
                "fast",
                "--no-sync",
                "-R",
            ],
            timeout=120,
        )
        with open(self.data / "postgresql.auto.conf", "a") as conf:
            conf.write(
                f"\nprimary_conninfo = 'host=127.0.0.1 port={link.port} user=postgres application_name=replica1'\n"
            )

    def promote(self) -> None:
        self._as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60", "promote"], timeout=90)
        if not _poll(lambda: not self.in_recovery(), 30):
            raise RuntimeError(f"the replica was not promoted:\n{self.server_log()}")


class ReplicatedPostgres:
    """A primary and one streaming replica; `synchronous` makes the primary wait for it."""

    def __init__(self, *, synchronous: bool) -> None:
        self.synchronous = synchronous
        self.primary = Cluster()
        if synchronous:
            self.primary.extra = "-c synchronous_standby_names=replica1 -c synchronous_commit=on"
        self.link: TcpProxy | None = None
        self.replica: Standby | None = None

    def start(self) -> None:
        self.primary.start()
        self.link = TcpProxy(self.primary.port)
        self.replica = Standby(self.primary, self.link)
        self.replica.start()
        if not _poll(self.streaming, 30):
            raise RuntimeError(f"the replica is not streaming:\n{self.replica.server_log()}")

    def streaming(self) -> bool:
        with psycopg.connect(self.primary.admin_url, connect_timeout=2, autocommit=True) as conn:
            row = conn.execute("SELECT state, sync_state FROM pg_stat_replication").fetchone()
        wanted = "sync" if self.synchronous else "async"
        return row is not None and row[0] == "streaming" and row[1] == wanted

    def caught_up(self) -> bool:
        """The replica has replayed everything the primary has written."""
        with psycopg.connect(self.primary.admin_url, connect_timeout=2, autocommit=True) as conn:
            row = conn.execute(
                "SELECT replay_lsn >= pg_current_wal_lsn() FROM pg_stat_replication WHERE state = 'streaming'"
            ).fetchone()
        return bool(row and row[0])

    def multi_host_url(self, database: str) -> str:
        """What the processes use: libpq's multi-host form, the primary first."""
        return (
            f"postgresql://postgres@127.0.0.1:{self.primary.port},127.0.0.1:{self.replica.port}/{database}"
            "?target_session_attrs=read-write&connect_timeout=3"
        )

    def lag(self) -> None:
        """Hold replication back: WAL stops at the link (commits wait in synchronous mode)."""
        self.link.freeze()

    def fail_over(self) -> None:
        """Kill the primary, drop whatever WAL was still in flight to the replica, promote it."""
        self.primary.kill()
        self.link.reset()
        self.link.stop()
        self.replica.promote()

    def destroy(self) -> None:
        if self.link is not None:
            self.link.stop()
        for cluster in (self.replica, self.primary):
            if cluster is not None:
                try:
                    cluster.stop()
                except Exception:  # noqa: BLE001 - best effort; the directory goes anyway
                    pass
                shutil.rmtree(cluster.root, ignore_errors=True)
