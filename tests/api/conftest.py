"""Fixtures for the REST API tests: a JSON client, people of each role in two organizations."""

from __future__ import annotations

import pytest

from app.clock import utcnow
from app.services.caller import Caller
from app.services.use_cases import tenancy
from tests.factories import make_user
from tests.helpers.api import PASSWORD, ApiClient


@pytest.fixture
def other_org(app):
    """A second organization `acme` with its project `acme/main`."""
    system = Caller.system()
    tenancy.add_organization("acme", now=utcnow(), caller=system)
    return tenancy.add_project("acme", "main", now=utcnow(), caller=system)


@pytest.fixture
def people(app):
    """admin, operator and viewer of the default organization."""
    return {role: make_user(role, PASSWORD, role=role) for role in ("admin", "operator", "viewer")}


@pytest.fixture
def api(app):
    return ApiClient(app)


@pytest.fixture
def cli(app):
    """Run `flask ARGS...` in-process with Click's runner; stdout and stderr come apart."""
    runner = app.test_cli_runner()

    def invoke(*args, **kwargs):
        return runner.invoke(args=[str(a) for a in args], **kwargs)

    return invoke
