"""The jobs list sorts by name, next run, last outcome and creation, both ways, stable across
pages (every job exactly once, in order), with pager labels that match the order (both databases)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from app.clock import utcnow
from tests.factories import make_execution, make_job
from tests.helpers.web import signed_in_client

_ROW_JOB = re.compile(r'<td class="name-cell">.*?title="([^"]+)"|<td class="name-cell"><a [^>]*>([^<]+)</a>', re.S)


@pytest.fixture
def listed(app):
    """65 jobs (two pages of 50): names out of creation order, next runs that tie, three outcomes."""
    now = utcnow()
    jobs = []
    for n in range(65):
        every = ("1h", "2h", "3h")[n % 3]  # next runs tie in threes
        job = make_job(f"job-{(n * 37) % 65:03d}", now=now + timedelta(seconds=n), every=every)
        if n % 4 == 0:
            make_execution(job, ("failed", "succeeded")[n % 8 == 0])
        jobs.append(job)
    return jobs


def names_on(body: str) -> list[str]:
    return re.findall(r'name-cell">(?:<a [^>]*>)?(?:<span class="clip" title="[^"]*">)?(job-\d{3})', body)


def every_name(client, sort: str, direction: str) -> list[str]:
    names = []
    for page in (1, 2):
        response = client.get(f"/jobs/?sort={sort}&dir={direction}&page={page}")
        assert response.status_code == 200
        names += names_on(response.get_data(as_text=True))
    return names


@pytest.mark.parametrize("sort", ["name", "next_run", "last_outcome", "created"])
@pytest.mark.parametrize("direction", ["asc", "desc"])
def test_each_sortable_column_both_ways_is_stable_across_pages(app, listed, sort, direction):
    client = signed_in_client(app, "viewer")
    names = every_name(client, sort, direction)
    assert sorted(names) == sorted(job.name for job in listed), "a job repeated or skipped across pages"
    assert names == every_name(client, sort, direction), "the order changed between two reads"
    by_name = {job.name: job for job in listed}
    if sort == "name":
        assert names == sorted(names, reverse=direction == "desc")
    elif sort == "next_run":
        keys = [(by_name[n].next_run_at, by_name[n].id) for n in names]
        assert keys == sorted(keys, reverse=direction == "desc")
    elif sort == "created":
        keys = [(by_name[n].created_at, by_name[n].id) for n in names]
        assert keys == sorted(keys, reverse=direction == "desc")
    else:  # never-finished jobs last in both directions
        finished = [n for n in names if by_name[n].id % 4 == listed[0].id % 4]
        assert names[: len(finished)] == finished


def test_the_header_links_toggle_the_direction_and_the_pager_says_previous_and_next(app, listed):
    client = signed_in_client(app, "viewer")
    body = client.get("/jobs/?sort=name").get_data(as_text=True)
    assert 'aria-sort="ascending"' in body and "sort=name&amp;dir=desc" in body
    assert "Next &rarr;" in body and "Older" not in body
    second = client.get("/jobs/?sort=name&page=2").get_data(as_text=True)
    assert "&larr; Previous" in second and "Newer" not in second
    assert client.get("/jobs/?sort=bogus").status_code == 400
