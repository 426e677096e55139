"""`flask org rename|delete` and `flask project rename|delete`: names change everywhere at once,
ids never; deletes are refused while work remains, then cascaded; all audited."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import func, select

from app.clock import utcnow
from app.extensions import db
from app.models import AuditEvent, Execution, Job, Organization, Project, Queue
from app.services.caller import Caller
from app.services.engine.scheduler import Scheduler
from app.services.engine.worker import Worker
from app.services.use_cases import tenancy
from tests.factories import make_execution
from tests.helpers.cli import assert_error, ok, ok_json


def acme_with_work(cli) -> dict:
    system = Caller.system()
    tenancy.add_organization("acme", now=utcnow(), caller=system)
    project = tenancy.add_project("acme", "web", now=utcnow(), caller=system)
    ok(cli("queue", "add", "reports", "--project", "acme/web"))
    job = ok_json(
        cli(
            "job",
            "add",
            "nightly",
            "always_succeed",
            "interval",
            "--every",
            "1m",
            "--queue",
            "reports",
            "--project",
            "acme/web",
            "--json",
        )
    )
    return {"project": project.id, "job": job["id"]}


def count(model, *where) -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(model).where(*where))


def test_rename_while_the_scheduler_and_a_worker_run(app, cli):
    ids = acme_with_work(cli)
    now = utcnow()
    job = db.session.get(Job, ids["job"])
    job.next_run_at = now - timedelta(seconds=1)
    db.session.commit()
    Scheduler(app, scheduler_id="s", clock=lambda: now).tick(now)
    assert ok(cli("org", "rename", "acme", "acme-corp")).startswith("Renamed organization 'acme' to 'acme-corp'")
    renamed = ok_json(cli("project", "rename", "acme-corp/web", "frontend", "--json"))
    assert (renamed["id"], renamed["full_name"]) == (ids["project"], "acme-corp/frontend")
    Worker(app, worker_id="w").run(burst=True)  # the run made before the renames still runs
    later = now + timedelta(minutes=1)
    Scheduler(app, scheduler_id="s", clock=lambda: later).tick(later)
    db.session.rollback()
    statuses = [
        e.status
        for e in db.session.scalars(select(Execution).where(Execution.job_id == ids["job"]).order_by(Execution.id))
    ]
    assert statuses[0] == "succeeded" and len(statuses) == 2  # nothing lost, the next occurrence made
    # the new names work everywhere, the old ones are gone
    listed = ok_json(cli("job", "list", "--project", "acme-corp/frontend", "--json"))
    assert [j["id"] for j in listed] == [ids["job"]]
    assert_error(cli("job", "list", "--project", "acme/web"), "does not exist")
    assert ok_json(cli("verify", "--json"))["ok"] is True
    actions = {(a.object_kind, a.action) for a in db.session.scalars(select(AuditEvent))}
    assert {("organization", "renamed"), ("project", "renamed")} <= actions


def test_rename_refuses_a_taken_or_bad_name(app, cli):
    acme_with_work(cli)
    assert_error(cli("org", "rename", "acme", "default"), "already exists")
    assert_error(cli("org", "rename", "acme", "Bad Name"), "name")
    assert_error(cli("org", "rename", "nope", "x"), "does not exist")
    ok(cli("project", "add", "acme", "api"))
    assert_error(cli("project", "rename", "acme/web", "api"), "acme/api already exists")


def test_delete_is_refused_then_cascaded(app, cli):
    ids = acme_with_work(cli)
    make_execution(db.session.get(Job, ids["job"]), "running")
    result = cli("project", "delete", "acme/web")
    assert result.exit_code == 1 and "1 job(s)" in result.stderr and "cascade" in result.stderr
    assert count(Project, Project.id == ids["project"]) == 1
    declined = cli("project", "delete", "acme/web", "--cascade", input="n\n")
    assert declined.exit_code == 1 and "This deletes project acme/web" in declined.stderr
    assert count(Job) == 1
    out = ok(cli("project", "delete", "acme/web", "--cascade", input="y\n"))
    assert "Deleted project acme/web: 1 project(s) (acme/web), 1 job(s), 1 queue(s)" in out and "(1 running)" in out
    assert count(Project, Project.id == ids["project"]) == 0
    assert count(Job, Job.id == ids["job"]) == 0 and count(Queue, Queue.project_id == ids["project"]) == 0
    assert count(Execution) == 0
    assert count(AuditEvent, AuditEvent.object_kind == "project", AuditEvent.action == "deleted") == 1
    assert count(AuditEvent, AuditEvent.object_kind == "job", AuditEvent.action == "deleted") == 1


def test_delete_an_organization(app, cli):
    acme_with_work(cli)
    assert_error(cli("org", "delete", "acme"), "cascade")
    doc = ok_json(cli("org", "delete", "acme", "--cascade", "--yes", "--json"))
    assert doc["projects"] == ["acme/web"] and doc["jobs"] == 1
    assert count(Organization, Organization.name == "acme") == 0
    assert_error(cli("org", "delete", "default", "--cascade", "--yes"), "cannot be deleted")
    assert_error(cli("project", "delete", "default/default", "--cascade", "--yes"), "cannot be deleted")
    tenancy.add_organization("empty", now=utcnow(), caller=Caller.system())
    assert "Deleted organization 'empty'" in ok(cli("org", "delete", "empty"))  # nothing in it: no cascade needed
