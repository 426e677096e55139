"""The console across projects, on both databases: two organizations with two projects each,
every one with a `default` queue, a job and a failed execution.

In "All projects" (what a member of an organization with several projects sees after signing in)
and in a superuser's "All organizations": every link on the queues, jobs, executions, workers and
alerts pages answers 200 for each role, the lists name each row's project, the queues page links
each same-named queue to its own project, `?queue=` filters find the queues of that name in view,
and no create form is offered that could only fail.
"""

from __future__ import annotations

import re
from html import unescape
from urllib.parse import urlsplit

import pytest

from app.clock import utcnow
from app.extensions import db
from app.models import Project
from app.services.caller import Caller
from app.services.use_cases import jobs, tenancy
from tests.factories import make_alert, make_execution, make_user
from tests.helpers.web import WebClient

PASSWORD = "all-projects-pw"
PAGES = ("/queues/", "/jobs/", "/executions/", "/workers/", "/alerts/")
_HREF = re.compile(r'href="([^"]+)"')


@pytest.fixture
def world(app):
    """default/{default,second} and acme/{main,side}; a job and a failed run in each project."""
    system = Caller.system()
    now = utcnow()
    tenancy.add_project("default", "second", now=now, caller=system)
    tenancy.add_organization("acme", now=now, caller=system)
    tenancy.add_project("acme", "main", now=now, caller=system)
    tenancy.add_project("acme", "side", now=now, caller=system)
    jobs_by_project = {}
    for project in db.session.query(Project).all():
        name = project.full_name
        job = jobs.create_job(
            {
                "name": f"job of {name}",
                "task": "always_succeed",
                "schedule_type": "interval",
                "schedule": {"every": "1h"},
            },
            now=now,
            actor="test",
            caller=Caller.cli(project_id=project.id),
        )
        execution = make_execution(job, "failed", error="boom")
        make_alert(job, execution, f"alert of {name}")
        jobs_by_project[name] = job
    for role in ("viewer", "operator", "admin"):
        make_user(role, PASSWORD, role=role)
    make_user("root", PASSWORD, role=None, superuser=True)
    return jobs_by_project


def signed_in(app, username: str) -> WebClient:
    client = WebClient(app)
    assert client.login(username, PASSWORD).status_code == 302
    return client


def links_of(body: str) -> set[str]:
    """The page's same-site links to pages (not assets, not sign-out, not fragments)."""
    found = set()
    for href in _HREF.findall(body):
        href = unescape(href)
        parts = urlsplit(href)
        if parts.scheme or parts.netloc or not href.startswith("/") or href.startswith("/static/"):
            continue
        if href.startswith(("/auth/", "/api/")):
            continue
        found.add(href)
    return found


@pytest.mark.parametrize("who", ["viewer", "operator", "admin", "root"])
def test_every_link_of_the_lists_answers_200_across_projects(app, world, who):
    client = signed_in(app, who)
    checked = 0
    for page in PAGES:
        response = client.get(page)
        assert response.status_code == 200, (page, response.status_code)
        for href in sorted(links_of(response.get_data(as_text=True))):
            answer = client.get(href)
            if answer.status_code in (301, 302, 303):  # an ambiguous queue name lands on its list
                answer = client.get(answer.headers["Location"])
            assert answer.status_code == 200, f"{who}: {page} links to {href}: {answer.status_code}"
            checked += 1
    assert checked > 20, checked


def test_the_queues_page_links_each_same_named_queue_to_its_own_project(app, world):
    client = signed_in(app, "root")  # every organization: four `default` queues
    body = client.get("/queues/").get_data(as_text=True)
    links = sorted(h for h in links_of(body) if h.startswith("/queues/default"))
    assert len(links) == 4, links
    for href, project in zip(links, sorted(["default/default", "default/second", "acme/main", "acme/side"])):
        page = client.get(href).get_data(as_text=True)
        assert project in page, (href, project)


@pytest.mark.parametrize("who", ["viewer", "root"])
def test_lists_name_the_project_when_more_than_one_is_in_view(app, world, who):
    client = signed_in(app, who)
    projects = ["default/default", "default/second"] + (["acme/main", "acme/side"] if who == "root" else [])
    for page in PAGES[:3]:
        body = client.get(page).get_data(as_text=True)
        assert 'scope="col">Project</th>' in body, page
        for project in projects:
            assert project in body, (page, project)


def test_a_list_of_one_project_has_no_project_column(app, world):
    client = signed_in(app, "admin")
    second = db.session.query(Project).filter_by(name="second").one()
    client.post("/context", {"organization_id": str(second.organization_id), "project_id": str(second.id)})
    for page in PAGES[:3]:
        assert 'scope="col">Project</th>' not in client.get(page).get_data(as_text=True), page


def test_queue_filters_find_the_queues_of_that_name_in_view(app, world):
    client = signed_in(app, "operator")
    response = client.get("/jobs/?queue=default")
    body = response.get_data(as_text=True)
    assert response.status_code == 200, body[:500]
    assert "job of default/default" in body and "job of default/second" in body
    assert "job of acme/main" not in body
    narrowed = client.get("/executions/?queue=default&project=default/second").get_data(as_text=True)
    assert "job of default/second" in narrowed and "job of default/default" not in narrowed
    assert client.get("/executions/?queue=default&project=acme/main").status_code == 400  # not theirs
    assert client.get("/jobs/?queue=nosuch").status_code == 400


def test_queue_actions_act_on_the_queue_of_the_named_project(app, world):
    client = signed_in(app, "admin")
    response = client.post("/queues/default/pause?project=default/second", {"reason": "maintenance"})
    assert response.status_code == 303
    assert "project=default" in response.headers["Location"]
    second = tenancy.find_project("default/second", Caller.system())
    first = tenancy.find_project("default/default", Caller.system())
    from app.models import Queue

    paused = {q.project_id: q.paused for q in db.session.query(Queue).filter_by(name="default")}
    assert paused[second.id] is True and paused[first.id] is False


def test_no_create_form_a_superuser_in_every_organization_could_only_fail(app, world):
    client = signed_in(app, "root")
    queues = client.get("/queues/").get_data(as_text=True)
    assert 'action="/queues/new"' not in queues
    assert "Choose an organization and a project" in queues
    jobs_page = client.get("/jobs/").get_data(as_text=True)
    assert 'href="/jobs/new"' not in jobs_page


def test_the_nav_links_the_tokens_page_and_the_api_docs_and_they_answer(app, world):
    client = signed_in(app, "viewer")
    body = client.get("/dashboard/").get_data(as_text=True)
    for href in ("/tokens/", "/api/docs", "/api/redoc"):
        assert f'href="{href}"' in body, href
        assert client.get(href).status_code == 200, href


def test_switching_in_one_choice_from_a_job_page_lands_on_the_jobs_list(app, world):
    client = signed_in(app, "admin")
    job = world["default/default"]
    second = tenancy.find_project("default/second", Caller.system())
    page = client.get(f"/jobs/{job.id}").get_data(as_text=True)
    assert 'name="context"' in page and f'value="{second.organization_id}:{second.id}"' in page
    response = client.post("/context", {"context": f"{second.organization_id}:{second.id}", "next": f"/jobs/{job.id}"})
    assert response.status_code == 303 and response.headers["Location"].endswith("/jobs/")
    listed = client.get("/jobs/").get_data(as_text=True)
    assert "job of default/second" in listed and "job of default/default" not in listed


def test_projects_rows_open_the_project(app, world):
    client = signed_in(app, "viewer")
    body = client.get("/projects/").get_data(as_text=True)
    second = tenancy.find_project("default/second", Caller.system())
    assert f'name="context" value="{second.organization_id}:{second.id}"' in body


def test_creating_a_superuser_says_so(app):
    result = app.test_cli_runner().invoke(
        args=["user", "create", "root2", "--superuser", "--password-stdin"], input="a-long-password\n"
    )
    assert result.exit_code == 0, result.output
    assert "superuser 'root2': every organization, every right" in result.output and "viewer" not in result.output


def test_dead_letters_on_the_alerts_page_are_paged_newest_first_with_a_note(app):
    from app.models import DeadLetter

    job = jobs.create_job(
        {"name": "dead", "task": "always_fail", "schedule_type": "interval", "schedule": {"every": "1h"}},
        now=utcnow(),
        actor="test",
    )
    ids = []
    for _ in range(55):
        execution = make_execution(job, "dead_lettered")
        db.session.add(
            DeadLetter(execution_id=execution.id, job_id=job.id, reason="attempts used up", created_at=utcnow())
        )
        ids.append(execution.id)
    db.session.commit()
    make_user("dl-viewer", PASSWORD, role="viewer")
    client = signed_in(app, "dl-viewer")
    first = client.get("/alerts/").get_data(as_text=True)
    assert "50 a page" in first and f"/executions/{ids[-1]}" in first and f'/executions/{ids[0]}"' not in first
    assert "Older &rarr;" in first
    second = client.get("/alerts/?page=2").get_data(as_text=True)
    assert f'/executions/{ids[0]}"' in second and f'/executions/{ids[-1]}"' not in second


def test_an_audit_entry_of_many_fields_folds_them_behind_their_names(app, world):
    client = signed_in(app, "admin")
    body = client.get("/audit/?kind=job&action=created").get_data(as_text=True)
    assert '<details class="changes-more"><summary>' in body and "fields: " in body
    folded = body.split('<details class="changes-more">', 1)[1].split("</details>", 1)[0]
    assert "<dt>name</dt>" in folded  # the before/after is still there, on demand
