"""Workflow runs in-process on both databases: the scheduler starts an occurrence as its root
steps, each step hands off to the ones waiting for it in the turn that records it (with what
it returned as `upstream_results`), a failure marks what lies downstream `upstream_failed`,
cancel stops the run, and retry resumes it keeping the steps that succeeded."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import select

from app.clock import utcnow
from app.executor import ForkServer
from app.extensions import db
from app.models import Event, Execution, WorkflowRun
from app.services.engine.scheduler import Scheduler
from app.services.engine.worker import Worker
from app.services.errors import Conflict, ValidationFailed
from app.services.read.ledger import verify
from app.services.use_cases import executions, runs
from app.services.use_cases import jobs as jobs_service
from app.services.use_cases import workflows as workflow_use_cases
from tests.factories import make_job, make_user
from tests.helpers import workflow_tasks
from tests.helpers.api import PASSWORD, ApiClient
from tests.helpers.web import signed_in_client

DIAMOND = [
    {"name": "a", "task": "wf_emit", "config": {"value": 1}},
    {"name": "b", "task": "wf_emit", "config": {"value": 2}, "after": ["a"]},
    {"name": "c", "task": "wf_emit", "config": {"value": 3}, "after": ["a"]},
    {"name": "d", "task": "wf_emit", "config": {"value": 4}, "after": ["b", "c"]},
]


@pytest.fixture
def drain(app, clock):
    executor = ForkServer(preload=workflow_tasks.PRELOAD, kill_grace_seconds=1.0)

    def run(**kwargs):
        on = kwargs.pop("clock", clock)
        return Worker(app, worker_id="w-workflow", clock=on, executor=executor, **kwargs).run(burst=True)

    yield run
    executor.stop()


def tick(app, clock):
    return Scheduler(app, clock=clock).tick()


def steps_of(run_id: int) -> dict[str, Execution]:
    db.session.rollback()
    rows = db.session.scalars(select(Execution).where(Execution.workflow_run_id == run_id)).all()
    return {row.step: row for row in rows}


def workflow_run(job_id: int) -> WorkflowRun:
    db.session.rollback()
    return db.session.scalars(select(WorkflowRun).where(WorkflowRun.job_id == job_id)).one()


def test_a_diamond_runs_each_step_once_after_its_upstream_with_their_results(app, clock, drain):
    job = make_job(now=clock(), task="echo", every="1h", steps=DIAMOND)
    clock.advance(hours=1)
    tick(app, clock)

    run = workflow_run(job.id)
    anchor = db.session.get(Execution, run.id)
    assert (anchor.status, anchor.queue_id, anchor.trigger) == ("running", None, "schedule")
    assert set(steps_of(run.id)) == {"a"}  # only the root started with the run

    drain()
    steps = steps_of(run.id)
    assert {name: row.status for name, row in steps.items()} == dict.fromkeys("abcd", "succeeded")
    assert steps["a"].finished_at <= steps["b"].started_at and steps["a"].finished_at <= steps["c"].started_at
    assert max(steps["b"].finished_at, steps["c"].finished_at) <= steps["d"].started_at
    d = json.loads(steps["d"].result)
    assert d["upstream"] == {
        "b": {"value": 2, "step": "b", "upstream": {"a": {"value": 1, "step": "a", "upstream": {}}}},
        "c": {"value": 3, "step": "c", "upstream": {"a": {"value": 1, "step": "a", "upstream": {}}}},
    }
    assert steps["d"].trigger == "workflow" and steps["d"].idempotency_key == f"workflow:{run.id}:d"

    run = workflow_run(job.id)
    anchor = db.session.get(Execution, run.id)
    assert anchor.status == "succeeded" and run.finished_at is not None
    assert {name: entry["execution_id"] for name, entry in run.state.items()} == {n: r.id for n, r in steps.items()}
    kinds = [e.type for e in db.session.scalars(select(Event).where(Event.execution_id == run.id).order_by(Event.id))]
    assert kinds.count("workflow_started") == 1 and kinds.count("workflow_finished") == 1
    assert verify(now=clock()).ok


def test_a_failed_step_marks_its_downstream_upstream_failed_and_fails_the_run(app, clock, drain, tmp_path):
    marker = tmp_path / "c-may-succeed"
    steps = [
        DIAMOND[0],
        DIAMOND[1],
        {
            "name": "c",
            "task": "wf_fail_unless",
            "config": {"path": str(marker), "value": 3},
            "after": ["a"],
            "max_attempts": 1,
        },
        DIAMOND[3],
    ]
    job = make_job(now=clock(), task="echo", every="1h", steps=steps)
    clock.advance(hours=1)
    tick(app, clock)
    drain()

    run = workflow_run(job.id)
    by_step = steps_of(run.id)
    assert {name: row.status for name, row in by_step.items()} == {"a": "succeeded", "b": "succeeded", "c": "failed"}
    assert run.state["d"] == {"state": "upstream_failed"}
    anchor = db.session.get(Execution, run.id)
    assert anchor.status == "failed" and "step c did not succeed" in anchor.error
    assert verify(now=clock()).ok


def test_retry_from_the_failed_step_keeps_the_results_that_succeeded_and_reruns_only_the_rest(
    app, clock, drain, tmp_path
):
    marker = tmp_path / "c-may-succeed"
    steps = [
        DIAMOND[0],
        DIAMOND[1],
        {
            "name": "c",
            "task": "wf_fail_unless",
            "config": {"path": str(marker), "value": 3},
            "after": ["a"],
            "max_attempts": 1,
        },
        DIAMOND[3],
    ]
    job = make_job(now=clock(), task="echo", every="1h", steps=steps)
    first = runs.trigger_run(job.id, {}, now=clock(), actor="test")  # a trigger starts it at once
    assert first.status == "running"
    drain()
    old = steps_of(first.id)
    assert old["c"].status == "failed"

    with pytest.raises(ValidationFailed, match="has no step 'x'"):
        workflow_use_cases.retry_run(first.id, now=clock(), actor="test", from_step="x")
    with pytest.raises(ValidationFailed, match="step 'd' waits for c, which did not succeed"):
        workflow_use_cases.retry_run(first.id, now=clock(), actor="test", from_step="d")
    marker.touch()
    clock.advance(seconds=1)
    second = workflow_use_cases.retry_run(first.id, now=clock(), actor="test", from_step="c")
    assert (second.retry_of_id, second.retry_from) == (first.id, "c")
    assert second.state["a"] == {"execution_id": old["a"].id} and second.state["b"] == {"execution_id": old["b"].id}
    drain()

    new = steps_of(second.id)
    assert set(new) == {"c", "d"} and {row.status for row in new.values()} == {"succeeded"}  # a, b not rerun
    assert json.loads(new["c"].result)["upstream"] == {"a": {"value": 1, "step": "a", "upstream": {}}}
    assert json.loads(new["d"].result)["upstream"]["b"]["value"] == 2  # b's result, taken over
    db.session.rollback()
    assert db.session.get(Execution, second.id).status == "succeeded"
    assert db.session.get(Execution, first.id).status == "failed"  # history stays as it was
    with pytest.raises(Conflict, match="only a failed or cancelled workflow run"):
        workflow_use_cases.retry_run(second.id, now=clock(), actor="test")
    assert verify(now=clock()).ok


def test_cancel_stops_queued_steps_and_marks_the_waiting_ones(app, clock, drain):
    job = make_job(now=clock(), task="echo", every="1h", steps=DIAMOND)
    run = runs.trigger_run(job.id, {}, now=clock(), actor="test")
    assert set(steps_of(run.id)) == {"a"}

    with pytest.raises(Conflict, match="is a workflow run: cancel it with flask workflow cancel"):
        executions.cancel_execution(run.id, now=clock(), actor="test")
    cancelled = workflow_use_cases.cancel_run(run.id, now=clock(), actor="test", reason="not today")
    assert cancelled.anchor.status == "cancelled"
    assert {name: entry.get("state") for name, entry in cancelled.state.items() if "state" in entry} == {
        "b": "cancelled",
        "c": "cancelled",
        "d": "cancelled",
    }
    assert steps_of(run.id)["a"].status == "cancelled"
    assert drain().claimed == 0
    with pytest.raises(Conflict, match="only a running workflow run can be cancelled"):
        workflow_use_cases.cancel_run(run.id, now=clock(), actor="test")


def test_a_step_is_retried_with_its_run_not_on_its_own(app, clock, drain):
    job = make_job(now=clock(), task="echo", every="1h", steps=DIAMOND[:1])
    run = runs.trigger_run(job.id, {}, now=clock(), actor="test")
    drain()
    step = steps_of(run.id)["a"]
    with pytest.raises(Conflict, match="is step 'a' of workflow run"):
        executions.retry_execution(step.id, now=clock(), actor="test")


def test_an_exclusive_workflow_job_runs_one_run_at_a_time_and_the_next_starts_after(app, clock, drain):
    job = make_job(now=clock(), task="echo", every="1h", steps=DIAMOND, overlap_policy="queue")
    first = runs.trigger_run(job.id, {}, now=clock(), actor="test")
    second = runs.trigger_run(job.id, {}, now=clock(), actor="test")
    assert (first.status, second.status) == ("running", "pending")  # it waits behind the first
    drain()
    db.session.rollback()
    assert db.session.get(Execution, first.id).status == "succeeded"
    assert db.session.get(Execution, second.id).status == "pending"
    clock.advance(seconds=1)
    tick(app, clock)  # the scheduler's pass starts it now that the first has ended
    drain()
    db.session.rollback()
    assert db.session.get(Execution, second.id).status == "succeeded"
    assert verify(now=clock()).ok


def test_the_cli_lists_shows_retries_and_cancels_runs_and_refuses_bad_input_on_one_line(app, clock, drain, tmp_path):
    marker = tmp_path / "c-may-succeed"
    steps = [
        DIAMOND[0],
        {"name": "c", "task": "wf_fail_unless", "config": {"path": str(marker)}, "after": ["a"], "max_attempts": 1},
    ]
    path = tmp_path / "steps.json"
    path.write_text(json.dumps(steps))
    runner = app.test_cli_runner()

    def cli(*args):
        return runner.invoke(args=[str(a) for a in args])

    added = cli("job", "add", "pipeline", "echo", "interval", "--every", "1h", "--steps", path, "--json")
    assert added.exit_code == 0, added.output
    job_id = json.loads(added.output)["id"]
    assert cli("job", "trigger", job_id).exit_code == 0
    drain(clock=utcnow)  # the CLI's runs are due by the wall clock
    db.session.rollback()  # the commands share this process's session: read what the worker wrote

    listed = cli("workflow", "runs", job_id, "--json")
    assert listed.exit_code == 0, listed.output
    [summary] = json.loads(listed.output)
    assert (summary["status"], summary["steps"], summary["started_steps"]) == ("failed", 2, 2)
    run_id = summary["id"]
    shown = json.loads(cli("workflow", "show", run_id, "--json").output)
    assert [(step["name"], step["status"]) for step in shown["steps"]] == [("a", "succeeded"), ("c", "failed")]
    assert shown["steps"][1]["explain"] == "failed after 1 attempt"
    table = cli("workflow", "show", run_id, "--tz", "Asia/Tokyo")
    assert table.exit_code == 0 and "+09:00" in table.output and "failed after 1 attempt" in table.output

    for args, message in [
        (("workflow", "show", 99999), "Error: workflow run 99999 does not exist"),
        (("workflow", "show", shown["steps"][0]["execution_id"]), "is not a workflow run"),
        (("workflow", "retry", run_id, "--from", "nope"), "has no step 'nope'"),
        (("workflow", "cancel", run_id), "only a running workflow run can be cancelled"),
        (("workflow", "show", run_id, "--tz", "Mars/Olympus"), "unknown time zone"),
    ]:
        refused = cli(*args)
        assert refused.exit_code == 1, (args, refused.output)
        assert message in refused.output and len(refused.output.strip().splitlines()) == 1, refused.output

    marker.touch()
    retried = cli("workflow", "retry", run_id)
    assert retried.exit_code == 0 and "taken over: a" in retried.output, retried.output
    drain(clock=utcnow)
    db.session.rollback()
    [newer, older] = json.loads(cli("workflow", "runs", job_id, "--json").output)
    assert (newer["status"], newer["retry_of"], older["status"]) == ("succeeded", run_id, "failed")


def test_the_api_reads_cancels_and_retries_a_run(app, clock, drain):
    make_user("operator", PASSWORD, role="operator")
    make_user("viewer", PASSWORD, role="viewer")
    api = ApiClient(app)
    api.login("operator")
    body = {
        "name": "wf",
        "task": "always_succeed",
        "schedule_type": "interval",
        "schedule": {"every": "1h"},
        "steps": DIAMOND,
    }
    created = api.post("/api/v1/jobs", json=body)
    assert created.status_code == 201, created.get_data(as_text=True)
    job_id = created.json["id"]
    triggered = api.post(f"/api/v1/jobs/{job_id}/trigger", json={})
    assert triggered.status_code in (200, 201, 202), triggered.get_data(as_text=True)
    run_id = triggered.json["id"]

    shown = api.get(f"/api/v1/workflow-runs/{run_id}")
    assert shown.status_code == 200 and shown.json["status"] == "running"
    assert [(s["name"], s["status"]) for s in shown.json["steps"]] == [
        ("a", "pending"),
        ("b", "waiting"),
        ("c", "waiting"),
        ("d", "waiting"),
    ]
    assert shown.json["steps"][3]["explain"] == "waiting for `b`, `c`"
    page = api.get(f"/api/v1/jobs/{job_id}/workflow-runs?limit=1")
    assert [item["id"] for item in page.json["items"]] == [run_id] and page.json["next"] is None

    busy = api.post(f"/api/v1/workflow-runs/{run_id}/retry", json={})
    assert busy.status_code == 409 and "only a failed or cancelled workflow run" in busy.json["detail"]
    cancelled = api.post(f"/api/v1/workflow-runs/{run_id}/cancel", json={"reason": "test"})
    assert cancelled.status_code == 200 and cancelled.json["status"] == "cancelled"

    bad = api.post(f"/api/v1/workflow-runs/{run_id}/retry", json={"from": "zz"})
    assert bad.status_code == 422 and "has no step 'zz'" in bad.json["errors"]["from"]
    viewer = ApiClient(app)
    viewer.login("viewer")
    assert viewer.post(f"/api/v1/workflow-runs/{run_id}/retry", json={}).status_code == 403
    retried = api.post(f"/api/v1/workflow-runs/{run_id}/retry", json={"from": "a"})
    assert retried.status_code == 201 and retried.json["retry_of"] == run_id
    assert retried.headers["Location"].endswith(f"/api/v1/workflow-runs/{retried.json['id']}")
    assert api.get("/api/v1/workflow-runs/999999").status_code == 404


def test_the_run_page_draws_the_graph_offline_and_its_buttons_cancel_and_retry(app, clock, drain):
    job = make_job("nightly <b>&", now=clock(), task="echo", every="1h", steps=DIAMOND)
    run = runs.trigger_run(job.id, {}, now=clock(), actor="test")
    client = signed_in_client(app, "operator")

    page = client.get(f"/workflow-runs/{run.id}")
    body = page.get_data(as_text=True)
    assert page.status_code == 200 and "<svg" in body and "cdn" not in body.lower()
    assert body.count('class="wf-node') == 4 and body.count('class="wf-edge"') == 4
    assert 'class="wf-node status-pending"' in body and body.count('class="wf-node status-waiting"') == 3
    assert "nightly &lt;b&gt;&amp;" in body and "nightly <b>" not in body  # the job's name is escaped
    assert f'href="/executions/{steps_of(run.id)["a"].id}"' in body
    assert "waiting for `b`, `c`" in body
    execution_page = client.get(f"/executions/{run.id}").get_data(as_text=True)
    assert f'href="/workflow-runs/{run.id}"' in execution_page

    assert client.post(f"/workflow-runs/{run.id}/cancel", csrf=False).status_code in (302, 303, 400)
    db.session.rollback()
    assert db.session.get(Execution, run.id).status == "running"  # no CSRF token: nothing changed
    cancelled = client.post(f"/workflow-runs/{run.id}/cancel")
    assert cancelled.status_code == 303
    db.session.rollback()
    assert db.session.get(Execution, run.id).status == "cancelled"
    retried = client.post(f"/workflow-runs/{run.id}/retry", data={"from": "nope"})
    assert retried.status_code == 303 and retried.headers["Location"].endswith(f"/workflow-runs/{run.id}")
    assert "has no step" in client.get(f"/workflow-runs/{run.id}").get_data(as_text=True)
    retried = client.post(f"/workflow-runs/{run.id}/retry", data={"from": ""})
    assert retried.status_code == 303 and not retried.headers["Location"].endswith(f"/workflow-runs/{run.id}")
    db.session.rollback()  # the requests ran in this test's app context, on its session
    viewer = signed_in_client(app, "viewer")
    assert viewer.post(f"/workflow-runs/{run.id}/retry").status_code == 403
    assert viewer.get("/workflow-runs/999999").status_code == 404


def test_the_runs_grid_shows_a_workflow_run_as_one_cell(app, clock, drain):
    from app.models import Job
    from app.services.read import runs_grid

    job = make_job(now=clock(), task="echo", every="1h", steps=DIAMOND)
    run = runs.trigger_run(job.id, {}, now=clock(), actor="test")
    drain()
    db.session.rollback()
    grid = runs_grid.build([db.session.get(Job, job.id)], now=clock() + timedelta(minutes=1), hours=1)
    [row] = grid.rows
    placed = [execution_id for cell in row.cells for execution_id in cell.execution_ids]
    assert placed == [run.id] and len(steps_of(run.id)) == 4


def test_a_step_in_an_unknown_queue_is_refused_and_a_queue_change_leaves_the_run_unclaimable(app, clock, drain):
    with pytest.raises(ValidationFailed, match="step 'a': queue: "):
        make_job(now=clock(), task="echo", every="1h", steps=[{"name": "a", "task": "wf_emit", "queue": "nope"}])
    job = make_job(now=clock(), task="echo", every="1h", steps=DIAMOND, overlap_policy="queue")
    runs.trigger_run(job.id, {}, now=clock(), actor="test")
    waiting = runs.trigger_run(job.id, {}, now=clock(), actor="test")  # behind the first: no queue
    from tests.factories import make_queue

    make_queue("other", now=clock())
    jobs_service.update_job(job.id, {"queue": "other"}, now=clock(), actor="test")
    db.session.rollback()
    assert db.session.get(Execution, waiting.id).queue_id is None  # still no worker may claim it
    drain()
    db.session.rollback()
    assert db.session.get(Execution, waiting.id).status == "pending"


def test_explain_says_why_a_workflow_occurrence_waits(app, clock):
    from app.services.read import explain

    job = make_job(now=clock(), task="echo", every="1h", steps=DIAMOND, overlap_policy="queue")
    first = runs.trigger_run(job.id, {}, now=clock(), actor="test")
    waiting = runs.trigger_run(job.id, {}, now=clock(), actor="test")
    said = explain.explain_execution(waiting.id, now=clock())
    assert said["fate"] == "waiting"
    assert said["summary"].startswith(f"Waiting: workflow run #{first.id} of this job is still running")
