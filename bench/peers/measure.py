"""Running one system's worker processes and measuring them: the ready/go handshake, process-tree
CPU and parent RSS from /proc, the database server's share, stall detection, and stopping
everything (process groups) whatever happens."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")
STARTED: list[subprocess.Popen] = []  # every process this harness started, for the last-resort stop


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()  # fields from `state` (3rd) on


def process_cpu(pid: int, *, with_reaped_children: bool = True) -> float:
    """CPU seconds (user + system) of `pid`, plus its reaped children's when asked."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    if with_reaped_children:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks / CLK_TCK


def descendants(pid: int) -> list[int]:
    """`pid` and every live descendant (from /proc/<pid>/task/*/children)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*") if Path(f"/proc/{current}").exists() else []:
            try:
                todo += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                pass
    return found


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process tree: every live member's own time plus what each has reaped (a
    child that exits and is reaped moves its time into its parent's count, so deltas stay right)."""
    return sum(process_cpu(p) for p in descendants(pid))


def is_alive(pid: int) -> bool:
    """Running and not a zombie (never reaps, so /proc/<pid> stays readable until we wait)."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def peak_rss_mb(pid: int) -> float | None:
    """VmHWM (peak resident set) of `pid` in MB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return None


def machine_busy_seconds() -> float:
    """Busy CPU seconds of the whole machine so far (/proc/stat; includes everyone else's work)."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / CLK_TCK


@dataclass
class Spawn:
    """One process to start: argv, environment, and whether it prints `ready` and waits for `go`."""

    argv: list[str]
    env: dict
    cwd: Path
    handshake: bool = True


@dataclass
class RunFacts:
    go: float = 0.0
    done_at: float = 0.0
    done: int = 0
    cpu_workers_s: float = 0.0
    cpu_server_s: float = 0.0
    machine_busy_s: float = 0.0
    parent_rss_mb: list[float | None] = field(default_factory=list)
    stdout: list[str] = field(default_factory=list)
    loadavg: tuple[float, float, float] = (0.0, 0.0, 0.0)


def start(spawn: Spawn, log: Path) -> subprocess.Popen:
    out = open(log, "ab")
    try:
        proc = subprocess.Popen(
            spawn.argv,
            cwd=spawn.cwd,
            env=spawn.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=out,
            start_new_session=True,  # its own process group: stop() takes the whole tree
        )
    finally:
        out.close()
    STARTED.append(proc)
    return proc


def stop(proc: subprocess.Popen, grace: float = 20.0) -> None:
    """SIGTERM the process (a graceful stop), then SIGKILL its whole group; always reaps."""
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # leftovers of the group (pool children, zygote)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.poll() is None:
        proc.wait(timeout=10)


def stop_all() -> None:
    """Last resort (failure, Ctrl-C): stop everything this harness started that still runs."""
    while STARTED:
        proc = STARTED.pop()
        try:
            stop(proc, grace=5.0)
        except Exception:  # noqa: BLE001 - keep stopping the others
            pass


def _read_line(proc: subprocess.Popen, deadline: float) -> str:
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
            raise TimeoutError(f"{proc.args[:3]} did not get ready in time")
        chunk = os.read(proc.stdout.fileno(), 1)
        if not chunk:
            raise RuntimeError(f"{proc.args[:3]} exited before getting ready (exit {proc.wait()})")
        line += chunk
    return line.decode().strip()


def run(
    spawns: list[Spawn],
    *,
    count: int,
    done: Callable[[], int] | None,
    log: Path,
    server_cpu: Callable[[], float] | None = None,  # cumulative seconds; sampled on every poll
    stall_seconds: float = 90.0,
    timeout: float = 900.0,
    exits_by_itself: bool = True,
) -> RunFacts:
    """Start `spawns`, wait until all are ready, release them at once, poll `done()` (every
    0.1 s) until it reaches `count` (without `done`: until the processes exit), then snapshot CPU
    and RSS and stop them. A run that makes no progress for `stall_seconds` fails."""
    procs = [start(s, log) for s in spawns]
    facts = RunFacts()
    try:
        deadline = time.monotonic() + 120
        for proc, spawn in zip(procs, spawns, strict=True):
            if spawn.handshake and _read_line(proc, deadline) != "ready":
                raise RuntimeError(f"{proc.args[:3]} said something other than ready")
        cpu0 = sum(tree_cpu(p.pid) for p in procs)
        server0 = server_cpu() if server_cpu else 0.0
        machine0 = machine_busy_seconds()
        load0 = os.getloadavg()
        facts.go = time.time()
        for proc in procs:
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
        last_value, last_change, ends = None, time.monotonic(), time.monotonic() + timeout
        rss: list[float | None] = [None] * len(procs)
        while True:
            alive = [is_alive(p.pid) for p in procs]
            rss = [peak_rss_mb(p.pid) or r for p, r in zip(procs, rss, strict=True)]
            if server_cpu:
                server_cpu()
            value = done() if done else sum(not a for a in alive)
            target = count if done else len(procs)
            if value >= target:
                break
            now = time.monotonic()
            if value != last_value:
                last_value, last_change = value, now
            if now - last_change > stall_seconds or now > ends:
                raise RuntimeError(f"no progress for {stall_seconds:g} s (stuck at {value}/{target}); see {log}")
            if done and not any(alive):
                raise RuntimeError(f"the workers exited with {value}/{count} done; see {log}")
            time.sleep(0.1)
        facts.done_at = time.time()
        facts.done = count if done is None else value
        facts.cpu_workers_s = sum(tree_cpu(p.pid) for p in procs) - cpu0
        facts.cpu_server_s = (server_cpu() - server0) if server_cpu else 0.0
        facts.machine_busy_s = machine_busy_seconds() - machine0
        facts.parent_rss_mb = rss
        load1 = os.getloadavg()
        facts.loadavg = tuple(round((a + b) / 2, 2) for a, b in zip(load0, load1, strict=True))
        if exits_by_itself:
            for proc in procs:
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    pass
        for proc in procs:
            remaining = proc.stdout.read() if proc.poll() is not None else b""
            facts.stdout.append(remaining.decode(errors="replace"))
        return facts
    finally:
        for proc in procs:
            stop(proc)
            if proc in STARTED:
                STARTED.remove(proc)
