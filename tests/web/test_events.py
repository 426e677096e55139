"""The event log on the /events page, `flask event list` and `GET /api/v1/events`: events from
real scheduler scenarios, their links, the organization's scope, filters and cursor paging."""

from __future__ import annotations

import json
from datetime import timedelta
from urllib.parse import quote

import pytest
from sqlalchemy import insert

from app.clock import utcnow
from app.database import write_transaction
from app.extensions import db
from app.models import Event
from app.services.caller import Caller
from app.services.engine.scheduler import Scheduler
from app.services.events import insert_event, record_event
from app.services.use_cases import tenancy
from tests.factories import make_due_job, make_execution, make_heartbeat, make_job, make_user
from tests.helpers.api import PASSWORD, ApiClient
from tests.helpers.cli import ok, ok_json
from tests.helpers.web import WebClient, signed_in_client


def tick(app, at):
    Scheduler(app, scheduler_id="s", clock=lambda: at).tick(at)
    db.session.rollback()


@pytest.fixture
def scenarios(app):
    """A misfire (the scheduler was down ten minutes), an overlap skip (a run still pending at the
    next occurrence) and a lease recovered from a worker that was killed mid-run."""
    now = utcnow()
    late = make_due_job(
        next_run_at=now - timedelta(minutes=10), misfire_policy="coalesce", overlap_policy="allow", name="late"
    )
    busy = make_due_job(next_run_at=now - timedelta(seconds=50), overlap_policy="skip", name="busy", every="1m")
    killed = make_job("killed", now=now - timedelta(hours=1), every="1d")
    orphan = make_execution(
        killed, "running", claimed_by="w-killed", lease_expires_at=now - timedelta(minutes=5), trigger="manual"
    )
    make_heartbeat("w-killed", "worker", age_seconds=600)
    tick(app, now - timedelta(seconds=40))  # busy: its first run, left pending (no worker)
    tick(app, now + timedelta(seconds=15))  # busy's next occurrence finds it active; late misfires
    return {"late": late.id, "busy": busy.id, "killed": killed.id, "orphan": orphan.id}


def listed(body: str) -> str:
    """The events table of a page (not the explanations of the kinds below it)."""
    return body.split('id="events-list"', 1)[1].split('id="kinds-title"', 1)[0]


def by_kind(items: list[dict]) -> dict[str, dict]:
    return {item["kind"]: item for item in items}


def test_scenario_events_in_the_cli_with_their_job_execution_and_worker(app, cli, scenarios):
    events = by_kind(ok_json(cli("event", "list", "--json")))
    assert events["misfire_coalesced"]["job_id"] == scenarios["late"]
    assert events["misfire_coalesced"]["payload"]["occurrences"] >= 5
    skipped = events["overlap_skipped"]
    assert skipped["job_id"] == scenarios["busy"] and skipped["execution_id"] is not None
    recovered = events["lease_recovered"]
    assert (recovered["job_id"], recovered["execution_id"], recovered["worker_id"]) == (
        scenarios["killed"],
        scenarios["orphan"],
        "w-killed",
    )
    assert "lease" in recovered["explanation"]
    ids = [item["id"] for item in ok_json(cli("event", "list", "--json"))]
    assert ids == sorted(ids, reverse=True)  # newest first

    only = ok_json(cli("event", "list", "--kind", "overlap_skipped", "--json"))
    assert [item["kind"] for item in only] == ["overlap_skipped"]
    mine = ok_json(cli("event", "list", "--job", scenarios["killed"], "--json"))
    assert {item["job_id"] for item in mine} == {scenarios["killed"]}
    text = ok(cli("event", "list", "--limit", "200"))
    assert (
        "lease_recovered" in text and "w-killed" in text and text.splitlines()[0].split()[:3] == ["ID", "WHEN", "(UTC)"]
    )
    future = (utcnow() + timedelta(days=1)).isoformat()
    assert ok_json(cli("event", "list", "--since", future, "--json")) == []


def test_cli_refuses_an_unknown_kind_and_a_bad_instant(app, cli):
    result = cli("event", "list", "--kind", "nonsense")
    assert result.exit_code == 1 and "unknown event kind 'nonsense'" in result.stderr
    result = cli("event", "list", "--since", "yesterday")
    assert result.exit_code == 1 and "--since" in result.stderr


def test_scenario_events_on_the_page_with_links(app, scenarios):
    client = signed_in_client(app, role="operator")
    response = client.get("/events/")
    page = response.get_data(as_text=True)
    body = listed(page)
    assert response.status_code == 200
    for kind in ("misfire_coalesced", "overlap_skipped", "lease_recovered"):
        assert f"<code>{kind}</code>" in body
    assert f'href="/jobs/{scenarios["late"]}"' in body
    assert f'href="/executions/{scenarios["orphan"]}"' in body
    assert 'href="/workers/#worker-w-killed"' in body
    assert 'id="kind-lease_recovered"' in page and "What each kind means" in page
    assert 'href="/events/"' in page  # the nav link

    only = listed(client.get("/events/?kind=overlap_skipped").get_data(as_text=True))
    assert "<code>overlap_skipped</code>" in only and "<code>lease_recovered</code>" not in only
    by_worker = listed(client.get("/events/?worker=w-killed").get_data(as_text=True))
    assert "<code>lease_recovered</code>" in by_worker and "<code>misfire_coalesced</code>" not in by_worker
    by_queue = listed(client.get("/events/?queue=default").get_data(as_text=True))
    assert "<code>misfire_coalesced</code>" in by_queue
    poll = client.get("/events/?kind=lease_recovered", htmx=True, headers={"HX-Target": "events-list"})
    fragment = poll.get_data(as_text=True)
    assert fragment.strip().startswith('<div id="events-list" data-poll')
    assert "<html" not in fragment and "<code>lease_recovered</code>" in fragment


def test_page_filters_with_bad_input_say_why(app, scenarios):
    client = signed_in_client(app, role="admin")
    for query, message in (
        ("kind=nonsense", "is not an event kind"),
        ("job=abc", "Job ID must be the id of a job"),
        ("job=999999", "job 999999 does not exist"),
        ("queue=nope", "nope"),
        ("since=yesterday", "Since"),
    ):
        response = client.get(f"/events/?{query}")
        assert response.status_code == 400 and message in response.get_data(as_text=True), query


def test_viewers_and_visitors_are_refused(app):
    assert WebClient(app).get("/events/").status_code == 302
    assert signed_in_client(app, role="viewer").get("/events/").status_code == 403


def test_scenario_events_in_the_api(app, scenarios):
    make_user("op", PASSWORD, role="operator")
    api = ApiClient(app)
    api.login("op")
    page = api.get("/api/v1/events?limit=200").get_json()
    events = by_kind(page["items"])
    assert events["lease_recovered"]["worker_id"] == "w-killed"
    assert events["overlap_skipped"]["job_id"] == scenarios["busy"]
    filtered = api.get(f"/api/v1/events?kind=misfire_coalesced&job={scenarios['late']}").get_json()["items"]
    assert [(e["kind"], e["job_id"]) for e in filtered] == [("misfire_coalesced", scenarios["late"])]
    assert api.get("/api/v1/events?kind=nonsense").status_code == 422
    assert api.get("/api/v1/events?job=999999").status_code == 404
    make_user("viewer", PASSWORD, role="viewer")
    viewer = ApiClient(app)
    viewer.login("viewer")
    assert viewer.get("/api/v1/events").status_code == 403
    assert "/api/v1/events" in api.get("/api/v1/openapi.json").get_json()["paths"]


def test_another_organizations_events_are_absent_and_its_job_is_404(app, scenarios):
    system = Caller.system()
    tenancy.add_organization("acme", now=utcnow(), caller=system)
    tenancy.add_project("acme", "main", now=utcnow(), caller=system)
    make_user("acme-op", PASSWORD, role="operator", organization="acme")
    api = ApiClient(app)
    api.login("acme-op")
    assert api.get("/api/v1/events").get_json()["items"] == []
    assert api.get(f"/api/v1/events?job={scenarios['killed']}").status_code == 404
    web = WebClient(app)
    web.login("acme-op", PASSWORD)
    body = listed(web.get("/events/").get_data(as_text=True))
    assert "No events match." in body and "<code>" not in body
    refused = web.get(f"/events/?job={scenarios['killed']}")
    assert refused.status_code == 400 and f"job {scenarios['killed']} does not exist" in refused.get_data(as_text=True)


def test_filters_and_cursor_paging_over_ten_thousand_events(app, cli):
    job = make_job("chatty")
    other = make_job("quiet")
    start = utcnow() - timedelta(days=1)
    rows = [
        {
            "type": "retry_scheduled" if n % 4 else "lease_recovered",
            "job_id": job.id if n % 10 else other.id,
            "execution_id": n + 1,
            "actor": "system",
            "worker_id": f"w-{n % 3}",  # what the writers copy out of the payload
            "payload": {"worker_id": f"w-{n % 3}"},
            "created_at": start + timedelta(seconds=n),
        }
        for n in range(10_000)
    ]
    db.session.execute(insert(Event), rows)
    db.session.commit()
    make_user("op", PASSWORD, role="operator")
    api = ApiClient(app)
    api.login("op")

    def walk(query: str) -> list[int]:
        seen, url = [], f"/api/v1/events?limit=200&{query}"
        while url:
            page = api.get(url).get_json()
            seen += [item["id"] for item in page["items"]]
            url = page["next"]
        return seen

    everything = walk("")
    assert len(everything) >= 10_000 and everything == sorted(everything, reverse=True)
    assert len(set(everything)) == len(everything)  # no event twice across pages
    assert len(walk("kind=lease_recovered")) == 2_500
    assert len(walk(f"job={other.id}&kind=lease_recovered")) == len([n for n in range(10_000) if n % 20 == 0])
    middle = quote((start + timedelta(seconds=5_000)).isoformat())
    assert len(walk(f"since={middle}&job={job.id}&kind=retry_scheduled")) == len(
        [n for n in range(5_000, 10_000) if n % 10 and n % 4]
    )
    assert len(walk(f"until={middle}&worker=w-0&job={job.id}")) == len(
        [n for n in range(5_000) if n % 10 and n % 3 == 0]
    )

    # The page pages by cursor: 50 a page, `Older` goes on from the last one shown.
    client = signed_in_client(app, role="operator")
    first = client.get(f"/events/?job={job.id}").get_data(as_text=True)
    assert first.count('<tr id="event-') == 50 and "Older" in first
    cursor = int(first.split("before=")[1].split("&")[0].split('"')[0])
    second = client.get(f"/events/?job={job.id}&before={cursor}").get_data(as_text=True)
    assert second.count('<tr id="event-') == 50 and f'id="event-{cursor}"' not in second
    assert f'id="event-{cursor - 1}"' in second or f'id="event-{cursor - 2}"' in second
    # and the CLI by --before
    listed = ok_json(cli("event", "list", "--job", job.id, "--before", cursor, "--limit", "10", "--json"))
    assert len(listed) == 10 and all(item["id"] < cursor for item in listed)
    assert json.dumps(listed)  # JSON all through


def test_the_writers_store_the_worker_an_event_names_and_the_filters_find_it(app, cli):
    """Both writers (engine code's `insert_event`, the ORM's `record_event`) copy the payload's
    worker_id into the column the worker filter reads; retention removes those events like any."""
    job = make_job("cancelled", retention_days=30)
    old = utcnow() - timedelta(days=100)  # past the job's retention_days and EVENT_RETENTION_DAYS (90)
    with write_transaction(db.engine) as conn:
        insert_event(conn, "worker_lost", now=old, worker_id="w-engine", runs_in_flight=1)
        insert_event(conn, "worker_lost", now=old, worker_id=None)  # a worker not known names none
    record_event(
        "execution_cancel_requested", now=old, actor="op", job_id=job.id, execution_id=1, worker_id="w-orm", reason="x"
    )
    record_event("job_created", now=old, actor="op", name="plain")
    db.session.commit()
    stored = {(e.type, e.worker_id) for e in db.session.query(Event)}
    assert stored == {
        ("worker_lost", "w-engine"),
        ("worker_lost", None),
        ("execution_cancel_requested", "w-orm"),
        ("job_created", None),
    }
    engine_side = ok_json(cli("event", "list", "--worker", "w-engine", "--json"))
    assert [(e["kind"], e["worker_id"]) for e in engine_side] == [("worker_lost", "w-engine")]
    make_user("op", PASSWORD, role="operator")
    api = ApiClient(app)
    api.login("op")
    orm_side = api.get("/api/v1/events?worker=w-orm").get_json()["items"]
    assert [(e["kind"], e["payload"]["worker_id"]) for e in orm_side] == [("execution_cancel_requested", "w-orm")]
    page = listed(signed_in_client(app, role="operator").get("/events/?worker=w-orm").get_data(as_text=True))
    assert "<code>execution_cancel_requested</code>" in page and "<code>worker_lost</code>" not in page

    assert ok_json(cli("prune-history", "--json"))["events_deleted"] == 4
    db.session.rollback()
    assert ok_json(cli("event", "list", "--worker", "w-engine", "--json")) == []
    assert api.get("/api/v1/events?worker=w-orm").get_json()["items"] == []


def test_history_retention_prunes_events_and_says_how_many(app, cli):
    now = utcnow()
    short = make_job("short", retention_days=7)
    forever = make_job("forever", retention_days=0)

    def event(kind: str, job_id, days: float) -> None:
        db.session.execute(
            insert(Event),
            [
                {
                    "type": kind,
                    "job_id": job_id,
                    "actor": "system",
                    "payload": {},
                    "created_at": now - timedelta(days=days),
                }
            ],
        )

    event("retry_scheduled", short.id, 10)  # past its job's retention_days: goes
    event("retry_scheduled", short.id, 1)  # kept
    event("retry_scheduled", forever.id, 400)  # its job keeps history forever: kept
    event("audit_pruned", None, 100)  # no job, past EVENT_RETENTION_DAYS (90): goes
    event("retry_scheduled", 999_999, 95)  # a deleted job's: goes
    event("audit_pruned", None, 10)  # kept
    event("history_pruned", None, 1000)  # the ledger reads these: kept
    db.session.commit()
    before = db.session.query(Event).count()

    dry = ok(cli("prune-history", "--dry-run"))
    assert "would delete 3 event(s)" in dry
    assert ok_json(cli("prune-history", "--json"))["events_deleted"] == 3
    db.session.rollback()
    assert db.session.query(Event).count() == before - 3 + 1  # and one history_pruned says so
    [latest] = [
        e
        for e in ok_json(cli("event", "list", "--kind", "history_pruned", "--json"))
        if e["payload"].get("events_deleted")
    ]
    assert latest["payload"]["events_deleted"] == 3 and latest["payload"]["events_by_job"] == {
        str(short.id): 1,
        "999999": 1,
    }
    assert "deleted 0 event(s)" in ok(cli("prune-history"))
    assert ok_json(cli("verify", "--json"))["ok"] is True
