"""The operator console at scale, in a real browser: long names, finding jobs and
executions, acting on many rows, the runs grid, grouped alerts and live lists.

Runs against the same real stack as test_browser.py (gunicorn, scheduler, worker on SQLite).
Screenshots for docs/web.md land in test-artifacts/.
"""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Page, expect

# One xdist worker runs every browser test, so they share one Chromium.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300), pytest.mark.xdist_group("browser")]

LONG_NAME = ("nightly warehouse reconciliation for the eastern region " * 4)[:196] + " end"
assert len(LONG_NAME) == 200


def sign_in(page: Page, stack) -> None:
    page.goto(stack.base_url + "/auth/login")
    page.get_by_label("Username", exact=True).fill("admin")
    page.get_by_label("Password", exact=True).fill(stack.env["DEV_ADMIN_PASSWORD"])
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(stack.base_url + "/dashboard/")


def add_job(stack, name: str, *extra: str) -> dict:
    """Create a job through the CLI and return it as `job add --json` prints it."""
    result = stack.run("job", "add", name, *extra, "--json")
    return json.loads(result.stdout)


def no_sideways_overflow(page: Page, selector: str) -> None:
    """Every table under `selector` fits its box: no column is pushed out of view."""
    overflow = page.evaluate(
        """(selector) => Array.from(document.querySelectorAll(selector + ' .table-wrap')).map(
            w => w.scrollWidth - w.clientWidth)""",
        selector,
    )
    if not overflow or max(overflow) > 1:
        page.screenshot(path="test-artifacts/overflow.png", full_page=True)
    assert overflow and max(overflow) <= 1, (page.url, selector, overflow)


def test_long_names_are_cut_with_the_full_text_on_hover(stack, page: Page, artifacts_dir):
    base = stack.base_url
    job = add_job(stack, LONG_NAME, "always_succeed", "interval", "--every", "1h")
    stack.run("job", "trigger", str(job["id"]))
    sign_in(page, stack)

    checks = {
        "/dashboard/": ("#panel-upcoming", "#panel-activity", "#panel-jobs"),
        "/jobs/": ("main",),
        "/executions/": ("main",),
    }
    for path, panels in checks.items():
        page.goto(base + path)
        link = page.locator(f'a.clip[title="{LONG_NAME}"]').first
        expect(link).to_be_visible()
        box = link.bounding_box()
        assert box is not None and box["width"] < 450, (path, box)  # cut, not 200 characters wide
        for panel in panels:
            no_sideways_overflow(page, panel)
        # The last column header of each table is inside the window.
        for header in page.locator("main table thead tr").all():
            right = header.locator("th").last.bounding_box()
            assert right is not None and right["x"] + right["width"] <= 1280 + 1, (path, right)
    page.goto(base + "/dashboard/")
    expect(page.locator("#panel-upcoming th", has_text="Next run")).to_be_visible()
    page.screenshot(path=str(artifacts_dir / "long-names-dashboard.png"), full_page=True)
    assert page.console_errors == [], page.console_errors


def test_search_and_filters_live_in_the_url(stack, page: Page):
    base = stack.base_url
    add_job(stack, "e2e-findme nightly", "always_succeed", "interval", "--every", "1h")
    add_job(stack, "e2e-other hourly", "always_fail", "interval", "--every", "1h")
    sign_in(page, stack)
    page.goto(base + "/jobs/")
    page.get_by_label("Search", exact=True).fill("findme")
    page.get_by_role("button", name="Find").click()
    expect(page).to_have_url(re.compile(r"/jobs/\?q=findme(&|$)"))
    expect(page.locator("#jobs-list a.clip")).to_have_count(1)
    expect(page.locator("#jobs-list")).to_contain_text("e2e-findme nightly")
    # The URL alone reproduces the list (shareable), and the form shows the filters chosen.
    page.goto(base + "/jobs/?task=always_fail&q=e2e")
    expect(page.locator("#jobs-list a.clip")).to_have_text(["e2e-other hourly"])
    expect(page.get_by_label("Task", exact=True)).to_have_value("always_fail")
    # The executions list takes a job name.
    page.goto(base + "/executions/?job=findme")
    expect(page.locator("h1")).to_contain_text("e2e-findme nightly")
    assert page.console_errors == [], page.console_errors


def test_bulk_retry_with_a_confirmation_that_counts_rows(stack, page: Page, artifacts_dir):
    base = stack.base_url
    job = add_job(stack, "e2e-bulk fails", "always_fail", "interval", "--every", "1d", "--max-attempts", "1")
    for _ in range(2):
        stack.run("job", "trigger", str(job["id"]))
    sign_in(page, stack)
    page.goto(base + f"/executions/?job={job['id']}&status=failed")
    rows = page.locator("#executions-list tbody tr")
    expect(rows).to_have_count(2, timeout=60_000)  # the worker runs both and they fail
    page.locator("#executions-list thead input[data-select-all]").check()
    page.get_by_role("button", name="Retry…").click()
    expect(page.locator("h1")).to_have_text("Retry 2 executions?")
    page.screenshot(path=str(artifacts_dir / "bulk-confirm.png"), full_page=True)
    page.get_by_role("button", name="Retry 2 executions").click()
    expect(page.locator(".flash-success")).to_contain_text("2 executions retried")
    assert page.console_errors == [], page.console_errors


def test_the_grid_cells_match_the_database_and_link_to_executions(stack, page: Page, artifacts_dir):
    base = stack.base_url
    job = add_job(stack, "e2e-grid job", "always_succeed", "interval", "--every", "1d")
    executions = [json.loads(stack.run("job", "trigger", str(job["id"]), "--json").stdout) for _ in range(1)]
    sign_in(page, stack)
    page.goto(base + "/dashboard/grid?hours=1&q=e2e-grid")
    cell = page.locator(f'#runs-grid td.cell a[href="/executions/{executions[0]["id"]}"]')
    expect(cell).to_have_count(1)
    row = page.locator("#runs-grid tbody tr", has_text="e2e-grid job")
    expect(row.locator("td.fate-succeeded")).to_have_count(1, timeout=30_000)  # refreshed by the poll
    page.goto(base + "/dashboard/grid")
    page.screenshot(path=str(artifacts_dir / "runs-grid.png"), full_page=True)
    cell = page.locator("#runs-grid td.fate-succeeded a").first
    cell.click()
    expect(page.locator("h1")).to_contain_text("Execution #")
    assert page.console_errors == [], page.console_errors


def test_lists_refresh_themselves_and_alerts_group_and_resolve(stack, page: Page, artifacts_dir):
    base = stack.base_url
    job = add_job(
        stack, "e2e-flappy", "always_fail", "interval", "--every", "1d", "--max-attempts", "1", "--config", "{}"
    )
    sign_in(page, stack)
    page.goto(base + f"/executions/?job={job['id']}")
    page.evaluate("window.__cronwellMarker = 'no reload'")
    for _ in range(3):
        stack.run("job", "trigger", str(job["id"]))
    # The list shows the new runs without a reload (HTMX poll).
    expect(page.locator("#executions-list tbody tr")).to_have_count(3, timeout=60_000)
    expect(page.locator("#executions-list tbody .status-failed")).to_have_count(3, timeout=60_000)
    assert page.evaluate("window.__cronwellMarker") == "no reload"
    # Three dead letters, one alert counting them.
    page.goto(base + "/dashboard/")
    alert = page.locator("#panel-alerts li", has_text="e2e-flappy")
    expect(alert).to_have_count(1)
    expect(alert).to_contain_text("3 times")
    page.screenshot(path=str(artifacts_dir / "dashboard.png"), full_page=True)
    # The job succeeds again: the scheduler's alert pass resolves the alert.
    stack.run("job", "edit", str(job["id"]), "--task", "always_succeed")
    stack.run("job", "trigger", str(job["id"]))
    expect(page.locator("#panel-alerts li", has_text="e2e-flappy")).to_have_count(0, timeout=60_000)
    page.goto(base + "/jobs/")
    page.screenshot(path=str(artifacts_dir / "jobs-list.png"), full_page=True)
    page.goto(base + f"/executions/?job={job['id']}&status=failed")
    page.locator("#executions-list tbody a").first.click()
    page.screenshot(path=str(artifacts_dir / "execution.png"), full_page=True)
    assert page.console_errors == [], page.console_errors
