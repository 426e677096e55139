"""The console across two organizations with two projects each, in a real browser: every link on
the queues, jobs, executions, workers and alerts pages answers 200 for each role in "All projects"
(and for the superuser in "All organizations"), each list names the project, no page asks for
anything outside this host, and the header fits on one line at 1,366 px.

Runs against the same real stack as test_browser.py (gunicorn, scheduler, worker on SQLite).
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Page, expect

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600), pytest.mark.xdist_group("browser")]

PAGES = ("/queues/", "/jobs/", "/executions/", "/workers/", "/alerts/")
PASSWORD = "projects-e2e-pw"
ROLES = ("viewer", "operator", "admin")


@pytest.fixture(scope="module")
def tenants(stack):
    """default/{default,second}, acme/{main,side}: a job in each; a member of each role in default."""
    stack.run("project", "add", "default", "second")
    stack.run("org", "add", "acme")
    stack.run("project", "add", "acme", "main")
    stack.run("project", "add", "acme", "side")
    for project in ("default/default", "default/second", "acme/main", "acme/side"):
        stack.run(
            "job", "add", f"e2e job of {project}", "always_fail", "interval", "--every", "1h", "--project", project
        )
    for role in ROLES:
        stack.run("user", "create", f"e2e-{role}", "--role", role, "--password-stdin", input=PASSWORD + "\n")
    return stack


def sign_in_as(page: Page, stack, username: str, password: str) -> None:
    page.goto(stack.base_url + "/auth/login")
    page.get_by_label("Username", exact=True).fill(username)
    page.get_by_label("Password", exact=True).fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(stack.base_url + "/dashboard/")


def record_outside_requests(page: Page, base_url: str) -> list[str]:
    """Every request the page makes to another host (filled in as the page runs)."""
    host = urlsplit(base_url).netloc
    outside: list[str] = []

    def note(request) -> None:
        parts = urlsplit(request.url)
        if parts.scheme in ("http", "https", "ws", "wss") and parts.netloc != host:
            outside.append(request.url)

    page.on("request", note)
    return outside


def page_links(page: Page) -> list[str]:
    hrefs = page.eval_on_selector_all("main a[href]", "links => links.map(a => a.getAttribute('href'))")
    return sorted({h for h in hrefs if h.startswith("/") and not h.startswith(("/static/", "/auth/"))})


@pytest.mark.parametrize("who", [*ROLES, "admin-superuser"])
def test_every_link_of_the_lists_answers_200_and_nothing_leaves_the_host(tenants, page: Page, who):
    if who == "admin-superuser":
        sign_in_as(page, tenants, "admin", tenants.env["DEV_ADMIN_PASSWORD"])  # ensure-dev-user: a superuser
    else:
        sign_in_as(page, tenants, f"e2e-{who}", PASSWORD)
    outside = record_outside_requests(page, tenants.base_url)
    checked = 0
    for path in PAGES:
        page.goto(tenants.base_url + path)
        if path in ("/queues/", "/jobs/"):
            expect(page.locator("main table").first).to_contain_text("default/second")
            expect(page.locator("main thead").first).to_contain_text("Project")
        for href in page_links(page):
            answer = page.request.get(tenants.base_url + href)
            assert answer.status == 200, f"{who}: {path} links to {href}: {answer.status}"
            checked += 1
    for path in ("/api/docs", "/api/redoc", "/tokens/"):
        page.goto(tenants.base_url + path)
        page.wait_for_load_state("networkidle")
    assert checked > 10, checked
    assert outside == [], outside


def test_the_header_fits_on_one_line_at_1366_px_and_links_tokens_and_the_api_docs(tenants, page: Page):
    page.set_viewport_size({"width": 1366, "height": 800})
    sign_in_as(page, tenants, "admin", tenants.env["DEV_ADMIN_PASSWORD"])
    links = page.locator(".nav > a, .nav > details > summary")
    tops = {round(box["y"]) for box in (links.nth(i).bounding_box() for i in range(links.count())) if box}
    assert len(tops) == 1, tops
    page.locator(".nav-more summary").click()
    expect(page.locator(".nav-menu a[href='/tokens/']")).to_be_visible()
    expect(page.locator(".nav-menu a[href='/api/docs']")).to_be_visible()
