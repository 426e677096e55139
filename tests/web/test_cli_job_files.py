"""`flask job apply|export|schema` on SQLite and PostgreSQL: plans, all-or-nothing applies, round
trips in the three formats, pruning only what a file owns, and the published JSON Schema."""

from __future__ import annotations

import json

import jsonschema
import pytest
import yaml
from sqlalchemy import select

from app.definitions.job_file import parse_document
from app.extensions import db
from app.models import AuditEvent, Job, Queue
from tests.helpers.cli import assert_error, ok, ok_json, row_counts
from tests.helpers.web import signed_in_client


def write(path, document) -> str:
    path.write_text(yaml.safe_dump(document, sort_keys=False) if path.suffix == ".yaml" else json.dumps(document))
    return str(path)


def job(name: str, **fields) -> dict:
    return {
        "name": name,
        "task": "always_succeed",
        "schedule_type": "interval",
        "schedule": {"every": "1h"},
        **fields,
    }


def stored_jobs() -> dict[str, Job]:
    db.session.rollback()
    return {j.name: j for j in db.session.scalars(select(Job))}


def add_by_hand(cli) -> None:
    """Jobs of every schedule kind and several non-default fields, made without a file."""
    ok(cli("job", "add", "nightly", "always_succeed", "cron", "--cron", "30 1 * * *", "--timezone", "Europe/Paris"))
    ok(cli("job", "add", "beat", "sleep_for_seconds", "interval", "--every", "90s", "--config", '{"seconds": 1}'))
    ok(
        cli(
            "job", "add", "once", "always_succeed", "one_time", "--run-at", "2031-01-01T12:00:00Z",
            "--timeout-seconds", "none", "--max-attempts", "5", "--disabled",
        )
    )  # fmt: skip


def test_a_file_creates_its_jobs_and_a_second_apply_changes_nothing(cli, tmp_path):
    path = write(tmp_path / "jobs.yaml", {"project": "default/default", "jobs": [job("a"), job("b", priority=4)]})

    planned = ok_json(cli("job", "apply", path, "--dry-run", "--json"))
    assert [item["name"] for item in planned["created"]] == ["a", "b"]
    assert planned["dry_run"] and planned["changed"]
    assert stored_jobs() == {}  # a dry run changes nothing

    applied = ok_json(cli("job", "apply", path, "--json"))
    assert [item["name"] for item in applied["created"]] == ["a", "b"]
    jobs = stored_jobs()
    assert {j.managed_by for j in jobs.values()} == {f"file:{path}"}
    assert jobs["b"].priority == 4

    again = ok_json(cli("job", "apply", path, "--json"))
    assert (again["created"], again["updated"], again["deleted"], again["changed"]) == ([], [], [], False)
    assert [item["name"] for item in again["unchanged"]] == ["a", "b"]


def test_the_plan_names_each_changed_field_with_old_and_new_values(cli, tmp_path):
    path = tmp_path / "jobs.yaml"
    write(path, {"jobs": [job("a"), job("b")]})
    ok(cli("job", "apply", str(path)))
    write(path, {"jobs": [job("a", max_attempts=7), job("b")]})

    result = cli("job", "apply", str(path), "--dry-run")
    text = ok(result)
    assert "~ a" in text and "max_attempts: 3 -> 7" in text and "= b" in text

    plan = ok_json(cli("job", "apply", str(path), "--json"))
    assert plan["updated"] == [
        {
            "name": "a",
            "id": stored_jobs()["a"].id,
            "source": f"file:{path}",
            "changes": {"max_attempts": {"before": 3, "after": 7}},
        }
    ]
    assert stored_jobs()["a"].max_attempts == 7


def test_exit_code_says_whether_the_plan_has_changes(cli, tmp_path):
    path = write(tmp_path / "jobs.json", {"jobs": [job("a")]})
    assert cli("job", "apply", path, "--dry-run", "--exit-code").exit_code == 2
    assert stored_jobs() == {}
    ok(cli("job", "apply", path))
    assert cli("job", "apply", path, "--dry-run", "--exit-code").exit_code == 0


@pytest.mark.parametrize("fmt", ["yaml", "toml", "json"])
def test_export_round_trips_in_every_format(cli, tmp_path, fmt):
    add_by_hand(cli)
    exported = tmp_path / f"jobs.{fmt}"
    ok(cli("job", "export", "--output", str(exported)))

    plan = ok_json(cli("job", "apply", str(exported), "--dry-run", "--json"))
    assert (plan["created"], plan["updated"], plan["deleted"], plan["changed"]) == ([], [], [], False)
    assert len(plan["unchanged"]) == 3

    # Edit one field in the file: the plan names exactly that field.
    document = parse_document(exported.read_text(), fmt)
    beat = next(item for item in document["jobs"] if item["name"] == "beat")
    beat["config"] = {"seconds": 2}
    edited = tmp_path / f"edited.{fmt}"
    from app.definitions.job_file import render_document

    edited.write_text(render_document(document, fmt))
    plan = ok_json(cli("job", "apply", str(edited), "--json"))
    assert [(item["name"], list(item["changes"])) for item in plan["updated"]] == [("beat", ["config"])]
    jobs = stored_jobs()
    assert jobs["beat"].config == {"seconds": 2}
    assert {item["name"] for item in plan["unchanged"]} == {"nightly", "once"}

    # Export again: the edited file, exactly.
    assert ok(cli("job", "export", "--format", fmt)) == edited.read_text()


def test_one_bad_job_among_twenty_changes_nothing_and_is_named(cli, tmp_path):
    ok(cli("job", "add", "keep", "always_succeed", "interval", "--every", "5m"))
    jobs = [job(f"job-{n}") for n in range(20)]
    jobs[7] = job("job-7", schedule_type="cron", schedule={"expression": "0 0 30 2 *"})
    path = write(tmp_path / "twenty.yaml", {"jobs": jobs})
    counts = row_counts()

    line = assert_error(cli("job", "apply", path), "jobs[7].schedule")
    assert path in line and "job-7" in line
    assert row_counts() == counts
    assert set(stored_jobs()) == {"keep"}


def test_unknown_and_server_fields_are_refused_with_their_path(cli, tmp_path):
    path = write(tmp_path / "jobs.yaml", {"jobs": [job("a", id=3), job("b", shedule={})]})
    line = assert_error(cli("job", "apply", path), "jobs[0].id: is set by the server")
    assert "jobs[1].shedule: unknown field" in line
    assert stored_jobs() == {}


def test_a_write_time_error_names_its_job_and_rolls_back_everything(cli, tmp_path):
    past = job("late", schedule_type="one_time", schedule={"run_at": "2001-01-01T00:00:00Z"})
    path = write(tmp_path / "jobs.yaml", {"jobs": [job("fine"), past]})
    assert_error(cli("job", "apply", path), "jobs[1].schedule: run_at 2001-01-01")
    assert stored_jobs() == {}


def test_an_unknown_queue_is_refused_unless_the_file_declares_it(cli, tmp_path):
    path = write(tmp_path / "jobs.yaml", {"jobs": [job("a", queue="reports")]})
    assert_error(cli("job", "apply", path), "jobs[0].queue: unknown queue 'reports'")
    write(
        tmp_path / "jobs.yaml",
        {"queues": [{"name": "reports", "concurrency_limit": 2}], "jobs": [job("a", queue="reports")]},
    )
    plan = ok_json(cli("job", "apply", path, "--json"))
    assert plan["queues"]["created"] == ["reports"]
    job_row = stored_jobs()["a"]
    assert (job_row.queue, job_row.queue_row.concurrency_limit) == ("reports", 2)


def test_prune_deletes_only_the_jobs_this_file_owns(cli, tmp_path):
    ok(cli("job", "add", "by-hand", "always_succeed", "interval", "--every", "5m"))
    mine, other = tmp_path / "mine.yaml", tmp_path / "other.yaml"
    write(mine, {"jobs": [job("a"), job("b")]})
    write(other, {"jobs": [job("c")]})
    ok(cli("job", "apply", str(mine)))
    ok(cli("job", "apply", str(other)))

    write(mine, {"jobs": [job("a")]})
    plan = ok_json(cli("job", "apply", str(mine), "--json"))
    assert plan["deleted"] == [] and set(stored_jobs()) == {"a", "b", "c", "by-hand"}  # no --prune: kept

    plan = ok_json(cli("job", "apply", str(mine), "--prune", "--json"))
    assert [item["name"] for item in plan["deleted"]] == ["b"]
    assert set(stored_jobs()) == {"a", "c", "by-hand"}


def test_applying_a_hand_made_job_adopts_it_without_a_change(cli, tmp_path):
    add_by_hand(cli)
    exported = tmp_path / "jobs.yaml"
    ok(cli("job", "export", "--job", "nightly", "--output", str(exported)))
    plan = ok_json(cli("job", "apply", str(exported), "--json"))
    assert plan["changed"] is False
    assert plan["adopted"] == [
        {"name": "nightly", "id": stored_jobs()["nightly"].id, "from": None, "to": f"file:{exported}"}
    ]
    listed = {item["name"]: item for item in ok_json(cli("job", "list", "--json"))}
    assert listed["nightly"]["managed_by"] == f"file:{exported}" and listed["beat"]["managed_by"] is None


def test_an_apply_is_audited_with_its_source_and_plan(cli, tmp_path):
    path = write(tmp_path / "jobs.yaml", {"jobs": [job("a")]})
    ok(cli("job", "apply", path, "--dry-run"))
    db.session.rollback()
    assert db.session.scalars(select(AuditEvent).where(AuditEvent.action == "applied")).all() == []
    ok(cli("job", "apply", path))
    db.session.rollback()
    row = db.session.scalars(select(AuditEvent).where(AuditEvent.action == "applied")).one()
    assert (row.actor, row.source, row.object_kind, row.object_label) == ("cli", "cli", "project", "default/default")
    assert row.changes["sources"]["after"] == [f"file:{path}"]
    assert row.changes["plan"]["after"]["created"] == ["a"]
    created = db.session.scalars(
        select(AuditEvent).where(AuditEvent.action == "created", AuditEvent.object_kind == "job")
    )
    assert [r.object_label for r in created] == ["a"]


def test_files_naming_another_project_than_the_option_are_refused(cli, tmp_path):
    ok(cli("org", "add", "acme"))
    ok(cli("project", "add", "acme", "web"))
    path = write(tmp_path / "jobs.yaml", {"project": "acme/web", "jobs": [job("a")]})
    assert_error(cli("job", "apply", path, "--project", "default/default"), "name different projects")
    ok(cli("job", "apply", path))
    assert stored_jobs()["a"].queue_row.project.full_name == "acme/web"
    exported = yaml.safe_load(ok(cli("job", "export", "--project", "acme/web")))
    assert exported["project"] == "acme/web" and [j["name"] for j in exported["jobs"]] == ["a"]
    assert yaml.safe_load(ok(cli("job", "export")))["jobs"] == []


def test_unreadable_files_are_one_line_errors(cli, tmp_path):
    bad = tmp_path / "jobs.yaml"
    bad.write_text("jobs: [\n")
    assert_error(cli("job", "apply", str(bad)), "not valid YAML")
    assert_error(cli("job", "apply", str(tmp_path / "jobs.txt")), "unknown extension")
    assert_error(cli("job", "apply", str(tmp_path / "missing.json")), "cannot read the file")


def test_the_schema_accepts_an_export_and_refuses_a_typo(cli, tmp_path):
    add_by_hand(cli)
    schema = ok_json(cli("job", "schema"))
    validator = jsonschema.Draft202012Validator(schema)
    for fmt in ("yaml", "json", "toml"):
        document = parse_document(ok(cli("job", "export", "--format", fmt)), fmt)
        assert list(validator.iter_errors(document)) == [], fmt
    document = {"jobs": [job("a", shedule={})]}
    assert list(validator.iter_errors(document))
    assert "sleep_for_seconds" in schema["properties"]["jobs"]["items"]["properties"]["task"]["enum"]


def test_the_job_page_says_which_file_owns_a_managed_job(app, cli, tmp_path):
    path = write(tmp_path / "jobs.yaml", {"jobs": [job("<owned>")]})
    ok(cli("job", "apply", path))
    ok(cli("job", "add", "by-hand", "always_succeed", "interval", "--every", "5m"))
    jobs = stored_jobs()
    client = signed_in_client(app)
    body = client.get(f"/jobs/{jobs['<owned>'].id}").get_data(as_text=True)
    assert "data-managed-by" in body and f"<code>file:{path}</code>" in body
    assert "<owned>" not in body and "&lt;owned&gt;" in body
    assert "data-managed-by" not in client.get(f"/jobs/{jobs['by-hand'].id}").get_data(as_text=True)


def test_a_file_disables_and_enables_a_job_like_the_cli_does(cli, tmp_path):
    path = tmp_path / "jobs.yaml"
    write(path, {"jobs": [job("a")]})
    ok(cli("job", "apply", str(path)))
    write(path, {"jobs": [job("a", enabled=False)]})
    plan = ok_json(cli("job", "apply", str(path), "--json"))
    assert plan["updated"][0]["changes"] == {"enabled": {"before": True, "after": False}}
    assert stored_jobs()["a"].enabled is False
    assert ok_json(cli("job", "apply", str(path), "--json"))["changed"] is False
    write(path, {"jobs": [job("a")]})
    ok(cli("job", "apply", str(path)))
    assert stored_jobs()["a"].enabled is True


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_throughput_fields_steps_and_a_queue_rate_limit_round_trip(cli, tmp_path, fmt):
    steps = [
        {"name": "export", "task": "always_succeed"},
        {"name": "mail", "task": "always_succeed", "after": ["export"], "max_attempts": 2},
    ]
    document = {
        "project": "default/default",
        "queues": [{"name": "partner", "rate_limit": "10/minute"}],
        "jobs": [job("paced", queue="partner", unique=True, unique_key="orders", rate_limit="5/second", steps=steps)],
    }
    path = write(tmp_path / f"jobs.{fmt}", document)
    ok_json(cli("job", "apply", path, "--json"))
    stored = stored_jobs()["paced"]
    assert (stored.unique, stored.unique_key, stored.rate_limit) == (True, "orders", "5/second")
    assert [step["name"] for step in stored.steps] == ["export", "mail"]
    assert db.session.scalar(select(Queue.rate_limit).where(Queue.name == "partner")) == "10/minute"

    exported = tmp_path / f"exported.{fmt}"
    ok(cli("job", "export", "--output", str(exported)))
    plan = ok_json(cli("job", "apply", str(exported), "--dry-run", "--json"))
    assert (plan["created"], plan["updated"], plan["changed"]) == ([], [], False)
