"""`flask token create|list|revoke` on both databases: the secret printed once and usable, errors on one line."""

from __future__ import annotations

import json

from tests.factories import make_user
from tests.helpers.api import PASSWORD, ApiClient


def test_create_list_use_and_revoke(app, cli):
    make_user("alice", PASSWORD, role="operator")
    created = cli(
        "token",
        "create",
        "--user",
        "alice",
        "--project",
        "default/default",
        "--role",
        "operator",
        "--name",
        "ci",
        "--json",
    )
    assert created.exit_code == 0, created.output
    document = json.loads(created.stdout)
    assert document["token"].startswith("cw_") and document["project"] == "default/default"
    machine = ApiClient(app, document["token"])
    assert machine.get("/api/v1/me").get_json()["role"] == "operator"
    listed = cli("token", "list")
    assert "ci" in listed.stdout and document["token"] not in listed.stdout
    assert json.loads(cli("token", "list", "--json").stdout)[0]["last_used_at"] is not None
    revoked = cli("token", "revoke", str(document["id"]))
    assert revoked.exit_code == 0 and "revoked" in revoked.stdout
    assert machine.get("/api/v1/me").status_code == 401
    assert json.loads(cli("token", "list", "--json").stdout) == []
    assert len(json.loads(cli("token", "list", "--all", "--json").stdout)) == 1


def test_refusals_are_one_line_and_exit_1(app, cli):
    make_user("vic", PASSWORD, role="viewer")
    too_high = cli("token", "create", "--user", "vic", "--role", "admin", "--name", "x")
    assert too_high.exit_code == 1 and "viewer" in too_high.stderr and len(too_high.stderr.strip().splitlines()) == 1
    unknown = cli("token", "create", "--user", "nobody", "--role", "viewer", "--name", "x")
    assert unknown.exit_code == 1 and "nobody" in unknown.stderr
    project = cli("token", "create", "--user", "vic", "--project", "nope/nope", "--role", "viewer", "--name", "x")
    assert project.exit_code == 1 and "nope/nope" in project.stderr
    assert cli("token", "revoke", "424242").exit_code == 1
    assert cli("token", "list", "--json").stdout.strip() == "[]"
