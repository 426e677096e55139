"""The runs grid: cells match the database; on both databases."""

from __future__ import annotations

import re
from datetime import timedelta

from app.clock import utcnow
from app.database import write_transaction
from app.extensions import db
from app.services.events import insert_event
from app.services.read import runs_grid
from tests.factories import make_execution, make_job
from tests.helpers.web import signed_in_client


def test_cells_hold_the_fates_of_the_occurrences_in_their_slot(app):
    now = utcnow().replace(second=0, microsecond=0)
    job = make_job("gridded", every="30m")
    ok = make_execution(job, "succeeded", now=now - timedelta(hours=5), scheduled_for=now - timedelta(hours=5))
    bad = make_execution(job, "failed", now=now - timedelta(hours=2), scheduled_for=now - timedelta(hours=2))
    make_execution(job, "missed", now=now - timedelta(hours=1), scheduled_for=now - timedelta(hours=1))
    with write_transaction(db.engine) as conn:
        insert_event(conn, "misfire_coalesced", now=now - timedelta(minutes=30), job_id=job.id, occurrences=3)
    db.session.rollback()
    grid = runs_grid.build([job], now=now, hours=6)
    (row,) = grid.rows
    fates = {cell.fate for cell in row.cells if cell.fate}
    assert fates == {"succeeded", "failed", "missed", "coalesced", "upcoming"}
    by_id = {i: cell for cell in row.cells for i in cell.execution_ids}
    assert by_id[ok.id].fate == "succeeded" and by_id[ok.id].start <= ok.scheduled_for < by_id[ok.id].end
    assert by_id[bad.id].fate == "failed"
    # The next hour holds the job's next fire time, as upcoming.
    ahead = [cell for cell in row.cells[runs_grid.SLOTS_PAST :] if cell.fate == "upcoming"]
    assert len(ahead) == 1 and ahead[0].start <= job.next_run_at < ahead[0].end


def test_the_grid_page_links_cells_to_their_execution_and_polls(app):
    now = utcnow()
    job = make_job("linked")
    execution = make_execution(job, "failed", now=now - timedelta(minutes=20))
    client = signed_in_client(app, "viewer")
    body = client.get("/dashboard/grid?hours=1").get_data(as_text=True)
    assert f'href="/executions/{execution.id}"' in body
    assert re.search(r'class="cell fate-failed[^"]*"', body)
    assert 'hx-trigger="every 10s, cronwell:resume"' in body and "data-poll" in body
    fragment = client.get("/dashboard/grid?hours=1", htmx=True, headers={"HX-Target": "runs-grid"}).get_data(
        as_text=True
    )
    assert fragment.lstrip().startswith('<div id="runs-grid"')
    assert client.get("/dashboard/grid?hours=999").status_code == 200  # an odd value falls back to 6 h
