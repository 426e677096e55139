"""The executions list sorts by start, finish, status and job, both ways, server-side, paged by a
keyset (both databases): following "Next" from the first page lists every matching execution
exactly once in the order (rows without a value last, ties broken by the id), "Previous" walks the
same pages back; the headers say the order (aria-sort) and reload only the list under HTMX; an
unknown sort, direction or cursor is said inline over the default order, never an error."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest

from app.clock import utcnow
from app.models import Execution
from tests.factories import make_execution, make_job
from tests.helpers.web import signed_in_client

PER_PAGE = 7
_ID = re.compile(r'<a href="/executions/(\d+)">#\1</a>')
_NEXT = re.compile(r'href="([^"]+)" rel="next"')
_PREV = re.compile(r'href="([^"]+)" rel="prev"')
STATUSES = ("succeeded", "failed", "pending", "running", "cancelled")


@pytest.fixture
def listed(app, db):
    """40 executions of three jobs and some one-off runs: starts and finishes that tie, runs never
    started (pending), never finished (running), and rows of every status."""
    app.config["EXECUTIONS_PER_PAGE"] = PER_PAGE
    now = utcnow()
    jobs = [make_job(f"job-{n}", now=now) for n in range(3)]
    project_id = jobs[0].project_id
    made = []
    for n in range(40):
        status = STATUSES[n % len(STATUSES)]
        # Every fourth pair shares its instant: ties the id has to break.
        moment = now - timedelta(minutes=(n * 7) % 23, seconds=0 if n % 4 else 30)
        execution = make_execution(jobs[n % 3], status, now=moment, seconds=float(n % 5), exclusive=False)
        if n % 9 == 0:  # a one-off run: no job
            execution.job_id, execution.task, execution.project_id = None, "echo", project_id
        made.append(execution)
    db.session.commit()
    return made


def expected(rows, column: str, descending: bool) -> list[int]:
    with_value = sorted((r for r in rows if getattr(r, column) is not None), key=lambda r: (getattr(r, column), r.id))
    without = sorted((r for r in rows if getattr(r, column) is None), key=lambda r: r.id)
    if descending:  # each segment the other way; the rows without a value still come last
        with_value.reverse()
        without.reverse()
    return [r.id for r in with_value] + [r.id for r in without]


def ids_on(body: str) -> list[int]:
    return [int(found) for found in _ID.findall(body)]


def walk(client, first: str) -> tuple[list[list[int]], str]:
    """Every page from `first` on through the Next links, and the last page's URL."""
    pages, url = [], first
    while True:
        response = client.get(url)
        assert response.status_code == 200, url
        body = response.get_data(as_text=True)
        pages.append(ids_on(body))
        following = _NEXT.search(body)
        if following is None:
            return pages, url
        url = html.unescape(following.group(1))


COLUMNS = {"started": "started_at", "finished": "finished_at", "status": "status", "job": "job_id"}


@pytest.mark.parametrize("sort", list(COLUMNS))
@pytest.mark.parametrize("direction", ["asc", "desc"])
def test_every_execution_once_in_order_forwards_and_back(app, db, listed, sort, direction):
    client = signed_in_client(app)
    rows = db.session.query(Execution).all()
    wanted = expected(rows, COLUMNS[sort], direction == "desc")
    pages, last = walk(client, f"/executions/?sort={sort}&dir={direction}")
    assert [i for page in pages for i in page] == wanted
    assert all(len(page) == PER_PAGE for page in pages[:-1]) and len(pages) == -(-len(wanted) // PER_PAGE)

    back, url = [], last
    while True:
        body = client.get(url).get_data(as_text=True)
        back.append(ids_on(body))
        previous = _PREV.search(body)
        if previous is None:
            break
        url = html.unescape(previous.group(1))
    assert back[::-1] == pages  # the same pages, from the last to the first


def test_a_sort_keeps_the_filters_and_counts_what_matches(app, db, listed):
    client = signed_in_client(app)
    body = client.get("/executions/?status=failed&sort=started&dir=desc").get_data(as_text=True)
    failed = [r for r in db.session.query(Execution).all() if r.status == "failed"]
    assert ids_on(body) == expected(failed, "started_at", True)[:PER_PAGE]
    assert f"of {len(failed)}" in body
    assert 'name="sort" value="started"' in body  # the filter form keeps the order


def test_headers_say_the_order_and_reload_only_the_list(app, listed):
    client = signed_in_client(app)
    body = client.get("/executions/?sort=finished&dir=desc").get_data(as_text=True)
    [current] = re.findall(r'<th scope="col" aria-sort="(\w+)"><a [^>]*>Finished', body)
    assert current == "descending"
    assert 'hx-get="/executions/?sort=finished&amp;dir=asc" hx-target="#executions-list"' in body
    assert body.count("aria-sort=") == 1
    fragment = client.get(
        "/executions/?sort=status&dir=asc", headers={"HX-Request": "true", "HX-Target": "executions-list"}
    )
    text = fragment.get_data(as_text=True)
    assert "<html" not in text and text.lstrip().startswith('<div id="executions-list"')
    assert re.search(r'aria-sort="ascending"><a [^>]*>Status', text)


def test_the_poll_reloads_the_page_shown(app, listed):
    client = signed_in_client(app)
    first = client.get("/executions/?sort=started&dir=asc").get_data(as_text=True)
    second_url = html.unescape(_NEXT.search(first).group(1))
    second = client.get(second_url).get_data(as_text=True)
    poll = html.unescape(re.search(r'id="executions-list" data-poll hx-get="([^"]+)"', second).group(1))
    assert "after=" in poll and ids_on(client.get(poll).get_data(as_text=True)) == ids_on(second)


@pytest.mark.parametrize(
    "query, says",
    [
        ("sort=duration%27%3B--", "Cannot sort by &#34;duration&#39;;--&#34;"),
        ("sort=<script>", "Cannot sort by &#39;&lt;script&gt;&#39;"),
        ("sort=started&dir=sideways", "dir must be asc or desc"),
        ("sort=started&after=not-a-cursor", "That page link is not valid"),
        ("sort=status&after=WzAsIm5vcGUiLDFd", "That page link is not valid"),  # [0,"nope",1]: no such status
        ("sort=job&before=" + "A" * 300, "That page link is not valid"),
    ],
)
def test_what_cannot_be_sorted_or_paged_is_said_inline(app, db, listed, query, says):
    client = signed_in_client(app)
    response = client.get(f"/executions/?{query}")
    assert response.status_code == 200
    body = response.get_data(as_text=True)
    assert says in body  # escaped: what was typed is shown, never run
    assert len(ids_on(body)) == PER_PAGE  # a full first page all the same


@pytest.mark.parametrize(
    "sort, index",
    [
        ("started", "ix_executions_started_id"),
        ("finished", "ix_executions_finished_at"),
        ("status", "ix_executions_status_id"),
        ("job", "ix_executions_job_id"),
    ],
)
@pytest.mark.parametrize("descending", [True, False])
def test_a_deep_sorted_page_is_a_range_of_its_index(pg_app, sort, index, descending):
    """Every statement of a page after a cursor deep in the list reads the sort's index in its
    order: no Sort node, so no page sorts the matching rows (an Incremental Sort orders only the
    ties of one finished_at by id). A table of some size, with statistics, as the planner sees at
    a million rows."""
    from sqlalchemy import event, text

    from app.extensions import db
    from app.services.read import console_lists, execution_sorts

    make_job("one")
    db.session.execute(
        text(
            """INSERT INTO executions (job_id, scheduled_for, trigger, idempotency_key, status, attempts, max_attempts,
                   queue_id, priority, exclusive, available_at, started_at, finished_at, output, error,
                   created_at, updated_at)
               SELECT 1, now(), 'manual', 'sort-' || g, CASE WHEN g % 7 = 0 THEN 'failed' ELSE 'succeeded' END, 1, 3,
                      1, 0, false, now(), now() - g * interval '1 second', now() - g * interval '1 second' + interval '2 s',
                      '', '', now(), now()
               FROM generate_series(1, 20000) AS g"""
        )
    )
    db.session.commit()
    db.session.execute(text("ANALYZE executions"))
    chosen = execution_sorts.SORTS[sort]
    listed = console_lists.executions_query(console_lists.ExecutionFilters())
    middle = db.session.execute(listed.order_by(None).order_by(Execution.id).offset(10000).limit(1)).one()
    value = getattr(middle, chosen.column.key)
    after = execution_sorts.Position(execution_sorts.WITH_VALUE, value, middle.id)
    statements = []

    def keep(conn, cursor, statement, parameters, context, executemany):
        if "ORDER BY" in statement and "LIMIT" in statement:
            statements.append((statement, parameters))

    event.listen(db.engine, "before_cursor_execute", keep)
    try:
        page = execution_sorts.keyset_page(listed, chosen, descending=descending, after=after, limit=50)
    finally:
        event.remove(db.engine, "before_cursor_execute", keep)
    assert len(page.items) == 50 and statements
    raw = db.session.connection().connection.driver_connection
    for statement, parameters in statements:
        plan = "\n".join(row[0] for row in raw.execute("EXPLAIN " + statement, parameters).fetchall())
        assert index in plan and not re.search(r"(^|-> +)Sort ", plan, re.M), plan
