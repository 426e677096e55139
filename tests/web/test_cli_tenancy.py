"""`flask org|project|user ...` and `--project ORG/PROJECT` on both databases: what each command
stores, its JSON, its refusals (one line on stderr, exit 1, nothing written)."""

from __future__ import annotations

from sqlalchemy import func, select

from app.extensions import db
from app.models import Job, Membership, Organization, Project, Queue, User, WebSession
from tests.helpers.cli import assert_error, assert_usage_error, ok, ok_json

PASSWORD = "long enough password"


def counts() -> dict[str, int]:
    db.session.rollback()
    return {
        model.__tablename__: db.session.scalar(select(func.count()).select_from(model))
        for model in (Organization, Project, Queue, User, Membership, Job)
    }


def user(name: str) -> User:
    db.session.rollback()
    return db.session.scalar(select(User).where(User.username == name))


def test_org_and_project_add_and_list(app, cli):
    created = ok_json(cli("org", "add", "acme", "--json"))
    assert created["name"] == "acme" and created["projects"] == 0
    project = ok_json(cli("project", "add", "acme", "web", "--description", "the web team", "--json"))
    assert project["full_name"] == "acme/web" and project["organization"] == "acme"
    assert ok(cli("project", "add", "acme", "default")).startswith("Created project acme/default")
    assert [o["name"] for o in ok_json(cli("org", "list", "--json"))] == ["acme", "default"]
    listed = ok_json(cli("project", "list", "--json"))
    assert [p["full_name"] for p in listed] == ["acme/default", "acme/web", "default/default"]
    assert [p["full_name"] for p in ok_json(cli("project", "list", "--org", "acme", "--json"))] == [
        "acme/default",
        "acme/web",
    ]
    # Every project gets its default queue.
    db.session.rollback()
    web = db.session.scalar(select(Project).where(Project.name == "web"))
    assert list(db.session.scalars(select(Queue.name).where(Queue.project_id == web.id))) == ["default"]
    assert "acme" in ok(cli("org", "list"))


def test_org_and_project_refusals_write_nothing(app, cli):
    ok(cli("org", "add", "acme"))
    before = counts()
    assert_error(cli("org", "add", "acme"), "an organization named 'acme' already exists")
    assert_error(cli("org", "add", "Not Valid"), "lower-case letters")
    assert_error(cli("project", "add", "nope", "web"), "organization 'nope' does not exist")
    assert_error(cli("project", "add", "acme", "UPPER"), "lower-case letters")
    ok(cli("project", "add", "acme", "web"))
    after = counts()
    assert_error(cli("project", "add", "acme", "web"), "a project named acme/web already exists")
    assert counts() == after and after["projects"] == before["projects"] + 1


def test_user_create_list_set_role_disable_enable_reset(app, cli):
    ok(cli("org", "add", "acme"))
    made = ok_json(
        cli("user", "create", "alice", "--org", "acme", "--role", "admin", "--password-stdin", "--json", input=PASSWORD)
    )
    assert made["memberships"] == [{"organization": "acme", "role": "admin"}] and not made["superuser"]
    assert user("alice").check_password(PASSWORD)
    root = ok_json(cli("user", "create", "root", "--superuser", "--password-stdin", "--json", input=PASSWORD))
    assert root["superuser"] and root["memberships"] == [{"organization": "default", "role": "viewer"}]

    listed = ok_json(cli("user", "list", "--json"))
    assert [u["username"] for u in listed] == ["alice", "root"]
    assert [u["username"] for u in ok_json(cli("user", "list", "--org", "acme", "--json"))] == ["alice"]

    assert ok(cli("user", "set-role", "alice", "operator", "--org", "acme")).strip() == (
        "User 'alice' is now operator of acme"
    )
    ok(cli("user", "set-role", "alice", "--role", "viewer"))  # joins the default organization
    assert sorted((m.organization.name, m.role) for m in user("alice").memberships) == [
        ("acme", "operator"),
        ("default", "viewer"),
    ]

    assert ok_json(cli("user", "disable", "alice", "--json"))["active"] is False
    assert not user("alice").active
    assert ok_json(cli("user", "enable", "alice", "--json"))["active"] is True
    ok(cli("user", "reset-password", "alice", "--password-stdin", input="another long one"))
    assert user("alice").check_password("another long one")


def test_role_change_disable_and_new_password_end_the_users_sessions(app, cli):
    from app.clock import utcnow
    from app.services.use_cases import sessions

    ok(cli("user", "create", "bob", "--role", "operator", "--password-stdin", input=PASSWORD))
    for command in (("set-role", "bob", "viewer"), ("disable", "bob"), ("reset-password", "bob", "--password-stdin")):
        bob = user("bob")
        sessions.start_session(bob.id, now=utcnow())
        assert sessions.count_sessions(bob.id) == 1
        ok(cli("user", *command, input=PASSWORD))
        db.session.rollback()
        assert db.session.scalar(select(func.count()).select_from(WebSession)) == 0, command


def test_user_refusals_write_nothing(app, cli):
    ok(cli("user", "create", "carol", "--password-stdin", input=PASSWORD))
    before = counts()
    assert_error(cli("user", "create", "carol", "--password-stdin", input=PASSWORD), "already exists")
    assert_error(cli("user", "create", "dave", "--password-stdin", input="short"), "at least 8 characters")
    assert_error(cli("user", "create", "dave", "--org", "nope", "--password-stdin", input=PASSWORD), "'nope'")
    assert_usage_error(cli("user", "create", "dave", "--role", "king", "--password-stdin", input=PASSWORD), "king")
    assert_error(cli("user", "set-role", "nobody", "admin"), "user 'nobody' does not exist")
    assert_usage_error(cli("user", "set-role", "carol"), "give the role")
    assert_error(cli("user", "disable", "nobody"), "user 'nobody' does not exist")
    assert_error(cli("user", "reset-password", "carol", "--password-stdin", input="short"), "at least 8")
    assert counts() == before


def test_project_option_scopes_job_and_queue_commands(app, cli):
    ok(cli("org", "add", "acme"))
    ok(cli("project", "add", "acme", "web"))
    ok(cli("queue", "add", "reports", "--project", "acme/web"))
    job = ok_json(
        cli("job", "add", "acme-sync", "always_succeed", "interval", "--every", "5m", "--queue", "reports",
            "--project", "acme/web", "--json")
    )  # fmt: skip
    ok(cli("job", "add", "home-sync", "always_succeed", "interval", "--every", "5m"))
    # The default project has no 'reports' queue: the name is looked up in the project.
    assert_error(
        cli("job", "add", "lost", "always_succeed", "interval", "--every", "5m", "--queue", "reports"),
        "unknown queue 'reports'",
    )
    assert [j["name"] for j in ok_json(cli("job", "list", "--project", "acme/web", "--json"))] == ["acme-sync"]
    assert [j["name"] for j in ok_json(cli("job", "list", "--json"))] == ["acme-sync", "home-sync"]
    queues = ok_json(cli("queue", "list", "--project", "acme/web", "--json"))
    assert sorted((q["project"], q["name"]) for q in queues) == [("acme/web", "default"), ("acme/web", "reports")]
    ok(cli("queue", "pause", "reports", "--project", "acme/web"))
    assert ok_json(cli("queue", "stats", "reports", "--project", "acme/web", "--json"))["paused"] is True
    assert_error(cli("queue", "pause", "reports"), "unknown queue 'reports'")
    assert_error(cli("job", "list", "--project", "acme/nope"), "project 'acme/nope' does not exist")
    assert ok_json(cli("execution", "list", "--project", "acme/web", "--json")) == []
    assert job["name"] == "acme-sync"
