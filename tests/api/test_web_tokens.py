"""The /tokens/ page: create (secret shown once, usable on the API), list, revoke; errors inline."""

from __future__ import annotations

import re

from tests.factories import make_user
from tests.helpers.api import PASSWORD, ApiClient
from tests.helpers.web import WebClient


def test_create_use_and_revoke_from_the_page(app):
    make_user("olive", PASSWORD, role="operator")
    client = WebClient(app)
    client.login("olive", PASSWORD)
    page = client.get("/tokens/")
    assert page.status_code == 200 and "Create a token" in page.get_data(as_text=True)
    created = client.post("/tokens/", {"name": "ci", "project": "default/default", "role": "operator"})
    assert created.status_code == 201
    secret = re.search(r"data-token-secret>(cw_[^<]+)<", created.get_data(as_text=True)).group(1)
    assert ApiClient(app, secret).get("/api/v1/me").status_code == 200
    listing = client.get("/tokens/").get_data(as_text=True)
    assert secret not in listing and "ci" in listing
    token_id = re.search(r"/tokens/(\d+)/revoke", listing).group(1)
    assert client.post(f"/tokens/{token_id}/revoke").status_code == 302
    assert ApiClient(app, secret).get("/api/v1/me").status_code == 401


def test_a_role_above_yours_is_refused_inline(app):
    make_user("val", PASSWORD, role="viewer")
    client = WebClient(app)
    client.login("val", PASSWORD)
    refused = client.post("/tokens/", {"name": "x", "project": "default/default", "role": "admin"})
    assert refused.status_code == 400
    assert "cannot have the admin role" in refused.get_data(as_text=True)
    blank = client.post("/tokens/", {"name": "", "project": "default/default", "role": "viewer"})
    assert blank.status_code == 400 and "is required" in blank.get_data(as_text=True)
