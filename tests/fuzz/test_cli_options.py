"""Fuzzing the operator CLI (`flask job add`, `flask schedule preview`) through Click's runner,
on SQLite and PostgreSQL. The CLI's error contract (docs/cli.md): exit 0 on success; 1 with exactly one `Error: ...`
line on stderr for a handled refusal; 2 for a usage error (Click's own). Never a traceback, and
a refused `job add` stores nothing.
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st
from sqlalchemy import func, select

from app.extensions import db
from app.models import Job
from tests.fuzz.strategies import FUZZ_DB, hostile_text, json_values

ADD_OPTIONS = [
    "--schedule-value",
    "--run-at",
    "--every",
    "--cron",
    "--timezone",
    "--description",
    "--config",
    "--overlap-policy",
    "--misfire-policy",
    "--misfire-grace-seconds",
    "--max-attempts",
    "--retry-backoff-seconds",
    "--timeout-seconds",
    "--alert-mode",
    "--retention-count",
    "--retention-days",
    "--queue",
    "--priority",
    "--bogus",
]
PREVIEW_OPTIONS = ["--cron", "--every", "--run-at", "--schedule-value", "--timezone", "--after", "--count"]


def cli_text() -> st.SearchStrategy[str]:
    import json

    # The CLI gets argv strings: no NUL (the OS could not pass one), anything else goes.
    return st.one_of(
        hostile_text(), json_values.map(lambda v: json.dumps(v, allow_nan=True)), st.integers().map(str)
    ).map(lambda text: text.replace("\x00", ""))


def options(names: list[str]) -> st.SearchStrategy[list[str]]:
    pairs = st.lists(st.tuples(st.sampled_from(names), cli_text()), max_size=4)
    return pairs.map(lambda items: [part for pair in items for part in pair])


def jobs_stored() -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(Job))


def assert_cli_contract(result) -> None:
    assert not (result.exception and not isinstance(result.exception, SystemExit)), (
        f"exception escaped: {result.exception!r}\n{result.output}"
    )
    assert "Traceback" not in result.output
    assert result.exit_code in (0, 1, 2), (result.exit_code, result.output)
    if result.exit_code == 1:
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: ") and len(lines[0]) > 8, result.stderr
    if result.exit_code == 2:
        assert "Usage:" in result.stderr or "Error:" in result.stderr, result.stderr


@FUZZ_DB
@given(
    name=cli_text(),
    task=st.one_of(st.sampled_from(["always_succeed", "write_file_artifact"]), cli_text()),
    schedule_type=st.one_of(st.sampled_from(["one_time", "interval", "cron"]), cli_text()),
    extra=options(ADD_OPTIONS),
)
@example(name="tz", task="always_succeed", schedule_type="interval", extra=["--every", "1m", "--timezone", "America"])
@example(name="cron", task="always_succeed", schedule_type="cron", extra=["--cron", "* * * * " + "1" * 5000])
@example(name="big", task="always_succeed", schedule_type="interval", extra=["--every", "1m", "--priority", "9" * 30])
def test_job_add_exits_0_1_or_2_and_never_tracebacks(app, name, task, schedule_type, extra):
    before = jobs_stored()
    result = app.test_cli_runner().invoke(args=["job", "add", name, task, schedule_type, *extra])
    assert_cli_contract(result)
    assert jobs_stored() == before + (1 if result.exit_code == 0 else 0)


@FUZZ_DB
@given(extra=options(PREVIEW_OPTIONS))
@example(extra=["--cron", "0 0 30 2 *"])
@example(extra=["--every", "1s", "--count", "1000000"])
@example(extra=["--every", "1m", "--after", "9999-12-31T23:59:59Z"])
def test_schedule_preview_exits_0_1_or_2_and_never_tracebacks(app, extra):
    result = app.test_cli_runner().invoke(args=["schedule", "preview", *extra])
    assert_cli_contract(result)
