"""Finding things: the jobs list's search, filters and columns, and the
executions list's job-by-name, trigger, queue and date filters, all in the URL; on both databases."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from app.clock import utcnow
from app.services.use_cases import jobs
from tests.factories import make_execution, make_job
from tests.helpers.web import rows, signed_in_client


@pytest.fixture
def viewer(app):
    return signed_in_client(app, "viewer")


def names_in(body: str) -> list[str]:
    return re.findall(r'<a class="clip" href="/jobs/\d+" title="([^"]*)"', body)


def test_jobs_search_matches_name_task_and_description_in_any_case(app, viewer):
    make_job("Nightly backup", description="copies the warehouse")
    make_job("hourly ping", task="always_fail")
    make_job("report 100%_done")
    assert names_in(viewer.get("/jobs/?q=NIGHTLY").get_data(as_text=True)) == ["Nightly backup"]
    assert names_in(viewer.get("/jobs/?q=warehouse").get_data(as_text=True)) == ["Nightly backup"]
    assert names_in(viewer.get("/jobs/?q=always_fail").get_data(as_text=True)) == ["hourly ping"]
    # LIKE's own characters are taken literally.
    assert names_in(viewer.get("/jobs/?q=0%25_").get_data(as_text=True)) == ["report 100%_done"]
    body = viewer.get("/jobs/?q=nothing-like-this").get_data(as_text=True)
    assert "No job matches these filters." in body


def test_jobs_filters_combine_and_stay_in_the_page_links(app, viewer):
    now = utcnow()
    ok = make_job("ok job", queue="fast")
    bad = make_job("bad job", task="always_fail", queue="fast")
    off = make_job("off job")
    never = make_job("never ran", queue="fast")
    jobs.disable_job(off.id, now=now, actor="test")
    make_execution(ok, "failed", now=now - timedelta(minutes=2))
    make_execution(ok, "succeeded", now=now - timedelta(minutes=1))
    make_execution(bad, "failed", now=now)
    assert names_in(viewer.get("/jobs/?enabled=no").get_data(as_text=True)) == ["off job"]
    assert names_in(viewer.get("/jobs/?queue=fast&outcome=succeeded").get_data(as_text=True)) == ["ok job"]
    assert names_in(viewer.get("/jobs/?outcome=failed").get_data(as_text=True)) == ["bad job"]
    assert names_in(viewer.get("/jobs/?outcome=never&queue=fast").get_data(as_text=True)) == ["never ran"]
    assert names_in(viewer.get("/jobs/?task=always_fail").get_data(as_text=True)) == ["bad job"]
    body = viewer.get("/jobs/?queue=fast").get_data(as_text=True)
    # The selected filters are shown as chosen, so the URL and the form agree.
    assert re.search(r'<option selected value="fast">|<option value="fast" selected>', body)
    assert never.id  # used above


def test_jobs_list_shows_last_run_last_outcome_and_the_24h_success_rate(app, viewer):
    now = utcnow()
    job = make_job("rated")
    make_execution(job, "succeeded", now=now - timedelta(days=2))  # outside the window
    for status in ("succeeded", "succeeded", "succeeded", "failed"):
        make_execution(job, status, now=now - timedelta(minutes=5))
    make_execution(job, "pending", now=now)  # not finished: not counted
    body = viewer.get("/jobs/").get_data(as_text=True)
    row = body.split('title="rated"', 1)[1].split("</tr>", 1)[0]
    assert "75 %" in row and "3 of 4 finished runs" in row
    assert "status-failed" in row  # the newest finished run failed


def test_unknown_filter_values_are_explained_not_500(app, viewer):
    for query, message in (("queue=nope", "nope"), ("task=rm_rf", "no task is called"), ("outcome=great", "one of")):
        response = viewer.get(f"/jobs/?{query}")
        assert response.status_code == 400 and message in response.get_data(as_text=True), query


def test_executions_job_filter_takes_a_name_or_part_of_one(app, viewer):
    alpha, beta, gamma = make_job("alpha sync"), make_job("beta sync"), make_job("gamma")
    for job in (alpha, beta, gamma):
        make_execution(job, "succeeded")
    assert rows(viewer.get("/executions/?job=Alpha+Sync").get_data(as_text=True)) == 1
    both = viewer.get("/executions/?job=sync").get_data(as_text=True)
    assert rows(both) == 2 and "2 jobs named like" in both
    assert rows(viewer.get(f"/executions/?job={gamma.id}").get_data(as_text=True)) == 1
    missing = viewer.get("/executions/?job=delta")
    assert missing.status_code == 400 and "no job is named" in missing.get_data(as_text=True)


def test_executions_filter_by_trigger_and_creation_date(app, viewer):
    now = utcnow().replace(microsecond=0)
    job = make_job("dated")
    make_execution(job, "succeeded", trigger="manual", created_at=now - timedelta(days=3))
    make_execution(job, "succeeded", trigger="schedule", created_at=now - timedelta(days=1))
    make_execution(job, "failed", trigger="retry", created_at=now)
    assert rows(viewer.get("/executions/?trigger=retry").get_data(as_text=True)) == 1
    day = (now - timedelta(days=1)).date().isoformat()
    assert rows(viewer.get(f"/executions/?created_from={day}&created_to={day}").get_data(as_text=True)) == 1
    since = (now - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M")
    body = viewer.get(f"/executions/?created_from={since}&trigger=schedule").get_data(as_text=True)
    assert rows(body) == 1
    bad = viewer.get("/executions/?created_from=yesterday")
    assert bad.status_code == 400 and "From must be a date" in bad.get_data(as_text=True)
    assert viewer.get("/executions/?trigger=cosmic").status_code == 400


def test_execution_filters_stay_in_the_page_links_and_the_poll(app, viewer, monkeypatch):
    app.config["EXECUTIONS_PER_PAGE"] = 2
    job = make_job("paged")
    for _ in range(3):
        make_execution(job, "failed", trigger="manual")
    body = viewer.get("/executions/?job=paged&trigger=manual").get_data(as_text=True)
    assert 'href="/executions/?page=2&amp;job=paged&amp;trigger=manual"' in body
    assert 'hx-get="/executions/?page=1&amp;job=paged&amp;trigger=manual"' in body
    # The poll gets the table alone, not the page.
    fragment = viewer.get(
        "/executions/?job=paged&trigger=manual", htmx=True, headers={"HX-Target": "executions-list"}
    ).get_data(as_text=True)
    assert fragment.lstrip().startswith('<div id="executions-list"') and "<html" not in fragment


def test_odd_filter_values_are_refused_inline_never_500(app, viewer):
    for query in (
        "created_to=9999-12-31",
        "created_from=0001-01-01T00:00%2B14:00",
        "created_from=2026-13-01",
        "job=%00",
        "trigger=%00",
        "status=%00",
    ):
        assert viewer.get(f"/executions/?{query}").status_code in (200, 400), query
    for query in ("queue=%00", "queue=" + "x" * 300, "q=%00%25", "task=%00", "enabled=maybe"):
        assert viewer.get(f"/jobs/?{query}").status_code in (200, 400), query
    for query in ("hours=0", "q=%00", "page=-1"):
        assert viewer.get(f"/dashboard/grid?{query}").status_code == 200, query


def test_the_job_page_and_the_jobs_list_refresh_themselves(app, viewer):
    job = make_job("live")
    page = viewer.get(f"/jobs/{job.id}").get_data(as_text=True)
    poller = re.search(r"<div hidden data-poll [^>]*>", page).group(0)
    assert 'hx-select-oob="#job-state,#job-next-run,#job-runs"' in poller and "every 5s" in poller
    for element in ('id="job-state"', 'id="job-next-run"', 'id="job-runs"'):
        assert element in page
    fragment = viewer.get("/jobs/?q=live", htmx=True, headers={"HX-Target": "jobs-list"}).get_data(as_text=True)
    assert fragment.lstrip().startswith('<div id="jobs-list"') and 'hx-get="/jobs/?page=1&amp;q=live"' in fragment
    # Anonymous visitors (public read) get no poller: their HTMX requests would be refused.
    from tests.helpers.web import WebClient

    assert "data-poll" not in WebClient(app).get(f"/jobs/{job.id}").get_data(as_text=True)
