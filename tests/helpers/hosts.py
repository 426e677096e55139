"""Many "hosts" on one machine, for the fault scenarios of tests/faults/: each host reaches
PostgreSQL through its own TCP proxy on a loopback port that the test controls, so one host can
be cut off while the others carry on, and may run with its clock offset.

    hosts = Hosts(processes, database_url)
    a = hosts.add("a")                         # proxy on a free loopback port -> the database
    b = hosts.add("b", clock_offset=30)        # this host's clock runs 30 s ahead
    worker = hosts.start_worker(a, "--workers", "2")
    a.proxy.partition()                        # new connections hang, existing ones freeze
    a.proxy.heal()
    hosts.close()                              # proxies stopped (processes: FlaskProcesses.cleanup)

The proxy forwards bytes with one thread per direction of each connection. Its faults:
`drop_new("refuse")` resets new connections at once (a host whose packets are rejected),
`drop_new("blackhole")` accepts them and never answers (packets silently dropped: the client
hangs until its own timeout), `freeze()` stops forwarding on open connections in both directions
(the peers see silence, as when a link goes down without a reset), `reset()` closes every open
connection with a TCP RST, `heal()` forwards again (frozen connections resume, blackholed ones are
reset). Everything listens on 127.0.0.1 only.

This module lives in tests/helpers/ (not tests/faults/) because test modules may import shared
code only from here (tests/unit/test_layers.py).
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from tests.helpers.processes import FlaskProcess, FlaskProcesses

CHUNK = 64 * 1024


def _rst_close(sock: socket.socket) -> None:
    """Close with a TCP RST instead of a FIN (SO_LINGER 0)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


class _Link:
    """One proxied connection: the client's socket, the upstream socket, two pump threads."""

    def __init__(self, proxy: TcpProxy, client: socket.socket, upstream: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream = upstream
        self.closed = False

    def start(self) -> None:
        for source, sink in ((self.client, self.upstream), (self.upstream, self.client)):
            threading.Thread(target=self._pump, args=(source, sink), daemon=True, name="proxy-pump").start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while not self.closed:
                self.proxy._flowing.wait()
                data = source.recv(CHUNK)
                if not data:
                    break
                self.proxy._flowing.wait()  # frozen after reading: hold the chunk until healed
                if self.closed:
                    break
                sink.sendall(data)
        except OSError:
            pass
        self.close()

    def close(self, *, rst: bool = False) -> None:
        if self.closed:
            return
        self.closed = True
        for sock in (self.client, self.upstream):
            if rst:
                _rst_close(sock)
            else:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
        self.proxy._forget(self)


class TcpProxy:
    """A loopback TCP proxy to `target_port` whose faults the test switches on and off."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self.port = self._listener.getsockname()[1]
        self.new_connections = "forward"  # | "refuse" | "blackhole"
        self._flowing = threading.Event()
        self._flowing.set()
        self._links: set[_Link] = set()
        self._held: list[socket.socket] = []  # blackholed connections
        self._lock = threading.Lock()
        self._running = True
        self.accepted = 0
        self._thread = threading.Thread(target=self._accept_loop, daemon=True, name=f"proxy-{self.port}")
        self._thread.start()

    # --- faults -------------------------------------------------------------------------------

    def drop_new(self, how: str = "refuse") -> None:
        if how not in ("refuse", "blackhole"):
            raise ValueError(how)
        self.new_connections = how

    def freeze(self) -> None:
        self._flowing.clear()

    def reset(self) -> None:
        with self._lock:
            links = list(self._links)
        for link in links:
            link.close(rst=True)

    def partition(self) -> None:
        """The host is cut off: new connections hang, open ones go silent."""
        self.drop_new("blackhole")
        self.freeze()

    def heal(self) -> None:
        self.new_connections = "forward"
        with self._lock:
            held, self._held = self._held, []
        for sock in held:
            _rst_close(sock)
        self._flowing.set()

    def open_connections(self) -> int:
        with self._lock:
            return len(self._links)

    def stop(self) -> None:
        self._running = False
        self._flowing.set()
        try:
            self._listener.close()
        except OSError:
            pass
        self.reset()
        self.heal()
        self._thread.join(timeout=5)

    # --- plumbing -----------------------------------------------------------------------------

    def _forget(self, link: _Link) -> None:
        with self._lock:
            self._links.discard(link)

    def _accept_loop(self) -> None:
        self._listener.settimeout(0.2)
        while self._running:
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            mode = self.new_connections
            if mode == "refuse":
                _rst_close(client)
                continue
            if mode == "blackhole":
                with self._lock:
                    self._held.append(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                _rst_close(client)
                continue
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _Link(self, client, upstream)
            with self._lock:
                self._links.add(link)
            link.start()


def with_port(url: str, port: int) -> str:
    """`url` with its host:port replaced by 127.0.0.1:`port`."""
    parts = urlsplit(url)
    user = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{port}"))


@dataclass
class Host:
    """One simulated machine: its own way to the database and its own clock."""

    name: str
    proxy: TcpProxy
    database_url: str  # through the proxy
    clock_offset: float = 0.0
    processes: list[FlaskProcess] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        return {"DATABASE_URL": self.database_url, "CRONWELL_CLOCK_OFFSET_SECONDS": str(self.clock_offset)}


class Hosts:
    """Hosts sharing one database, each behind its own proxy; processes started per host."""

    def __init__(self, processes: FlaskProcesses, database_url: str) -> None:
        self.processes = processes
        self.database_url = database_url
        self.hosts: dict[str, Host] = {}
        target = urlsplit(database_url)
        self._target_port = target.port or 5432

    def add(self, name: str, *, clock_offset: float = 0.0) -> Host:
        proxy = TcpProxy(self._target_port)
        host = Host(name, proxy, with_port(self.database_url, proxy.port), clock_offset)
        self.hosts[name] = host
        return host

    def start(self, host: Host, *args: str, env: dict | None = None) -> FlaskProcess:
        process = self.processes.start(*args, env={**host.env(), **(env or {})})
        host.processes.append(process)
        return process

    def start_scheduler(self, host: Host, *args: str, env: dict | None = None) -> FlaskProcess:
        return self.start(host, "scheduler", "run", "--scheduler-id", f"scheduler-{host.name}", *args, env=env)

    def start_worker(self, host: Host, *args: str, env: dict | None = None) -> FlaskProcess:
        return self.start(host, "worker", "run", "--worker-id", f"worker-{host.name}", *args, env=env)

    def close(self) -> None:
        for host in self.hosts.values():
            host.proxy.stop()


# --- what runs where: task processes seen from the process table ---------------------------------


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (FileNotFoundError, ProcessLookupError, ValueError):
        return []


class TaskSampler:
    """Samples, every `interval` seconds, whether each worker process has a task process running
    (a child of its fork server), and measures how long two or more ran at once."""

    def __init__(self, workers: dict[str, FlaskProcess], interval: float = 0.02) -> None:
        self.workers = workers
        self.interval = interval
        self.samples: list[tuple[float, frozenset[str]]] = []
        self._running = True
        self._thread = threading.Thread(target=self._run, daemon=True, name="task-sampler")
        self._thread.start()

    def busy(self, name: str) -> bool:
        worker = self.workers[name]
        return any(_children(zygote) for zygote in _children(worker.pid))

    def _run(self) -> None:
        while self._running:
            at = time.monotonic()
            self.samples.append((at, frozenset(name for name in self.workers if self.busy(name))))
            time.sleep(self.interval)

    def stop(self) -> None:
        self._running = False
        self._thread.join(timeout=5)

    def overlap_seconds(self) -> float:
        """Time during which tasks ran under two or more workers at once (sampling resolution)."""
        total = 0.0
        for (at, busy), (later, _) in zip(self.samples, self.samples[1:]):
            if len(busy) >= 2:
                total += later - at
        return total

    def last_busy(self, name: str) -> float | None:
        times = [at for at, busy in self.samples if name in busy]
        return times[-1] if times else None

    def first_busy_after(self, name: str, moment: float) -> float | None:
        return next((at for at, busy in self.samples if at >= moment and name in busy), None)
