"""Pooled isolation with real processes (no database): reuse, replacement after max tasks and
over the memory cap, timeouts, crashes and kills that take only their own attempt, and process
mode beside it unchanged.

Tasks come from tests/helpers/executor_tasks.py and tests/helpers/pool_tasks.py, preloaded into the
zygote. Waiting for a process to disappear is a bounded polling loop, never a fixed sleep.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from app.executor import ForkServer, TaskRequest
from app.executor.pool_limits import PoolLimits
from tests.helpers.processes import is_alive, wait_for

pytestmark = pytest.mark.timeout(60)

PRELOAD = ("tests.helpers.executor_tasks", "tests.helpers.pool_tasks")
KILL_GRACE = 0.5
_next_id = iter(range(1, 1_000_000))


def make_context(artifact_dir: Path, execution_id: int) -> dict:
    return {
        "execution_id": execution_id,
        "job_id": None,
        "job_name": "pool-test",
        "idempotency_key": f"pool-test-{execution_id}",
        "attempt": 1,
        "artifact_dir": str(artifact_dir),
        "marker_dir": str(artifact_dir),
    }


def collect(server: ForkServer, execution_ids: set[int], within: float = 30.0) -> dict:
    """Poll until every id has a result (bounded)."""
    results: dict = {}

    def all_in() -> bool:
        for result in server.poll(timeout=0.2):
            results[result.execution_id] = result
        return set(results) >= execution_ids

    wait_for(all_in, within=within, what=lambda: f"results for {execution_ids - set(results)}")
    return results


def wait_until_dead(pids: list[int], within: float = 5.0) -> list[int]:
    """Poll until none of `pids` is alive; return the survivors after `within` seconds."""
    deadline = time.monotonic() + within
    while any(is_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    return [pid for pid in pids if is_alive(pid)]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def pool_request(
    task_name: str, artifact_dir: Path, config: dict | None = None, *, timeout: float = 10.0, isolation="pool"
):
    execution_id = next(_next_id)
    return TaskRequest(
        execution_id=execution_id,
        task_name=task_name,
        config=config or {},
        context=make_context(artifact_dir, execution_id),
        timeout_seconds=timeout,
        isolation=isolation,
    )


def run(server: ForkServer, req: TaskRequest):
    server.submit(req)
    return collect(server, {req.execution_id})[req.execution_id]


@pytest.fixture
def pool_server(request):
    limits = getattr(request, "param", PoolLimits(max_tasks=3))
    server = ForkServer(preload=PRELOAD, kill_grace_seconds=KILL_GRACE, pool=limits)
    server.start()
    yield server
    server.stop()


def test_a_pool_process_is_reused_then_replaced_after_max_tasks(pool_server, tmp_path):
    results = [run(pool_server, pool_request("test_pool_count", tmp_path)) for _ in range(5)]

    assert all(r.status == "succeeded" and r.exit_code == 0 for r in results), [r.error for r in results]
    reports = [r.result for r in results]
    pids = [r.pid for r in results]
    assert [report["pid"] for report in reports] == pids  # the pid recorded is the process that ran it
    first, second = pids[0], pids[3]
    assert pids == [first, first, first, second, second] and first != second
    assert first not in (0, os.getpid(), pool_server.zygote_pid)
    # Module state carries over inside one process (what "trusted tasks only" is about), and
    # starts again in the replacement.
    assert [report["runs"] for report in reports] == [1, 2, 3, 1, 2]
    assert wait_until_dead([first]) == []
    assert is_alive(second)
    assert "attempt 1 of execution" in results[0].output  # output is per attempt, not per process
    assert f"execution {results[1].execution_id}" in results[1].output
    assert f"execution {results[0].execution_id}" not in results[1].output


def test_output_and_tracebacks_are_captured_as_in_process_mode(pool_server, tmp_path):
    echoed = run(pool_server, pool_request("test_exec_echo", tmp_path))
    raised = run(pool_server, pool_request("test_exec_raise", tmp_path))

    assert echoed.status == "succeeded" and echoed.error == ""
    assert f"hello from execution {echoed.execution_id}\n" in echoed.output
    assert "to stderr\n" in echoed.output and echoed.result == "returned text"
    assert 0 <= echoed.fork_ms < 1000 and echoed.started_at <= echoed.finished_at
    assert (raised.status, raised.exit_code) == ("failed", 1)
    assert "Traceback (most recent call last)" in raised.error
    assert "RuntimeError: task exploded on purpose" in raised.error
    assert raised.output == "about to fail\n"
    assert raised.pid == echoed.pid  # an exception ends the attempt, not the process


def test_a_timeout_kills_the_pool_process_and_the_next_attempt_gets_a_new_one(pool_server, tmp_path):
    before = run(pool_server, pool_request("test_pool_count", tmp_path))
    timed_out = run(pool_server, pool_request("test_exec_sleep", tmp_path, {"seconds": 60}, timeout=0.5))
    after = run(pool_server, pool_request("test_pool_count", tmp_path))

    assert timed_out.status == "timed_out"
    assert timed_out.exit_code == -signal.SIGTERM
    assert "task timed out after 0.5 s" in timed_out.error
    assert timed_out.pid == before.pid  # it ran in the warm process...
    assert wait_until_dead([timed_out.pid]) == []  # ...which was killed for it
    assert after.status == "succeeded" and after.pid != timed_out.pid
    assert after.result["runs"] == 1


def test_a_timeout_escalates_to_sigkill_when_the_task_ignores_sigterm(pool_server, tmp_path):
    result = run(pool_server, pool_request("test_exec_ignore_sigterm", tmp_path, timeout=0.5))

    assert result.status == "timed_out" and result.exit_code == -signal.SIGKILL
    assert wait_until_dead([result.pid]) == []


@pytest.mark.parametrize(
    "task,exit_code,reason",
    [
        ("test_exec_exit3", 3, "exited with code 3 without reporting a result"),
        ("test_exec_segfault", -signal.SIGSEGV, "killed by signal SIGSEGV"),
    ],
)
def test_a_crash_fails_only_its_attempt_and_the_process_is_replaced(pool_server, tmp_path, task, exit_code, reason):
    neighbour = pool_request("test_exec_sleep", tmp_path, {"seconds": 1})
    pool_server.submit(neighbour)  # busy in another pool process while the crash happens
    crashed = run(pool_server, pool_request(task, tmp_path))
    after = run(pool_server, pool_request("test_pool_count", tmp_path))
    neighbour_result = collect(pool_server, {neighbour.execution_id})[neighbour.execution_id]

    assert (crashed.status, crashed.exit_code) == ("failed", exit_code)
    assert reason in crashed.error
    assert neighbour_result.status == "succeeded" and neighbour_result.pid != crashed.pid
    assert after.status == "succeeded" and after.pid != crashed.pid


@pytest.mark.parametrize("reason,status", [("cancelled", "cancelled"), ("killed", "failed")])
def test_cancel_and_kill_end_the_attempt_and_replace_the_process(pool_server, tmp_path, reason, status):
    req = pool_request("test_exec_sleep", tmp_path, {"seconds": 60}, timeout=30)
    pool_server.submit(req)
    while pool_server.pid_of(req.execution_id) is None:
        assert not pool_server.poll(timeout=0.05)
    pool_server.kill(req.execution_id, reason=reason)
    result = collect(pool_server, {req.execution_id})[req.execution_id]
    after = run(pool_server, pool_request("test_pool_count", tmp_path))

    assert result.status == status and result.exit_code == -signal.SIGTERM
    assert wait_until_dead([result.pid]) == []
    assert after.status == "succeeded" and after.pid != result.pid


def test_a_process_over_the_memory_cap_is_replaced_after_its_attempt(tmp_path):
    probe = ForkServer(preload=PRELOAD, kill_grace_seconds=KILL_GRACE)
    probe.start()
    try:
        zygote_mb = rss_kib(probe.zygote_pid) // 1024
    finally:
        probe.stop()
    # A fresh pool process holds about the zygote's pages; 64 MB more must cross a cap 32 MB above.
    limits = PoolLimits(max_tasks=1000, max_memory_mb=zygote_mb + 32)
    with ForkServer(preload=PRELOAD, kill_grace_seconds=KILL_GRACE, pool=limits) as server:
        small = [run(server, pool_request("test_pool_count", tmp_path)) for _ in range(3)]
        grown = run(server, pool_request("test_pool_grow", tmp_path, {"megabytes": 64}))
        after = run(server, pool_request("test_pool_count", tmp_path))

    assert len({r.pid for r in small}) == 1  # under the cap: reused
    assert grown.status == "succeeded" and grown.pid == small[0].pid  # the attempt itself succeeds
    assert wait_until_dead([grown.pid]) == []  # then its process is replaced
    assert after.pid != grown.pid and after.result["runs"] == 1


def test_process_mode_is_unchanged_beside_the_pool(pool_server, tmp_path):
    pooled = [run(pool_server, pool_request("test_pool_count", tmp_path)) for _ in range(2)]
    forked = [run(pool_server, pool_request("test_pool_count", tmp_path, isolation="process")) for _ in range(3)]

    assert all(r.status == "succeeded" for r in pooled + forked)
    assert len({r.pid for r in forked}) == 3  # a fresh process per attempt
    assert not {r.pid for r in forked} & {r.pid for r in pooled}
    assert [r.result["runs"] for r in forked] == [1, 1, 1]  # no state carried
    assert wait_until_dead([r.pid for r in forked]) == []


def test_concurrent_attempts_use_one_process_each_and_all_succeed(pool_server, tmp_path):
    requests = [pool_request("test_exec_sleep", tmp_path, {"seconds": 0.2}) for _ in range(8)]
    for req in requests:
        pool_server.submit(req)
    results = collect(pool_server, {req.execution_id for req in requests})

    assert all(r.status == "succeeded" for r in results.values())
    assert len({r.pid for r in results.values()}) == 8  # none waited for another's process


def test_stop_kills_the_pool_processes(pool_server, tmp_path):
    idle = run(pool_server, pool_request("test_pool_count", tmp_path))
    busy = pool_request("test_exec_sleep", tmp_path, {"seconds": 60}, timeout=30)
    pool_server.submit(busy)
    while pool_server.pid_of(busy.execution_id) is None:
        assert not pool_server.poll(timeout=0.05)
    busy_pid = pool_server.pid_of(busy.execution_id)

    results = pool_server.stop()

    assert [(r.execution_id, r.status) for r in results] == [(busy.execution_id, "failed")]
    assert wait_until_dead([idle.pid, busy_pid]) == []
