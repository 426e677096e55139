"""Job names are unique per project (migration 0012), on both databases: two
organizations each create `nightly` through the web and the CLI; a second `nightly` (or `NIGHTLY`)
in the same project is refused without a word about any other project; a job's queue is looked up
in its own project only, so a job never lands in another project's queue."""

from __future__ import annotations

import html
import re

import pytest
from sqlalchemy import select

from app.clock import utcnow
from app.extensions import db
from app.models import Job, Project
from app.services.caller import Caller
from app.services.errors import ValidationFailed
from app.services.use_cases import jobs, queues, tenancy
from tests.factories import make_job, make_user
from tests.helpers.cli import assert_error, ok, ok_json
from tests.helpers.web import WebClient, job_form

PASSWORD = "long enough password"


@pytest.fixture
def acme(app) -> Project:
    """A second organization `acme` with one project `acme/web` (its queue `default`, and `acme-only`)."""
    caller = Caller.cli()
    tenancy.add_organization("acme", now=utcnow(), caller=caller)
    project = tenancy.add_project("acme", "web", now=utcnow(), caller=caller)
    queues.add_queue({"name": "acme-only"}, now=utcnow(), actor="test", caller=Caller.cli(project_id=project.id))
    return project


def operator_of(app, organization: str) -> WebClient:
    username = f"{organization}-operator"
    make_user(username, PASSWORD, role="operator", organization=organization)
    client = WebClient(app)
    assert client.login(username, PASSWORD).status_code == 302
    return client


def jobs_named(name: str) -> list[tuple[str, str]]:
    """(job name, project full name) of every job called `name` in any case, by id."""
    db.session.rollback()
    found = db.session.scalars(select(Job).where(Job.name.ilike(name)).order_by(Job.id))
    return [(job.name, db.session.get(Project, job.project_id).full_name) for job in found]


def test_two_organizations_create_the_same_name_on_the_web_and_a_duplicate_stays_inside(app, acme):
    default_operator, acme_operator = operator_of(app, "default"), operator_of(app, "acme")
    assert default_operator.post("/jobs/new", job_form(name="nightly")).status_code == 303
    assert acme_operator.post("/jobs/new", job_form(name="nightly")).status_code == 303
    assert jobs_named("nightly") == [("nightly", "default/default"), ("nightly", "acme/web")]

    for client, name in ((acme_operator, "nightly"), (acme_operator, "NIGHTLY"), (default_operator, "Nightly")):
        refused = client.post("/jobs/new", job_form(name=name))
        assert refused.status_code == 400
        (message,) = re.findall(r'id="name-error"[^>]*>([^<]*)<', refused.get_data(as_text=True))
        assert html.unescape(message).startswith(f"a job named '{name}' already exists in this project"), message
        assert "acme" not in message and "default" not in message
    assert len(jobs_named("nightly")) == 2


def test_the_cli_creates_the_same_name_in_two_projects_and_refuses_it_twice_in_one(app, cli, acme):
    created = ok_json(cli("job", "add", "nightly", "always_succeed", "interval", "--every", "5m", "--json"))
    elsewhere = ok_json(
        cli("job", "add", "nightly", "always_succeed", "interval", "--every", "5m", "--project", "acme/web", "--json")
    )
    assert created["project_id"] != elsewhere["project_id"] == acme.id
    assert_error(
        cli("job", "add", "Nightly", "always_succeed", "interval", "--every", "5m", "--project", "acme/web"),
        "a job named 'Nightly' already exists in this project ('nightly': names differing only in case are the same",
    )
    assert_error(
        cli("job", "add", "nightly", "always_succeed", "interval", "--every", "5m"),
        "a job named 'nightly' already exists in this project",
    )
    listed = ok_json(cli("job", "list", "--project", "acme/web", "--json"))
    assert [(job["id"], job["name"], job["project_id"]) for job in listed] == [(elsewhere["id"], "nightly", acme.id)]
    # Renaming follows the same rule, within the job's own project only.
    other = ok_json(cli("job", "add", "weekly", "always_succeed", "interval", "--every", "5m", "--json"))
    assert_error(cli("job", "edit", other["id"], "--name", "NIGHTLY"), "already exists in this project")
    assert "Updated job" in ok(cli("job", "edit", elsewhere["id"], "--name", "weekly"))
    assert jobs_named("weekly") == [("weekly", "acme/web"), ("weekly", "default/default")]


def test_a_job_cannot_move_into_another_projects_queue(app, cli, acme):
    job = make_job("stays home")
    with pytest.raises(ValidationFailed) as refused:
        jobs.update_job(job.id, {"queue": "acme-only"}, now=utcnow(), actor="test", caller=Caller.cli())
    # The queue is looked up in the job's project, whose queues are listed: not acme's.
    assert refused.value.errors == {
        "queue": "unknown queue 'acme-only'; known queues: default (create one with `flask queue add NAME`)"
    }
    assert_error(cli("job", "edit", job.id, "--queue", "acme-only"), "unknown queue 'acme-only'")
    db.session.rollback()
    assert db.session.get(Job, job.id).project_id == tenancy.working_project(None).id


def test_a_row_written_around_the_use_cases_keeps_its_queues_project(app, acme):
    """The model sets project_id from the queue on insert and when the queue changes, so a direct
    write (a test, a script) cannot leave a job in one project and its queue in another."""
    job = make_job("moved by hand")
    acme_queue = queues.resolve_for_job("default", project_id=acme.id)
    job.queue_id = acme_queue.id
    db.session.commit()
    assert db.session.get(Job, job.id).project_id == acme.id
    db.session.add(
        Job(
            name="added by hand",
            queue_id=acme_queue.id,
            task="always_succeed",
            config={},
            schedule_type="interval",
            schedule={"every": "1m"},
        )
    )
    db.session.commit()
    assert jobs_named("added by hand") == [("added by hand", "acme/web")]
