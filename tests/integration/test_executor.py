"""The fork-server executor with real processes (no database).

Tasks come from tests/helpers/executor_tasks.py, preloaded into the zygote. Timing bounds are loose on
purpose: they prove "about the timeout, not forever", not scheduler precision. Waiting for a
process to disappear is a bounded polling loop, never a fixed sleep.
"""

from __future__ import annotations

import json
import os
import select
import signal
import time
from pathlib import Path

import pytest

from app.executor import ExecutorCrashed, ForkServer, TaskRequest, TaskResult
from tests.helpers.fork_server import start_owner, task_context

pytestmark = pytest.mark.timeout(60)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PRELOAD = ("tests.helpers.executor_tasks",)
KILL_GRACE = 0.5


# -- helpers ---------------------------------------------------------------------------------------


def make_context(artifact_dir: Path, execution_id: int = 1) -> dict:
    return task_context(artifact_dir, execution_id)


_next_id = iter(range(1, 1_000_000))


def request(task_name: str, artifact_dir: Path, config: dict | None = None, timeout: float = 10.0) -> TaskRequest:
    execution_id = next(_next_id)
    return TaskRequest(
        execution_id=execution_id,
        task_name=task_name,
        config=config or {},
        context=make_context(artifact_dir, execution_id),
        timeout_seconds=timeout,
    )


def collect(server: ForkServer, execution_ids: set[int], within: float = 30.0) -> dict[int, TaskResult]:
    """Poll until every id has a result (bounded)."""
    results: dict[int, TaskResult] = {}
    deadline = time.monotonic() + within
    while set(results) != execution_ids:
        assert time.monotonic() < deadline, f"no result for {execution_ids - set(results)} within {within} s"
        for result in server.poll(timeout=0.5):
            results[result.execution_id] = result
    return results


def run_one(server: ForkServer, req: TaskRequest) -> TaskResult:
    server.submit(req)
    return collect(server, {req.execution_id})[req.execution_id]


def wait_for_pid(server: ForkServer, execution_id: int, within: float = 10.0) -> int:
    deadline = time.monotonic() + within
    while server.pid_of(execution_id) is None:
        assert time.monotonic() < deadline, "zygote never reported the fork"
        assert not server.poll(timeout=0.05), "task finished before it was expected to"
    return server.pid_of(execution_id)


def is_alive(pid: int) -> bool:
    """True if the process exists and is not a zombie (an orphaned zombie may wait on PID 1)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X")


def wait_until_dead(pids: list[int], within: float = 5.0) -> list[int]:
    """Poll until none of `pids` is alive; return the survivors after `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        alive = [pid for pid in pids if is_alive(pid)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.02)


def read_pid_file(path: Path, within: float = 10.0) -> list[int]:
    deadline = time.monotonic() + within
    while not path.exists() or not path.read_text().strip():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)
    return [int(pid) for pid in path.read_text().split()]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


@pytest.fixture(scope="module")
def server():
    with ForkServer(preload=PRELOAD, kill_grace_seconds=KILL_GRACE) as fork_server:
        yield fork_server


@pytest.fixture
def own_server():
    """A server a test may crash or stop; always cleaned up."""
    fork_server = ForkServer(preload=PRELOAD, kill_grace_seconds=KILL_GRACE)
    fork_server.start()
    yield fork_server
    fork_server.stop()


# -- outcomes --------------------------------------------------------------------------------------


def test_success_captures_stdout_stderr_and_return_value(server, tmp_path):
    req = request("test_exec_echo", tmp_path)
    result = run_one(server, req)

    assert result.status == "succeeded"
    assert result.exit_code == 0
    assert result.error == ""
    assert f"hello from execution {req.execution_id}\n" in result.output
    assert "to stderr\n" in result.output
    assert "returned text" not in result.output  # the return value is the result, not output
    assert result.result == "returned text"
    assert result.pid not in (0, os.getpid(), server.zygote_pid)
    assert result.started_at <= result.finished_at
    assert 0 <= result.fork_ms < 1000


def test_exception_fails_with_traceback(server, tmp_path):
    result = run_one(server, request("test_exec_raise", tmp_path))

    assert result.status == "failed"
    assert result.exit_code == 1
    assert "Traceback (most recent call last)" in result.error
    assert "RuntimeError: task exploded on purpose" in result.error
    assert result.output == "about to fail\n"


def test_unknown_task_fails_naming_the_task(server, tmp_path):
    result = run_one(server, request("no_such_task", tmp_path))

    assert result.status == "failed"
    assert "unknown task 'no_such_task'" in result.error


def test_exit_without_result_reports_exit_code(server, tmp_path):
    result = run_one(server, request("test_exec_exit3", tmp_path))

    assert result.status == "failed"
    assert result.exit_code == 3
    assert "task process exited with code 3 without reporting a result" in result.error


def test_segfault_reports_signal(server, tmp_path):
    result = run_one(server, request("test_exec_segfault", tmp_path))

    assert result.status == "failed"
    assert result.exit_code == -signal.SIGSEGV
    assert "killed by signal SIGSEGV" in result.error


def test_unicode_output_and_json_return_value(server, tmp_path):
    result = run_one(server, request("test_exec_unicode", tmp_path))

    assert result.status == "succeeded"
    assert result.output == "héllo wörld — ☃ 日本語 🚀\n"
    assert result.result == {"emoji": "🚀"}


def test_task_process_is_isolated(server, tmp_path):
    result = run_one(server, request("test_exec_describe_process", tmp_path))

    facts = result.result
    assert facts["pid"] == result.pid
    assert facts["pgid"] == result.pid  # its own process group
    assert facts["pdeathsig"] == signal.SIGKILL  # dies with the zygote
    assert facts["sigterm_default"] is True
    assert facts["stdin_is_devnull"] is True
    assert facts["stdout_seekable"] is False  # the zygote-built stream knows it writes to a pipe
    # stdin, stdout, stderr, the result pipe, and the fd listdir itself opened; nothing of the zygote's
    assert len(facts["open_fds"]) <= 5


# -- timeouts and process groups -------------------------------------------------------------------


def test_timeout_terminates_the_task(server, tmp_path):
    started = time.monotonic()
    result = run_one(server, request("test_exec_sleep", tmp_path, {"seconds": 60}, timeout=0.5))
    elapsed = time.monotonic() - started

    assert result.status == "timed_out"
    assert result.exit_code == -signal.SIGTERM
    assert "timed out after 0.5 s" in result.error
    assert result.output == "sleeping\n"  # partial output survives the kill
    assert 0.4 <= elapsed < 10
    assert wait_until_dead([result.pid]) == []


def test_timeout_escalates_to_sigkill_when_sigterm_is_ignored(server, tmp_path):
    started = time.monotonic()
    result = run_one(server, request("test_exec_ignore_sigterm", tmp_path, {"seconds": 60}, timeout=0.5))
    elapsed = time.monotonic() - started

    assert result.status == "timed_out"
    assert result.exit_code == -signal.SIGKILL
    assert "killed by signal SIGKILL" in result.error
    assert 0.5 + KILL_GRACE - 0.2 <= elapsed < 10
    assert wait_until_dead([result.pid]) == []


def test_timeout_kills_grandchildren_that_ignore_sigterm(server, tmp_path):
    result = run_one(server, request("test_exec_grandchildren", tmp_path, {"seconds": 60}, timeout=1.0))

    assert result.status == "timed_out"
    grandchildren = read_pid_file(tmp_path / "grandchildren.pids")
    assert len(grandchildren) == 3
    assert wait_until_dead(grandchildren) == []


def test_grandchildren_are_killed_when_the_task_succeeds(server, tmp_path):
    result = run_one(server, request("test_exec_grandchildren", tmp_path, {"seconds": 0}))

    assert result.status == "succeeded"
    assert wait_until_dead(read_pid_file(tmp_path / "grandchildren.pids")) == []


def test_kill_on_request_fails_the_task(server, tmp_path):
    req = request("test_exec_sleep", tmp_path, {"seconds": 60})
    server.submit(req)
    pid = wait_for_pid(server, req.execution_id)
    server.kill(req.execution_id)
    result = collect(server, {req.execution_id})[req.execution_id]

    assert result.status == "failed"
    assert "killed on request" in result.error
    assert wait_until_dead([pid]) == []


# -- bounded output --------------------------------------------------------------------------------


def test_100_mb_of_output_is_truncated_without_growing_memory(own_server, tmp_path):
    zygote_before = rss_kib(own_server.zygote_pid)
    client_before = rss_kib(os.getpid())

    result = run_one(own_server, request("test_exec_flood", tmp_path, {"megabytes": 100}, timeout=30))

    assert result.status == "succeeded"
    assert len(result.output) <= 20_000
    assert result.output.startswith("x" * 1023 + "\n")
    assert result.output.endswith("\n[... output truncated: 104857600 bytes total]")
    assert rss_kib(own_server.zygote_pid) - zygote_before < 30 * 1024
    assert rss_kib(os.getpid()) - client_before < 30 * 1024


# -- concurrency and the event loop ----------------------------------------------------------------


def test_fifty_concurrent_tasks_succeed_in_distinct_processes(server, tmp_path):
    requests = [request("test_exec_noop", tmp_path) for _ in range(50)]
    for req in requests:
        server.submit(req)
    assert server.running() == {req.execution_id for req in requests}

    results = collect(server, {req.execution_id for req in requests})

    assert {result.status for result in results.values()} == {"succeeded"}
    assert len({result.pid for result in results.values()}) == 50
    assert server.running() == set()


def test_fileno_becomes_readable_when_a_result_is_ready(server, tmp_path):
    req = request("test_exec_noop", tmp_path)
    server.submit(req)
    results: list[TaskResult] = []
    deadline = time.monotonic() + 10
    while not results and time.monotonic() < deadline:
        readable, _, _ = select.select([server.fileno()], [], [], 1.0)
        if readable:
            results += server.poll(0)

    assert [result.execution_id for result in results] == [req.execution_id]


def test_poll_with_zero_timeout_does_not_block(server):
    started = time.monotonic()
    assert server.poll(0) == []
    assert time.monotonic() - started < 0.5


# -- shutdown and crashes --------------------------------------------------------------------------


def test_stop_kills_running_tasks_and_reaps_everything(own_server, tmp_path):
    sleeper = request("test_exec_sleep", tmp_path, {"seconds": 60}, timeout=60)
    stubborn = request("test_exec_ignore_sigterm", tmp_path, {"seconds": 60}, timeout=60)
    parent = request("test_exec_grandchildren", tmp_path, {"seconds": 60}, timeout=60)
    for req in (sleeper, stubborn, parent):
        own_server.submit(req)
    pids = [wait_for_pid(own_server, req.execution_id) for req in (sleeper, stubborn, parent)]
    pids += read_pid_file(tmp_path / "grandchildren.pids")
    zygote_pid = own_server.zygote_pid

    started = time.monotonic()
    results = own_server.stop(grace_seconds=0.1)

    assert time.monotonic() - started < 10
    assert {result.execution_id: result.status for result in results} == {
        sleeper.execution_id: "failed",
        stubborn.execution_id: "failed",
        parent.execution_id: "failed",
    }
    assert all("executor shut down" in result.error for result in results)
    assert own_server.zygote_pid is None
    assert not Path(f"/proc/{zygote_pid}").exists()  # our child, reaped by stop()
    assert wait_until_dead(pids) == []


def test_stop_waits_for_tasks_that_finish_within_the_grace_period(own_server, tmp_path):
    req = request("test_exec_sleep", tmp_path, {"seconds": 0.2})
    own_server.submit(req)

    results = own_server.stop(grace_seconds=10)

    assert [(result.execution_id, result.status) for result in results] == [(req.execution_id, "succeeded")]


def test_crashed_zygote_raises_and_reports_running_tasks_failed(own_server, tmp_path):
    req = request("test_exec_sleep", tmp_path, {"seconds": 60}, timeout=60)
    own_server.submit(req)
    task_pid = wait_for_pid(own_server, req.execution_id)

    os.kill(own_server.zygote_pid, signal.SIGKILL)
    with pytest.raises(ExecutorCrashed, match="zygote died unexpectedly") as crash:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            own_server.poll(timeout=0.5)

    [result] = crash.value.results
    assert (result.execution_id, result.status, result.pid) == (req.execution_id, "failed", task_pid)
    assert "zygote died" in result.error
    assert wait_until_dead([task_pid]) == []  # PDEATHSIG
    assert own_server.running() == set()

    own_server.start()  # and it can be started again
    assert run_one(own_server, request("test_exec_noop", tmp_path)).status == "succeeded"


def test_bad_preload_fails_start_with_the_import_error():
    fork_server = ForkServer(preload=("tests.no_such_module",))
    with pytest.raises(ExecutorCrashed, match="No module named 'tests.no_such_module'"):
        fork_server.start()
    assert fork_server.zygote_pid is None


OWNER_SCRIPT = """
import json, sys, time
from pathlib import Path
from app.executor import ForkServer, TaskRequest

context = json.loads(sys.argv[1])
server = ForkServer(preload=("tests.helpers.executor_tasks",))
server.start()
server.submit(TaskRequest(1, "test_exec_grandchildren", {"seconds": 120}, context, 120))
pid_file = Path(context["artifact_dir"]) / "grandchildren.pids"
while server.pid_of(1) is None or not pid_file.exists() or not pid_file.read_text():
    server.poll(0.05)
print(json.dumps({"zygote": server.zygote_pid, "task": server.pid_of(1),
                  "grandchildren": [int(p) for p in pid_file.read_text().split()]}), flush=True)
time.sleep(120)
"""


def test_sigkill_of_the_owning_process_leaves_no_task_process(tmp_path):
    owner, pids = start_owner(OWNER_SCRIPT, json.dumps(make_context(tmp_path)))
    try:
        survivors = [pids["zygote"], pids["task"], *pids["grandchildren"]]
        assert all(is_alive(pid) for pid in survivors)

        owner.kill()  # SIGKILL: no cleanup code runs in the owner
        owner.wait()

        assert wait_until_dead(survivors) == []
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        owner.stdin.close()
        owner.stdout.close()
