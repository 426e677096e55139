"""Per-step explain of workflow runs on both databases: `flask job explain` on a workflow job's
occurrence and `flask execution explain` on its run or on one of its steps say, for each step,
why it runs, waits (for which upstream steps, or in its queue, and why) or will not run (which
step upstream failed, and how). The service, the CLI, the API and the job page print the same.

The run is made by a real scheduler tick and real worker turns (an injected clock); a step is
left running by claiming it in a worker turn that records nothing."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from app.executor import ForkServer
from app.extensions import db
from app.models import Execution
from app.services.engine.scheduler import Scheduler
from app.services.engine.worker import Worker
from app.services.read.explain import explain_execution, explain_job
from app.services.use_cases import queues, runs
from app.services.use_cases import workflows as workflow_use_cases
from app.store import store_for
from tests.factories import make_heartbeat, make_job, make_queue, make_user
from tests.helpers import workflow_tasks
from tests.helpers.api import PASSWORD, ApiClient
from tests.helpers.web import signed_in_client

# export -> report-a, report-b -> mail -> notify; archive (in queue `slow`) after export.
STEPS = [
    {"name": "export", "task": "wf_emit", "config": {"value": 1}},
    {"name": "report-a", "task": "wf_emit", "after": ["export"]},
    {"name": "report-b", "task": "wf_fail_unless", "config": {"path": "/nonexistent"}, "after": ["export"]},
    {"name": "mail", "task": "wf_emit", "after": ["report-a", "report-b"]},
    {"name": "notify", "task": "wf_emit", "after": ["mail"]},
    {"name": "archive", "task": "wf_emit", "after": ["export"], "queue": "slow", "max_attempts": 2},
]


@pytest.fixture
def drain(app, clock):
    executor = ForkServer(preload=workflow_tasks.PRELOAD, kill_grace_seconds=1.0)

    def run():
        return Worker(app, worker_id="w-drain", clock=clock, executor=executor).run(burst=True)

    yield run
    executor.stop()


def by_step(document: dict) -> dict[str, dict]:
    return {step["step"]: step for step in document["details"]["steps"]}


def step_ids(run_id: int) -> dict[str, int]:
    db.session.rollback()
    rows = db.session.execute(select(Execution.step, Execution.id).where(Execution.workflow_run_id == run_id))
    return dict(rows.all())


def occurrence(job_id: int, at, now) -> dict:
    db.session.rollback()
    document = explain_job(job_id, at=at, now=now)
    assert document["occurrence"] is not None, document
    return document["occurrence"]


def test_each_step_says_why_it_waits_runs_or_will_not_run(app, clock, drain):
    make_queue("slow", now=clock())
    job = make_job(now=clock(), task="echo", every="1h", steps=STEPS, max_attempts=1)
    clock.advance(hours=1)
    at = clock()
    Scheduler(app, clock=clock).tick()  # the occurrence is created and started: its root is queued

    fate = occurrence(job.id, at, clock())
    run_id = fate["execution_id"]
    assert fate["fate"] == "fired" and fate["details"]["workflow_run_id"] == run_id
    assert fate["summary"].endswith(f"Workflow run #{run_id}: 1 pending, 5 waiting.")
    steps = by_step(fate)
    assert list(steps) == [step["name"] for step in STEPS]
    export_id = step_ids(run_id)["export"]
    assert (steps["export"]["fate"], steps["export"]["execution_id"]) == ("no_worker", export_id)
    assert "no live worker serves queue 'default'" in steps["export"]["summary"]
    for name in ("report-a", "report-b", "archive"):
        assert (steps[name]["fate"], steps[name]["summary"]) == ("waiting_for_upstream", "waiting for `export`")
    assert steps["mail"]["summary"] == "waiting for `report-a`, `report-b`"
    assert steps["mail"]["waiting_for"] == ["report-a", "report-b"]
    make_heartbeat("live-worker", "worker", age_seconds=1, now=clock())
    assert by_step(occurrence(job.id, at, clock()))["export"]["fate"] == "waiting"  # for a free slot

    queues.pause_queue("slow", now=clock(), actor="bob", reason="maintenance")
    drain()  # export, report-a, report-b (fails); archive waits in its paused queue
    steps = by_step(occurrence(job.id, at, clock()))
    ids = step_ids(run_id)
    assert steps["export"]["summary"] == f"succeeded after 1 attempt (execution #{ids['export']})"
    assert (steps["report-b"]["fate"], steps["report-b"]["summary"]) == (
        "failed",
        f"failed after 1 attempt (execution #{ids['report-b']})",
    )
    assert (steps["mail"]["fate"], steps["mail"]["summary"]) == (
        "upstream_failed",
        "upstream_failed: `report-b` failed",
    )
    assert steps["mail"]["failed_upstream"] == [{"step": "report-b", "status": "failed"}]
    assert steps["notify"]["summary"] == "upstream_failed: `report-b` failed (through `mail`)"
    assert steps["archive"]["fate"] == "queue_paused" and steps["archive"]["execution_id"] == ids["archive"]
    assert "queue 'slow' is paused (by bob" in steps["archive"]["summary"]
    assert "maintenance" in steps["archive"]["summary"]
    # The run page and `flask workflow show` give the same reason for a step held back.
    shown = app.test_cli_runner().invoke(args=["workflow", "show", str(run_id), "--json"])
    assert shown.exit_code == 0, shown.output
    assert {s["name"]: s["explain"] for s in json.loads(shown.output)["steps"]}["notify"] == steps["notify"]["summary"]

    queues.resume_queue("slow", now=clock(), actor="bob")
    with db.engine.begin() as conn:  # a worker's turn claims archive and records nothing yet
        [(row, attempt)] = (
            store_for(conn)
            .record_and_claim(
                conn,
                [],
                worker_id="w-explain",
                now=clock(),
                limit=1,
                queue_ids=None,
                lease_seconds=60,
                buffer_seconds=0,
            )
            .started
        )
    assert (row.id, attempt) == (ids["archive"], 1)
    fate = occurrence(job.id, at, clock())
    assert fate["summary"].endswith(f"Workflow run #{run_id}: 2 succeeded, 1 failed, 2 upstream_failed, 1 running.")
    assert (
        by_step(fate)["archive"]["summary"] == f"running on `w-explain`, attempt 1 of 2 (execution #{ids['archive']})"
    )

    # On a step's execution: its own fate, which run and step it is, and the run's steps.
    said = explain_execution(ids["archive"], now=clock())
    assert said["fate"] == "fired" and said["status"] == "running"
    assert said["summary"].endswith(f"It is step `archive` of workflow run #{run_id}.")
    assert (said["details"]["workflow_run_id"], said["details"]["step"]) == (run_id, "archive")
    assert by_step(said) == by_step(fate)
    on_run = explain_execution(run_id, now=clock())
    assert on_run["details"]["workflow_run_id"] == run_id and by_step(on_run) == by_step(fate)

    # The CLI prints one line per step under the occurrence, and under the execution.
    runner = app.test_cli_runner()
    printed = runner.invoke(args=["job", "explain", str(job.id), "--at", at.isoformat()])
    assert printed.exit_code == 0, printed.output
    lines = [line.split(None, 2) for line in printed.output.splitlines() if line.startswith("      ")]
    assert [(name, fate) for name, fate, _ in lines] == [
        ("export", "succeeded"),
        ("report-a", "succeeded"),
        ("report-b", "failed"),
        ("mail", "upstream_failed"),
        ("notify", "upstream_failed"),
        ("archive", "running"),
    ]
    assert lines[4][2] == "upstream_failed: `report-b` failed (through `mail`)"
    printed = runner.invoke(args=["execution", "explain", str(ids["archive"])])
    assert printed.exit_code == 0, printed.output
    assert f"Steps of workflow run #{run_id}:" in printed.output
    assert "upstream_failed: `report-b` failed" in printed.output and "running on `w-explain`" in printed.output
    as_json = runner.invoke(args=["job", "explain", str(job.id), "--at", at.isoformat(), "--json"])
    assert [s["fate"] for s in json.loads(as_json.output)["occurrence"]["details"]["steps"]] == [
        "succeeded",
        "succeeded",
        "failed",
        "upstream_failed",
        "upstream_failed",
        "running",
    ]


def test_a_retry_names_what_it_took_over_and_a_cancel_who_stopped_each_step(app, clock, drain, tmp_path):
    marker = tmp_path / "report-may-succeed"
    steps = [
        {"name": "export", "task": "wf_emit"},
        {"name": "report", "task": "wf_fail_unless", "config": {"path": str(marker)}, "after": ["export"]},
        {"name": "mail", "task": "wf_emit", "after": ["report"]},
    ]
    job = make_job(now=clock(), task="echo", every="1h", steps=steps, max_attempts=1)
    first = runs.trigger_run(job.id, {}, now=clock(), actor="test")
    drain()
    export_id = step_ids(first.id)["export"]
    marker.touch()
    second = workflow_use_cases.retry_run(first.id, now=clock(), actor="test")  # starts at once
    make_heartbeat("live-worker", "worker", age_seconds=1, now=clock())
    said = by_step(explain_execution(second.id, now=clock()))
    assert (
        said["export"]["summary"]
        == f"taken over from workflow run {first.id}, where it succeeded (execution #{export_id})"
    )
    assert said["report"]["fate"] == "waiting" and said["report"]["status"] == "pending"  # for a free slot
    assert said["mail"]["summary"] == "waiting for `report`"

    workflow_use_cases.cancel_run(second.id, now=clock(), actor="alice", reason="wrong input")
    said = by_step(explain_execution(second.id, now=clock()))
    report_id = step_ids(second.id)["report"]
    assert (said["report"]["fate"], said["report"]["summary"]) == (
        "cancelled",
        f"cancelled (execution #{report_id}): cancelled by alice: wrong input with workflow run {second.id}",
    )
    assert (said["mail"]["fate"], said["mail"]["summary"]) == (
        "cancelled",
        "will not run: the run was cancelled by alice",
    )


def test_the_api_and_the_job_page_carry_the_same_per_step_explain(app, clock, drain):
    make_user("viewer", PASSWORD, role="viewer")
    job = make_job(now=clock(), task="echo", every="1h", steps=STEPS[:4], max_attempts=1)
    clock.advance(hours=1)
    at = clock()
    Scheduler(app, clock=clock).tick()
    drain()
    api = ApiClient(app)
    api.login("viewer")
    answer = api.get(f"/api/v1/jobs/{job.id}/explain?at={at.strftime('%Y-%m-%dT%H:%M:%SZ')}")
    assert answer.status_code == 200, answer.get_data(as_text=True)
    steps = by_step(answer.json["occurrence"])
    assert steps["mail"]["summary"] == "upstream_failed: `report-b` failed"
    ids = step_ids(answer.json["occurrence"]["execution_id"])
    assert "mail" not in ids  # held back: it never got an execution
    on_step = api.get(f"/api/v1/executions/{ids['report-b']}/explain")
    assert on_step.status_code == 200 and on_step.json["details"]["step"] == "report-b"
    assert by_step(on_step.json)["mail"]["fate"] == "upstream_failed"

    page = signed_in_client(app, "viewer").get(
        f"/jobs/{job.id}/explain", query_string={"at": at.isoformat()}, htmx=True
    )
    body = page.get_data(as_text=True)
    assert page.status_code == 200 and 'class="explain-steps small"' in body
    assert "upstream_failed: `report-b` failed" in body and "<code>mail</code>" in body
