"""`flask audit list [--json] [--since] [--until] [--actor] [--job] [--kind] [--object] [--action] [--limit]`."""

from __future__ import annotations

from datetime import timedelta

from app.services.use_cases import jobs
from tests.factories import make_job
from tests.helpers.cli import assert_error, assert_usage_error, ok, ok_json


def seed(clock):
    first = make_job("first", now=clock(), max_attempts=1)
    clock.advance(hours=1)
    jobs.update_job(first.id, {"max_attempts": 3, "description": "three tries"}, now=clock(), actor="web:alice")
    clock.advance(hours=1)
    second = make_job("second", now=clock())
    return first, second


def test_json_lists_changes_newest_first_with_before_and_after(cli, clock):
    assert ok_json(cli("audit", "list", "--json")) == []
    first, second = seed(clock)
    doc = ok_json(cli("audit", "list", "--json"))
    assert [(row["object_label"], row["action"]) for row in doc] == [
        ("second", "created"),
        ("first", "updated"),
        ("first", "created"),
    ]
    updated = doc[1]
    assert updated["changes"] == {
        "description": {"before": "", "after": "three tries"},
        "max_attempts": {"before": 1, "after": 3},
    }
    assert (updated["actor"], updated["source"], updated["object_kind"], updated["object_id"]) == (
        "web:alice",
        "web",
        "job",
        str(first.id),
    )
    assert updated["job_id"] == first.id and updated["created_at"] == "2026-06-01T13:00:00Z"
    assert set(updated) >= {"id", "address", "project_id", "organization_id"}


def test_filters(cli, clock):
    first, second = seed(clock)

    def labels(*args):
        return [row["object_label"] for row in ok_json(cli("audit", "list", "--json", *args))]

    assert labels("--actor", "web:alice") == ["first"]
    assert labels("--job", first.id) == ["first", "first"]
    assert labels("--since", "2026-06-01T13:30:00Z") == ["second"]
    assert labels("--since", "2026-06-01T13:00:00+00:00", "--until", "2026-06-01T14:00") == ["first"]
    assert labels("--kind", "job", "--object", second.id) == ["second"]
    assert labels("--action", "updated") == ["first"]
    assert labels("--limit", 1) == ["second"]


def test_a_deleted_jobs_history_is_listed(cli, clock):
    job = make_job("gone", now=clock())
    jobs.delete_job(job.id, now=clock(), actor="cli")
    doc = ok_json(cli("audit", "list", "--job", job.id, "--json"))
    assert [row["action"] for row in doc] == ["deleted", "created"]
    assert doc[0]["changes"]["name"] == {"before": "gone", "after": None}


def test_text_output(cli, clock):
    assert ok(cli("audit", "list")).strip() == "No audit events match."
    seed(clock)
    out = ok(cli("audit", "list"))
    header, *lines = out.splitlines()
    assert header.split() == ["ID", "WHEN", "(UTC)", "ACTOR", "SOURCE", "OBJECT", "ACTION", "CHANGES"]
    assert len(lines) == 3
    assert "web:alice" in out and "max_attempts: 1 -> 3" in out and "2026-06-01 13:00:00Z" in out


def test_bad_input_is_one_line_and_exit_1(cli, clock):
    assert_error(cli("audit", "list", "--since", "last tuesday"), "--since: must be an ISO 8601")
    assert_error(cli("audit", "list", "--until", "2026-02-30"), "--until: must be an ISO 8601")
    assert_error(cli("audit", "list", "--actor", "a\x00b"), "without NUL")
    assert_error(cli("audit", "list", "--job", "99999999999999999999"), "job 99999999999999999999 does not exist")
    assert_usage_error(cli("audit", "list", "--job", "abc"), "not a valid integer")
    assert_usage_error(cli("audit", "list", "--limit", "0"))


def test_there_is_no_command_that_edits_the_log(cli):
    out = ok(cli("audit", "--help"))
    commands = out.split("Commands:", 1)[1].split()
    assert commands[0] == "list" and len([word for word in commands if word in ("delete", "edit", "prune")]) == 0


def test_changes_made_with_the_cli_are_audited_as_cli(cli, clock):
    job = make_job("by-cli", now=clock())
    ok(cli("job", "disable", job.id))
    clock.advance(seconds=1)
    (row,) = ok_json(cli("audit", "list", "--action", "disabled", "--json"))
    assert (row["actor"], row["source"], row["address"]) == ("cli", "cli", None)
    assert row["changes"] == {"enabled": {"before": True, "after": False}}
    since = (clock() - timedelta(days=1)).strftime("%Y-%m-%d")
    assert len(ok_json(cli("audit", "list", "--since", since, "--json"))) == 2


def test_project_filter(cli, clock):
    from app.services.caller import Caller
    from app.services.use_cases import tenancy

    make_job("in-default", now=clock())
    tenancy.add_organization("acme", now=clock(), caller=Caller.cli())
    tenancy.add_project("acme", "web", now=clock(), caller=Caller.cli())
    labels = [row["object_label"] for row in ok_json(cli("audit", "list", "--project", "default/default", "--json"))]
    assert labels == ["in-default"]
    assert [row["object_label"] for row in ok_json(cli("audit", "list", "--project", "acme/web", "--json"))] == [
        "acme/web"
    ]
    assert_error(cli("audit", "list", "--project", "acme/nope"), "does not exist")
