"""The operator's path through a real browser, against a real web server, scheduler and worker.

Sign in; submit the job form with a bad cron and see the error inline; fix it; watch the
scheduler's execution of the new job appear on the dashboard through HTMX polling (no reload);
open it and read its output; disable the job; make a job fail into a dead letter and resolve its
alert from the dashboard (an HTMX POST carrying the CSRF header); sign out. Screenshots go to
test-artifacts/. The strict CSP must hold throughout: any violation shows up as a console error.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

# One xdist worker runs every browser test, so they share one Chromium.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300), pytest.mark.xdist_group("browser")]

JOB_NAME = "e2e every minute <b>"


def sign_in(page: Page, stack) -> None:
    base_url = stack.base_url
    page.goto(base_url + "/")
    page.get_by_role("link", name="Sign in").first.click()
    page.get_by_label("Username", exact=True).fill("admin")
    page.get_by_label("Password", exact=True).fill(stack.env["DEV_ADMIN_PASSWORD"])
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(base_url + "/dashboard/")


def test_operator_flow(stack, page: Page, artifacts_dir):
    base = stack.base_url
    sign_in(page, stack)

    # The job form: a bad cron gets an inline error, both live (preview) and on submit.
    page.get_by_role("link", name="New job").first.click()
    page.get_by_label("Name", exact=True).fill(JOB_NAME)
    page.get_by_label("Task", exact=True).select_option("always_succeed")
    page.get_by_label("Task config (JSON object)", exact=True).fill('{"message": "hello from e2e"}')
    page.get_by_label("Schedule type", exact=True).select_option("cron")
    expect(page.get_by_label("Every", exact=True)).to_be_hidden()
    cron = page.get_by_label("Cron expression", exact=True)
    cron.fill("61 * * * *")
    expect(page.locator("#schedule-preview")).to_contain_text("minute", timeout=10_000)
    page.get_by_role("button", name="Create job").click()
    expect(page.locator("#cron-error")).to_contain_text("61")
    expect(page.get_by_label("Cron expression", exact=True)).to_have_value("61 * * * *")

    # Fix it: the preview now lists five fire times.
    page.get_by_label("Cron expression", exact=True).fill("* * * * *")
    expect(page.locator("#schedule-preview li")).to_have_count(5, timeout=10_000)
    page.get_by_role("button", name="Create job").click()
    expect(page.locator(".flash-success")).to_contain_text("created")
    job_url = page.url
    job_id = int(job_url.rstrip("/").rsplit("/", 1)[1])

    # The dashboard updates itself when the scheduler fires the job and the worker runs it.
    page.goto(base + "/dashboard/")
    page.evaluate("window.__cronwellMarker = 'no reload'")
    activity = page.locator("#panel-activity")
    row = activity.locator("tr", has_text=JOB_NAME).filter(has_text="succeeded").first
    expect(row).to_be_visible(timeout=100_000)
    assert page.evaluate("window.__cronwellMarker") == "no reload"  # live update, not a page load
    expect(page.locator("#panel-heartbeats")).to_contain_text("alive")
    page.screenshot(path=str(artifacts_dir / "dashboard.png"), full_page=True)

    # Open the execution and read its output.
    row.get_by_role("link", name=re.compile(r"^#\d+$")).click()
    expect(page.locator("h1")).to_contain_text("succeeded")
    expect(page.locator("#execution-output")).to_contain_text("hello from e2e")

    # The job page: stats, next runs, charts; then disable it.
    page.goto(job_url)
    expect(page.locator("svg.chart").first).to_be_visible()
    expect(page.locator("h1")).to_contain_text(JOB_NAME)  # shown as text, not markup
    page.screenshot(path=str(artifacts_dir / "job-detail.png"), full_page=True)
    page.get_by_role("button", name="Disable").click()
    expect(page.locator(".flash-success")).to_contain_text("disabled")
    expect(page.locator("h1 .status")).to_have_text("disabled")

    # A job that fails with no retries left raises an alert; resolve it from the dashboard.
    page.goto(base + "/jobs/new")
    page.get_by_label("Name", exact=True).fill("e2e always fails")
    page.get_by_label("Task", exact=True).select_option("always_fail")
    page.get_by_label("Schedule type", exact=True).select_option("interval")
    page.get_by_label("Every", exact=True).fill("1d")
    page.get_by_label("Max attempts", exact=True).fill("1")
    page.get_by_role("button", name="Create job").click()
    page.get_by_role("button", name="Run now").click()
    expect(page.locator(".flash-success")).to_contain_text("queued")
    page.goto(base + "/dashboard/")
    resolve = page.locator("#panel-alerts").get_by_role("button", name=re.compile(r"^Resolve alert"))
    expect(resolve.first).to_be_visible(timeout=60_000)
    resolve.first.click()
    expect(page.locator("#panel-alerts")).to_contain_text("1 alert(s) resolved.")
    expect(page.locator("#panel-alerts")).to_contain_text("No open alerts.")

    assert page.console_errors == [], page.console_errors
    assert job_id > 0


def test_polling_pauses_while_the_tab_is_hidden(stack, page: Page):
    sign_in(page, stack)
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url) if "/dashboard/panels/" in request.url else None)
    page.wait_for_timeout(6_000)
    assert requests, "panels should poll while visible"
    page.evaluate("""() => {
        Object.defineProperty(document, 'hidden', {configurable: true, get: () => true});
        document.dispatchEvent(new Event('visibilitychange'));
    }""")
    page.wait_for_timeout(500)
    requests.clear()
    page.wait_for_timeout(11_000)
    assert requests == [], "no panel requests while hidden"
    page.evaluate("""() => {
        Object.defineProperty(document, 'hidden', {configurable: true, get: () => false});
        document.dispatchEvent(new Event('visibilitychange'));
    }""")
    page.wait_for_timeout(1_500)
    assert requests, "panels refresh at once when the tab is shown again"
    assert page.console_errors == [], page.console_errors


def test_phone_width_has_no_sideways_scroll_and_signs_out(stack, browser, artifacts_dir):
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    try:
        sign_in(page, stack)
        for path in ("/dashboard/", "/jobs/", "/executions/", "/jobs/new", "/alerts/"):
            page.goto(stack.base_url + path)
            overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 1, (path, overflow)
        page.goto(stack.base_url + "/dashboard/")
        page.screenshot(path=str(artifacts_dir / "dashboard-phone.png"), full_page=True)
        page.get_by_role("button", name="Sign out").click()
        expect(page.locator(".flash-info")).to_contain_text("signed out")
        page.goto(stack.base_url + "/dashboard/")
        expect(page).to_have_url(re.compile(r"/auth/login\?next=/dashboard/"))
    finally:
        context.close()


def test_queues_page_create_pause_and_live_statistics(stack, page: Page, artifacts_dir):
    base = stack.base_url
    sign_in(page, stack)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Queues").click()
    expect(page).to_have_url(base + "/queues/")

    # Create: a bad limit is refused beside the field; fixed, the queue's page opens.
    page.get_by_label("Name", exact=True).fill("e2e-q")
    page.get_by_label("Concurrency limit", exact=True).fill("0")
    page.get_by_role("button", name="Create queue").click()
    expect(page.locator("#concurrency_limit-error")).to_contain_text("between 1 and 100000")
    page.get_by_label("Concurrency limit", exact=True).fill("2")
    page.get_by_role("button", name="Create queue").click()
    expect(page).to_have_url(base + "/queues/e2e-q")
    expect(page.locator("#queue-stats")).to_contain_text("0 / 2")

    # Pause with a reason; the page says so and offers Resume.
    page.get_by_label("Reason", exact=True).fill("e2e maintenance")
    page.get_by_role("button", name="Pause").click()
    expect(page.locator(".flash-success")).to_contain_text("paused")
    expect(page.locator("#queue-stats")).to_contain_text("e2e maintenance")

    # The list refreshes itself: a resume from the CLI shows up without a reload.
    page.goto(base + "/queues/")
    row = page.locator("#queue-e2e-q")
    expect(row).to_contain_text("paused")
    page.evaluate("window.__cronwellMarker = 'no reload'")
    stack.run("queue", "resume", "e2e-q")
    expect(row).to_contain_text("active", timeout=15_000)
    assert page.evaluate("window.__cronwellMarker") == "no reload"
    page.screenshot(path=str(artifacts_dir / "queues.png"), full_page=True)

    # The workers page lists the stack's worker with its buttons (not pressed: others share it).
    page.goto(base + "/workers/")
    expect(page.locator("#workers-table")).to_contain_text("running")
    expect(page.locator("#workers-table").get_by_role("button", name="Drain").first).to_be_visible()
    for path in ("/queues/", "/queues/e2e-q", "/workers/"):
        page.goto(base + path)
        page.set_viewport_size({"width": 390, "height": 844})
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, (path, overflow)
    assert page.console_errors == [], page.console_errors
