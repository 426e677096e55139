"""The zygote's queue, with real processes (no database): runs submitted with `within` wait in
the zygote until fewer than `within` of its tasks run, are forked there the moment a task ends,
and are withdrawn, never forked, by a kill, a stop, or the owner's death (app/executor/zygote.py,
"Why a queue" and "Never fork for a worker that is gone").

Tasks come from tests/helpers/executor_tasks.py. `test_exec_touch` leaves a file named after its
execution the moment it runs, so "never forked" is checked by the file system, not by the report.
"""

from __future__ import annotations

import json

import pytest

from app.executor import ForkServer, TaskRequest, TaskResult
from tests.helpers.fork_server import start_owner, task_context
from tests.helpers.processes import is_alive, wait_for

PRELOAD = ("tests.helpers.executor_tasks",)
KILL_GRACE = 0.5
_next_id = iter(range(1, 1_000_000))

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def server():
    fork_server = ForkServer(preload=PRELOAD, kill_grace_seconds=KILL_GRACE)
    fork_server.start()
    yield fork_server
    fork_server.stop()


def make_context(artifact_dir, execution_id: int = 1) -> dict:
    return task_context(artifact_dir, execution_id, job_name="queue-test")


def request(task_name: str, artifact_dir, config: dict | None = None) -> TaskRequest:
    execution_id = next(_next_id)
    return TaskRequest(execution_id, task_name, config or {}, make_context(artifact_dir, execution_id), 30.0)


def collect(server: ForkServer, execution_ids: set[int], within: float = 30.0) -> dict[int, TaskResult]:
    """Poll until every id has a result (bounded)."""
    results: dict[int, TaskResult] = {}

    def done() -> bool:
        results.update((r.execution_id, r) for r in server.poll(timeout=0.2))
        return set(results) >= execution_ids

    wait_for(done, within=within, what=lambda: f"results for {execution_ids - set(results)}")
    return results


def wait_for_pid(server: ForkServer, execution_id: int) -> int:
    def reported() -> int | None:
        assert not server.poll(timeout=0.05), "a task finished before it was expected to"
        return server.pid_of(execution_id)

    return wait_for(reported, within=10, what="the zygote to report the fork")


def wait_until_dead(pids: list[int]) -> list[int]:
    wait_for(lambda: not any(is_alive(pid) for pid in pids), within=5, what=f"{pids} to die")
    return []


def touched(tmp_path) -> set[int]:
    return {int(path.name.split("-")[1]) for path in tmp_path.glob("touched-*")}


def queue_behind_a_sleeper(server: ForkServer, tmp_path, *, queued: int = 1):
    """One 60 s task in the zygote's only slot and `queued` touch runs waiting behind it; a
    direct run after them is the fence: once its fork is reported, the zygote has read the
    queued requests (one socket, in order)."""
    sleeper = request("test_exec_sleep", tmp_path, {"seconds": 60})
    server.submit(sleeper, within=1)
    waiting = [request("test_exec_touch", tmp_path) for _ in range(queued)]
    for req in waiting:
        server.submit(req, within=1)
    fence = request("test_exec_sleep", tmp_path, {"seconds": 60})
    server.submit(fence)  # no `within`: forked at once
    wait_for_pid(server, sleeper.execution_id)
    wait_for_pid(server, fence.execution_id)
    server.kill(fence.execution_id)
    assert collect(server, {fence.execution_id})[fence.execution_id].status == "failed"
    return sleeper, waiting


def test_a_queued_run_is_forked_when_a_task_ends_without_another_submit(server, tmp_path):
    sleeper, [waiting] = queue_behind_a_sleeper(server, tmp_path)
    assert server.pid_of(waiting.execution_id) is None and touched(tmp_path) == set()

    server.kill(sleeper.execution_id)  # the slot frees; nothing more is submitted
    results = collect(server, {sleeper.execution_id, waiting.execution_id})

    ended, ran = results[sleeper.execution_id], results[waiting.execution_id]
    assert ended.status == "failed" and ran.status == "succeeded"
    assert ran.forked and ran.pid > 0 and ran.pid != ended.pid
    assert touched(tmp_path) == {waiting.execution_id}
    # Its times are the zygote's, from its fork: after the task whose end freed the slot.
    assert ran.started_at >= ended.finished_at


def test_queued_runs_fork_in_order_and_never_more_than_within_at_once(server, tmp_path):
    first = [request("test_exec_sleep", tmp_path, {"seconds": 0.2}) for _ in range(2)]
    then = [request("test_exec_touch", tmp_path) for _ in range(6)]
    for req in [*first, *then]:
        server.submit(req, within=2)
    results = collect(server, {req.execution_id for req in [*first, *then]})

    assert all(result.status == "succeeded" and result.forked for result in results.values())
    spans = sorted((r.started_at, r.finished_at) for r in results.values())
    for i, (started, _) in enumerate(spans):  # at most 2 processes alive at any start
        assert sum(1 for s, f in spans[:i] if f > started) < 2
    assert [results[req.execution_id].started_at for req in then] == sorted(
        results[req.execution_id].started_at for req in then
    )


@pytest.mark.parametrize(("reason", "status"), [("cancelled", "cancelled"), ("killed", "failed")])
def test_a_queued_run_killed_before_its_fork_comes_back_never_forked(server, tmp_path, reason, status):
    sleeper, [waiting, behind] = queue_behind_a_sleeper(server, tmp_path, queued=2)

    server.kill(waiting.execution_id, reason=reason)
    [withdrawn] = collect(server, {waiting.execution_id}).values()

    assert (withdrawn.status, withdrawn.forked, withdrawn.pid, withdrawn.exit_code) == (status, False, 0, None)
    assert "before its task process started" in withdrawn.error
    # The slot is still the sleeper's; when it ends, the next in the queue runs, the withdrawn never.
    server.kill(sleeper.execution_id)
    results = collect(server, {sleeper.execution_id, behind.execution_id})
    assert results[behind.execution_id].status == "succeeded"
    assert touched(tmp_path) == {behind.execution_id}
    assert server.running() == set()


def test_stop_withdraws_queued_runs_never_forked_and_kills_the_forked_one(server, tmp_path):
    sleeper, waiting = queue_behind_a_sleeper(server, tmp_path, queued=3)
    sleeper_pid = server.pid_of(sleeper.execution_id)

    results = {result.execution_id: result for result in server.stop(0)}

    assert {execution_id for execution_id, r in results.items() if not r.forked} == {r.execution_id for r in waiting}
    assert all(results[r.execution_id].status == "failed" for r in waiting)
    assert results[sleeper.execution_id].forked and results[sleeper.execution_id].pid == sleeper_pid
    assert wait_until_dead([sleeper_pid]) == []
    assert touched(tmp_path) == set()


OWNER_SCRIPT = """
import json, sys, time
from app.executor import ForkServer, TaskRequest
context = json.loads(sys.argv[1])
server = ForkServer(preload=("tests.helpers.executor_tasks",), kill_grace_seconds=0.5)
server.start()
def submit(execution_id, task, config):
    server.submit(TaskRequest(execution_id, task, config, {**context, "execution_id": execution_id}, 120), within=1)
submit(1, "test_exec_sleep", {"seconds": 60})
for execution_id in range(2, 12):
    submit(execution_id, "test_exec_touch", {})
while server.pid_of(1) is None:
    server.poll(0.05)
print(json.dumps({"zygote": server.zygote_pid, "task": server.pid_of(1)}), flush=True)
if sys.argv[2] == "close":
    sys.stdin.readline()  # the test's go, once it has seen the task alive
    server._sock.close()  # the socket hits EOF in the zygote while its worker lives on
time.sleep(120)
"""


@pytest.mark.parametrize("how", ["kill", "close"])
def test_an_owner_gone_while_runs_are_queued_leaves_none_of_them_forked(tmp_path, how):
    """The zygote learns that its worker is gone from PDEATHSIG (the worker was SIGKILLed) or
    from EOF on the control socket (`close`: the socket alone, so the signal cannot cover for
    it), and kills the running task; that task's exit frees the slot the queue waits for, and
    the zygote must not fork into it for a worker that is gone."""
    owner, pids = start_owner(OWNER_SCRIPT, json.dumps(make_context(tmp_path)), how)
    try:
        assert is_alive(pids["zygote"]) and is_alive(pids["task"])

        if how == "kill":
            owner.kill()  # SIGKILL: no cleanup code runs in the owner
            owner.wait()
        else:
            owner.stdin.write("close\n")
            owner.stdin.flush()

        assert wait_until_dead([pids["zygote"], pids["task"]]) == []
        assert touched(tmp_path) == set()
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        owner.stdin.close()
        owner.stdout.close()
