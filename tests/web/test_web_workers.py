"""Workers page: the registry (states, queues, running executions with start times), drain and
stop orders stored for the worker; who may do what, CSRF; and the Cancel button of a running
execution's page (the worker's side of cancelling is tested with real processes elsewhere)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from app.clock import utcnow
from app.extensions import db
from app.models import Event, Execution, Heartbeat, WorkerCommand
from tests.factories import make_execution, make_heartbeat, make_job
from tests.helpers.web import WebClient, signed_in_client


@pytest.fixture
def operator(app):
    return signed_in_client(app, role="operator")


@pytest.fixture
def viewer(app):
    return signed_in_client(app, role="viewer")


def beat(process_id: str, *, age_seconds: float = 1, **info) -> Heartbeat:
    """A worker heartbeat carrying what a worker writes (state, slots, queues, executions)."""
    row = make_heartbeat(process_id, "worker", age_seconds=age_seconds)
    row.info = {"state": "running", "slots": 4, "busy": 0, "queues": ["*"], "running": [], "executions": [], **info}
    db.session.commit()
    return row


def orders() -> list[tuple[str, str, str]]:
    db.session.rollback()
    rows = db.session.scalars(select(WorkerCommand).order_by(WorkerCommand.id))
    return [(c.worker_id, c.command, c.issued_by.split("-")[0]) for c in rows]


def row_of(body: str, worker_id: str) -> str:
    return body.split(f">{worker_id}<", 1)[1].split("</tr>", 1)[0]


def test_the_registry_shows_every_worker_with_its_state_and_work(app, viewer):
    job = make_job("nightly", queue="reports")
    running = make_execution(job, "running")
    running.claimed_by = "w-busy"  # what the worker's claim writes: the page checks the heartbeat against it
    db.session.commit()
    started = (utcnow() - timedelta(seconds=30)).replace(microsecond=0)
    beat(
        "w-busy",
        busy=1,
        queues=["default", "reports"],
        running=[running.id],
        executions=[
            {
                "id": running.id,
                "job_id": job.id,
                "job_name": "nightly",
                "attempt": 1,
                "started_at": started.isoformat().replace("+00:00", "Z"),
            }
        ],
    )
    beat("w-drain", state="draining", slots=2)
    beat("w-gone", state="stopped", age_seconds=5)
    beat("w-stale", age_seconds=app.config["HEARTBEAT_STALE_SECONDS"] + 10)
    make_heartbeat("scheduler-1", "scheduler", age_seconds=1)

    body = viewer.get("/workers/").get_data(as_text=True)
    busy = row_of(body, "w-busy")
    assert "host-a / 4242" in busy and "1 / 4" in busy and ">running<" in busy and "busy" in busy
    assert 'href="/queues/default"' in busy and 'href="/queues/reports"' in busy
    assert f'href="/executions/{running.id}"' in busy and "nightly" in busy
    assert started.strftime("%Y-%m-%d %H:%M:%S") in busy  # the start time, in UTC
    assert ">draining<" in row_of(body, "w-drain") and "0 / 2" in row_of(body, "w-drain")
    assert ">stopped<" in row_of(body, "w-gone")
    assert ">stale<" in row_of(body, "w-stale") and ">all<" in row_of(body, "w-stale")
    assert "scheduler-1" not in body
    # Live ones first: running, draining, stale, stopped.
    assert body.index("w-busy") < body.index("w-drain") < body.index("w-stale") < body.index("w-gone")
    # A viewer sees no buttons.
    assert "/drain" not in body and "/stop" not in body


def test_the_page_polls_and_htmx_gets_the_fragment(app, viewer):
    beat("w-1")
    assert 'data-poll hx-get="/workers/"' in viewer.get("/workers/").get_data(as_text=True)
    fragment = viewer.get("/workers/", htmx=True).get_data(as_text=True)
    assert 'id="workers-table"' in fragment and "<html" not in fragment and "w-1" in fragment


def test_no_workers(app, viewer):
    assert "No worker has reported" in viewer.get("/workers/").get_data(as_text=True)


def test_buttons_follow_the_state(app, operator):
    beat("w-live")
    beat("w-drain", state="draining")
    beat("w-gone", state="stopped")
    beat("w-stale", age_seconds=app.config["HEARTBEAT_STALE_SECONDS"] + 10)
    body = operator.get("/workers/").get_data(as_text=True)
    live = row_of(body, "w-live")
    assert "/workers/w-live/drain" in live and "/workers/w-live/stop" in live
    draining = row_of(body, "w-drain")
    assert "/drain" not in draining and "/workers/w-drain/stop" in draining
    for gone in ("w-gone", "w-stale"):
        assert "/drain" not in row_of(body, gone) and "/stop" not in row_of(body, gone)


def test_drain_then_stop_are_stored_for_the_worker_and_audited(app, operator):
    beat("w-1")
    response = operator.post("/workers/w-1/drain")
    assert response.status_code == 303 and response.headers["Location"].endswith("/workers/")
    assert orders() == [("w-1", "drain", "web:operator")]
    page = operator.get("/workers/").get_data(as_text=True)
    assert "told to drain" in page and "drain ordered" in page
    assert "/workers/w-1/drain" not in page  # ordered once

    assert operator.post("/workers/w-1/drain").status_code == 303  # again: refused with a message
    assert "already draining or stopping" in operator.get("/workers/").get_data(as_text=True)
    assert len(orders()) == 1

    assert operator.post("/workers/w-1/stop").status_code == 303
    assert orders()[-1] == ("w-1", "stop", "web:operator")
    db.session.rollback()
    kinds = [e.type for e in db.session.scalars(select(Event).order_by(Event.id))]
    assert "worker_drain_requested" in kinds and "worker_stop_requested" in kinds


def test_each_worker_shows_its_tasks_and_versions_and_a_reload_button(app, operator):
    live = beat("w-live")
    live.tasks = {"echo": "sha256:aaaaaaaaaaaa", "acme_greet": "2.1.0", "always_succeed": "sha256:aaaaaaaaaaaa"}
    beat("w-old")  # a release before advertising
    beat("w-drain", state="draining")
    db.session.commit()
    body = operator.get("/workers/").get_data(as_text=True)
    row = row_of(body, "w-live")
    assert "3 tasks" in row and "sha256:aaaaaaaaaaaa" in row and "acme_greet" in row and "2.1.0" in row
    assert "/workers/w-live/reload" in row
    assert "advertises none" in row_of(body, "w-old")
    assert "/reload" not in row_of(body, "w-drain")


def test_reload_is_stored_for_the_worker_audited_and_refused_twice(app, operator, viewer):
    beat("w-1")
    assert viewer.post("/workers/w-1/reload").status_code == 403
    assert operator.post("/workers/w-1/reload", csrf=False).status_code == 400
    assert orders() == []
    response = operator.post("/workers/w-1/reload")
    assert response.status_code == 303 and response.headers["Location"].endswith("/workers/")
    assert orders() == [("w-1", "reload", "web:operator")]
    page = operator.get("/workers/").get_data(as_text=True)
    assert "told to reload" in page and "reload ordered" in page
    assert "/workers/w-1/reload" not in row_of(page, "w-1") and "/workers/w-1/drain" in row_of(page, "w-1")
    operator.post("/workers/w-1/reload")
    assert "has already been told to reload" in operator.get("/workers/").get_data(as_text=True)
    assert len(orders()) == 1
    assert operator.post("/workers/nope/reload").status_code == 404
    db.session.rollback()
    assert [e.type for e in db.session.scalars(select(Event).order_by(Event.id))].count("worker_reload_requested") == 1
    # A worker taking it shows reloading until its fork server runs the new code.
    row = db.session.get(Heartbeat, "w-1")
    row.info = {**row.info, "reloading": True}
    db.session.commit()
    assert "reloading" in row_of(operator.get("/workers/").get_data(as_text=True), "w-1")


def test_a_worker_id_with_a_slash_is_addressed_whole(app, operator):
    beat("pool/a-1")
    assert "/workers/pool/a-1/drain" in operator.get("/workers/").get_data(as_text=True)
    assert operator.post("/workers/pool/a-1/drain").status_code == 303
    assert orders() == [("pool/a-1", "drain", "web:operator")]


@pytest.mark.parametrize("state,age,message", [("stopped", 1, "already stopped"), ("running", None, "is stale")])
def test_orders_to_a_stopped_or_stale_worker_are_refused_with_a_message(app, operator, state, age, message):
    beat("w-x", state=state, age_seconds=age if age is not None else app.config["HEARTBEAT_STALE_SECONDS"] + 10)
    assert operator.post("/workers/w-x/stop").status_code == 303
    assert message in operator.get("/workers/").get_data(as_text=True)
    assert orders() == []


@pytest.mark.parametrize("path", ["/workers/nope/drain", "/workers/nope/stop", "/workers/a%00b/stop"])
def test_an_unknown_worker_is_the_404_page(app, operator, path):
    make_heartbeat("scheduler-1", "scheduler", age_seconds=1)
    assert operator.post(path).status_code == 404
    assert operator.post("/workers/scheduler-1/drain").status_code == 404  # not a worker
    assert orders() == []


def test_viewers_anonymous_and_tokenless_posts_order_nothing(app, viewer, operator):
    beat("w-1")
    assert viewer.post("/workers/w-1/drain").status_code == 403
    assert viewer.post("/workers/w-1/stop").status_code == 403
    anonymous = WebClient(app).post("/workers/w-1/stop")
    assert anonymous.status_code == 302 and "/auth/login" in anonymous.headers["Location"]
    tokenless = operator.post("/workers/w-1/stop", csrf=False)
    assert tokenless.status_code == 400 and "security token" in tokenless.get_data(as_text=True)
    assert orders() == []


# --- cancel on a running execution's page --------------------------------------------------------


def test_a_running_execution_has_a_cancel_button_that_asks_its_worker(app, operator, viewer):
    job = make_job("long-one")
    execution = make_execution(job, "running", claimed_by="w-1")
    page = operator.get(f"/executions/{execution.id}").get_data(as_text=True)
    assert f'action="/executions/{execution.id}/cancel"' in page and "stop the running task" in page
    assert f"/executions/{execution.id}/cancel" not in viewer.get(f"/executions/{execution.id}").get_data(as_text=True)

    response = operator.post(f"/executions/{execution.id}/cancel")
    assert response.status_code == 303
    db.session.rollback()
    row = db.session.get(Execution, execution.id)
    assert row.status == "running" and row.cancel_requested_at is not None
    assert row.cancel_requested_by.startswith("web:operator")
    page = operator.get(f"/executions/{execution.id}").get_data(as_text=True)
    assert "Cancel requested" in page and 'id="cancel-requested"' in page
    assert f'action="/executions/{execution.id}/cancel"' not in page  # asked once: the button is gone

    again = operator.post(f"/executions/{execution.id}/cancel")
    assert again.status_code == 303
    assert "already being cancelled" in operator.get(f"/executions/{execution.id}").get_data(as_text=True)


def test_a_viewer_cannot_cancel_a_running_execution(app, viewer):
    execution = make_execution(make_job("guarded"), "running", claimed_by="w-1")
    assert viewer.post(f"/executions/{execution.id}/cancel").status_code == 403
    db.session.rollback()
    assert db.session.get(Execution, execution.id).cancel_requested_at is None


def test_a_killed_worker_shows_as_lost_with_its_run_lost_then_recovered_and_nothing_finished(app, viewer):
    """What `kill -9` of a worker mid-run leaves: its last heartbeat names two runs that finished
    after it was written and misses the run it claimed last; that run stays `running` under the
    dead worker's lease until lease recovery settles it."""
    from app.models import Attempt
    from app.services.engine.recovery import recover_expired_leases

    now = utcnow()
    stale = app.config["HEARTBEAT_STALE_SECONDS"] + 30
    job = make_job("nightly", max_attempts=1)
    done = [make_execution(job, "succeeded", now=now - timedelta(seconds=stale + 5)) for _ in range(2)]
    lost = make_execution(
        job,
        "running",
        now=now - timedelta(seconds=stale),
        claimed_by="w-dead",
        lease_expires_at=now - timedelta(seconds=5),
    )
    db.session.query(Attempt).filter_by(execution_id=lost.id).update({"worker_id": "w-dead"})
    db.session.commit()
    row = beat(
        "w-dead",
        age_seconds=stale,
        busy=2,
        running=[e.id for e in done],
        executions=[{"id": e.id, "job_id": job.id, "job_name": "nightly", "attempt": 1} for e in done],
    )
    row.started_at = now - timedelta(hours=1)
    db.session.commit()

    body = viewer.get("/workers/").get_data(as_text=True)
    dead = row_of(body, "w-dead")
    assert ">stale<" in dead and "lost: no heartbeat" in dead and "0 / 4" in dead
    assert all(f"/executions/{e.id}" not in dead for e in done), "a finished run shown as running"
    assert f'href="/executions/{lost.id}"' in dead and "recovered when its lease expires" in dead
    dashboard = viewer.get("/dashboard/panels/heartbeats").get_data(as_text=True)
    assert "busy" not in dashboard.split("w-dead", 1)[1].split("</tr>", 1)[0]

    recover_expired_leases(db.engine, now=now)
    db.session.rollback()
    dead = row_of(viewer.get("/workers/").get_data(as_text=True), "w-dead")
    assert f'href="/executions/{lost.id}"' in dead and "lost, recovered: now" in dead and "dead" in dead
    assert all(f"/executions/{e.id}" not in dead for e in done)
