"""The operator console at scale, in a real browser (issue 18): long names, finding jobs and
executions, acting on many rows, the runs grid, grouped alerts and live lists.

Runs against the same real stack as test_browser.py (gunicorn, scheduler, worker on SQLite).
Screenshots for docs/web.md land in test-artifacts/.
"""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import Page, expect

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

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
