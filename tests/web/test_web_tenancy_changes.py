"""Renaming and deleting projects and the organization on the projects page (admins)."""

from __future__ import annotations

from sqlalchemy import select

from app.clock import utcnow
from app.extensions import db
from app.models import AuditEvent, Job, Project, Queue
from app.services.caller import Caller
from app.services.use_cases import tenancy
from tests.factories import make_job
from tests.helpers.web import signed_in_client


def test_rename_a_project_and_refuse_a_taken_name(app):
    project = tenancy.add_project("default", "reports", now=utcnow(), caller=Caller.system())
    admin = signed_in_client(app, role="admin")
    page = admin.get("/projects/").get_data(as_text=True)
    assert f'action="/projects/{project.id}/rename"' in page and "Rename organization" in page
    taken = admin.post(f"/projects/{project.id}/rename", {"name": "default"})
    assert taken.status_code == 400 and "default/default already exists" in taken.get_data(as_text=True)
    done = admin.post(f"/projects/{project.id}/rename", {"name": "finance"})
    assert done.status_code == 303
    db.session.rollback()
    assert db.session.get(Project, project.id).full_name == "default/finance"
    assert "default/finance" in admin.get("/projects/").get_data(as_text=True)
    assert db.session.scalar(select(AuditEvent).where(AuditEvent.action == "renamed")).actor.startswith("web:")


def test_delete_a_project_refused_then_cascaded(app):
    project = tenancy.add_project("default", "reports", now=utcnow(), caller=Caller.system())
    job = make_job("in-reports")
    job.project_id = project.id
    job.queue_id = db.session.scalar(select(Queue.id).where(Queue.project_id == project.id))
    db.session.commit()
    project_id, job_id = project.id, job.id
    admin = signed_in_client(app, role="admin")
    confirm = admin.get(f"/projects/{project_id}/delete").get_data(as_text=True)
    assert "This deletes project default/reports: 1 project(s) (default/reports), 1 job(s)" in confirm
    assert 'name="cascade"' in confirm
    refused = admin.post(f"/projects/{project_id}/delete", {})
    assert refused.status_code == 409 and "delete with cascade" in refused.get_data(as_text=True)
    db.session.rollback()
    assert db.session.get(Job, job_id) is not None
    done = admin.post(f"/projects/{project_id}/delete", {"cascade": "y"})
    assert done.status_code == 303
    db.session.rollback()
    assert db.session.get(Project, project_id) is None and db.session.get(Job, job_id) is None
    assert signed_in_client(app, role="operator").get(f"/projects/{project_id}/delete").status_code == 403
    default = db.session.scalar(select(Project).where(Project.name == "default"))
    assert admin.get(f"/projects/{default.id}/delete").status_code == 409  # never the default project
