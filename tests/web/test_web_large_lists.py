"""Counts and pages that stay cheap at a million executions, and say so when they are not exact.

Status counts are exact up to COUNT_CAP rows and planner estimates above it ("about N"); lists
count at most COUNT_CAP rows and page through them with a deferred join. The cap is lowered here
so a few rows cross it: the rules are the same at 50,000 (bench/dashboard.py times them there).
"""

from __future__ import annotations

import re

import pytest
from sqlalchemy import text

from app.extensions import db
from app.models import Execution
from app.services.read import dashboard, row_counts
from app.services.use_cases import executions as execution_service
from app.web import pagination
from tests.factories import make_execution, make_job, make_queue
from tests.helpers.web import WebClient, signed_in_client


def _ids_in(body: str) -> list[int]:
    tbody = body.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [int(n) for n in re.findall(r">#(\d+)<", tbody)]


def _analyze() -> None:
    if db.engine.dialect.name == "postgresql":
        db.session.execute(text("ANALYZE executions"))
        db.session.commit()


def test_status_counts_below_the_cap_are_exact(app):
    job = make_job("small")
    for status in ["succeeded"] * 7 + ["failed"] * 2 + ["pending"]:
        make_execution(job, status)
    _analyze()
    counts = dashboard.execution_counts_by_status()
    assert counts["succeeded"] == row_counts.RowCount(7) and counts["failed"] == row_counts.RowCount(2)
    assert counts["pending"] == row_counts.RowCount(1) and counts["claimed"] == row_counts.RowCount(0)
    body = signed_in_client(app).get("/dashboard/panels/summary", htmx=True).get_data(as_text=True)
    assert "about" not in body and "more than" not in body and "not counted row by row" not in body
    assert "<dt>Executions</dt><dd>10</dd>" in body


def test_status_counts_past_the_cap_are_labelled_planner_estimates(app, monkeypatch):
    monkeypatch.setattr(row_counts, "COUNT_CAP", 5)
    job = make_job("busy")
    for status in ["succeeded"] * 12 + ["failed"] * 2:
        make_execution(job, status)
    _analyze()
    counts = dashboard.execution_counts_by_status()
    assert counts["failed"] == row_counts.RowCount(2)  # below the cap: counted
    client = signed_in_client(app)
    summary = client.get("/dashboard/panels/summary", htmx=True).get_data(as_text=True)
    health = client.get("/health/").get_data(as_text=True)
    if db.engine.dialect.name == "postgresql":
        # After ANALYZE the planner knows the table: its estimate for 12 rows is 12, and the
        # page calls it an estimate, with the footnote that says what that means.
        assert counts["succeeded"].kind == row_counts.ESTIMATE and 11 <= counts["succeeded"].value <= 13
        for body in (summary, health):
            # The pages count the signed-in user's organization: a query of its own (a join the
            # planner guesses at), shown as an estimate or, when the guess is below what was
            # counted, as a lower bound; never as an exact-looking number.
            assert re.search(r"(about|more than) \d+", body) and "not counted row by row" in body
        assert re.search(r"<dt>Executions</dt><dd><span title=[^>]*>(about|more than) \d+</span>", summary)
    else:
        # SQLite has no planner estimates: its counts stay exact, and nothing claims otherwise.
        assert counts["succeeded"] == row_counts.RowCount(12)
        for body in (summary, health):
            assert "about" not in body and "not counted row by row" not in body


def test_a_count_past_the_cap_without_statistics_is_shown_as_a_lower_bound(pg_app, monkeypatch):
    monkeypatch.setattr(row_counts, "COUNT_CAP", 5)
    job = make_job("stale")
    make_execution(job, "failed")
    _analyze()  # statistics say: one failed row, nothing else
    for _ in range(30):
        make_execution(job, "cancelled")
    counts = dashboard.execution_counts_by_status()
    # The planner expects about one cancelled row (it has never seen one): a lower bound it is.
    assert counts["cancelled"] == row_counts.RowCount(5, row_counts.MORE_THAN)
    body = signed_in_client(pg_app).get("/dashboard/panels/summary", htmx=True).get_data(as_text=True)
    assert "more than 5" in body and "not counted row by row" in body


def test_pages_are_the_right_rows_in_order(app):
    job, other = make_job("paged"), make_job("other")
    for i in range(130):
        make_execution(job if i % 3 else other, "failed" if i % 2 else "succeeded")
    client = WebClient(app)
    for query in (f"status=failed&job={job.id}", "status=succeeded", ""):
        status = re.search(r"status=(\w+)", query)
        expected = list(
            db.session.scalars(
                execution_service.list_query(
                    status=status and status.group(1), job_id=job.id if "job=" in query else None
                ).with_only_columns(Execution.id)
            )
        )
        per_page = 50
        last_page = -(-len(expected) // per_page)
        for page in (1, 2, 3):
            shown = min(page, last_page)  # a page past the end shows the last one
            body = client.get(f"/executions/?{query}&page={page}").get_data(as_text=True)
            assert _ids_in(body) == expected[(shown - 1) * per_page : shown * per_page], (query, page)


def test_pages_past_the_count_cap_say_so_and_show_the_last_counted_page(app, monkeypatch):
    monkeypatch.setattr(pagination, "COUNT_CAP", 60)
    job = make_job("deep")
    for _ in range(75):
        make_execution(job, "succeeded")
    client = WebClient(app)
    first = client.get("/executions/").get_data(as_text=True)
    assert "of more than 60" in first and "past the newest" not in first
    deep = client.get("/executions/?page=3").get_data(as_text=True)
    assert _ids_in(deep) == list(range(25, 15, -1))  # rows 51-60 of the newest first
    assert "Page 3 is past the newest 60 rows" in deep and "showing page 2" in deep
    assert 'rel="next"' not in deep


@pytest.mark.parametrize(
    "filters,index",
    [
        ({}, "pk_executions"),
        ({"job_id": 1}, "ix_executions_job_id"),
        ({"status": "failed"}, "ix_executions_status_id"),
        ({"queue_id": 2}, "ix_executions_queue_id"),
    ],
)
def test_list_pages_find_their_rows_in_an_index_in_list_order(pg_app, filters, index):
    # The page's keys come from an index that holds the filter and the order (id), so OFFSET steps
    # over index entries only, and no page sorts every matching row. The planner needs a table of
    # some size (and statistics) to prefer that over a sort, as it does at a million rows; job 1
    # and the failed rows are each 2-5 % of it, like one job among many or one terminal status;
    # queue 2 likewise.
    make_job("one"), make_job("two")
    assert make_queue("quiet").id == 2  # a queue holding 2.5 % of the rows
    db.session.execute(
        text(
            """INSERT INTO executions (job_id, scheduled_for, trigger, idempotency_key, status, attempts, max_attempts,
                                   queue_id, priority, exclusive, available_at, finished_at, output, error,
                                   created_at, updated_at)
           SELECT CASE WHEN g % 50 = 0 THEN 1 ELSE 2 END, now(), 'manual', 'plan-' || g, CASE WHEN g % 20 = 0 THEN 'failed' ELSE 'succeeded' END,
                  0, 3, CASE WHEN g % 40 = 0 THEN 2 ELSE 1 END, 0, false, now(), now(), '', '', now(), now()
           FROM generate_series(1, 20000) AS g"""
        )
    )
    db.session.commit()
    _analyze()
    keys = execution_service.list_query(**filters).with_only_columns(Execution.id).limit(50).offset(100)
    sql = str(keys.compile(dialect=db.engine.dialect, compile_kwargs={"literal_binds": True}))
    plan = "\n".join(db.session.execute(text("EXPLAIN " + sql)).scalars())
    assert index in plan and "Sort" not in plan, plan
