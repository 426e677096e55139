"""The job's isolation field through every adapter: CLI, web form, API document; bad values are
refused with a specific error; the default is process."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from app.extensions import db
from app.models import Job
from tests.helpers.cli import assert_usage_error, ok_json
from tests.helpers.web import job_form, signed_in_client


def job_named(name: str) -> Job:
    db.session.expire_all()
    return db.session.scalar(select(Job).where(Job.name == name))


def test_cli_add_and_edit_set_isolation_and_json_shows_it(cli):
    doc = ok_json(cli("job", "add", "pinger", "always_succeed", "interval", "--every", "30s", "--json"))
    assert doc["isolation"] == "process"  # the default
    doc = ok_json(cli("job", "edit", doc["id"], "--isolation", "pool", "--json"))
    assert doc["isolation"] == "pool" and job_named("pinger").isolation == "pool"
    doc = ok_json(
        cli("job", "add", "pooled", "always_succeed", "interval", "--every", "30s", "--isolation", "pool", "--json")
    )
    assert doc["isolation"] == "pool"


def test_cli_refuses_an_unknown_isolation_naming_the_choices(cli):
    assert_usage_error(
        cli("job", "add", "bad", "always_succeed", "interval", "--every", "30s", "--isolation", "thread"),
        "'thread' is not one of 'process', 'pool'",
    )
    assert job_named("bad") is None


def test_cli_help_names_both_modes(cli):
    help_text = cli("job", "add", "--help").stdout
    assert "--isolation" in help_text and "pool" in help_text and "process" in help_text


@pytest.fixture
def operator(app):
    return signed_in_client(app, role="operator")


def test_the_form_offers_isolation_and_stores_it(app, operator):
    body = operator.get("/jobs/new").get_data(as_text=True)
    assert 'name="isolation"' in body and 'value="pool"' in body
    assert operator.post("/jobs/new", job_form(name="form-pool", isolation="pool")).status_code == 303
    job = job_named("form-pool")
    assert job.isolation == "pool"
    assert "pool: attempts run in a reused pool process" in operator.get(f"/jobs/{job.id}").get_data(as_text=True)


def test_the_form_shows_a_bad_isolation_inline(app, operator):
    response = operator.post("/jobs/new", job_form(name="form-bad", isolation="thread"))
    assert response.status_code == 400
    assert "Not a valid choice" in response.get_data(as_text=True)
    assert job_named("form-bad") is None
