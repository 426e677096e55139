"""The Slack, Teams and email shapes of an alert, checked against each service's documented
message schema, and how a channel URL is shown after creation."""

from __future__ import annotations

import jsonschema
import pytest

from app.domain.channel_messages import (
    email_parts,
    masked_url,
    notice_from_payload,
    slack_message,
    teams_message,
)
from tests.helpers.message_schemas import SLACK, TEAMS

BASE = "https://cronwell.example.com/"
DEAD_LETTER = {
    "type": "alert",
    "alert": {
        "id": 7,
        "kind": "dead_letter",
        "message": "execution 41 failed after 3 attempts: RuntimeError: upstream <b>503</b> & more",
        "job_id": 3,
        "job_name": "nightly <report>",
        "execution_id": 41,
        "queue_id": None,
        "project_id": 1,
        "created_at": "2026-06-01T12:00:00Z",
    },
}
TEST_MESSAGE = {
    "type": "test",
    "message": "Test message for channel 'ops'",
    "channel_id": 2,
    "created_at": "2026-06-01T12:00:00Z",
}
LOST_WORKER = {
    "type": "alert",
    "alert": {"id": 8, "kind": "worker_lost", "message": "worker w1 went quiet", "job_id": None},
}


@pytest.mark.parametrize("payload", [DEAD_LETTER, TEST_MESSAGE, LOST_WORKER])
@pytest.mark.parametrize("base_url", [BASE, None])
def test_slack_and_teams_messages_match_their_documented_shapes(payload, base_url):
    notice = notice_from_payload(payload, base_url)
    jsonschema.validate(slack_message(notice), SLACK)
    jsonschema.validate(teams_message(notice), TEAMS)


def test_the_slack_message_shows_job_status_excerpt_and_links_back_escaped():
    message = slack_message(notice_from_payload(DEAD_LETTER, BASE))
    header, fields, excerpt, actions, context = message["blocks"]
    assert header["text"]["text"] == "Job failed for good: nightly <report>"  # plain_text: shown as written
    assert [f["text"] for f in fields["fields"]] == ["*Job*\nnightly &lt;report&gt;", "*Status*\ndead_letter"]
    assert (
        excerpt["text"]["text"]
        == "```execution 41 failed after 3 attempts: RuntimeError: upstream &lt;b&gt;503&lt;/b&gt; &amp; more```"
    )
    assert [(b["text"]["text"], b["url"]) for b in actions["elements"]] == [
        ("Open execution", "https://cronwell.example.com/executions/41"),
        ("Open job", "https://cronwell.example.com/jobs/3"),
        ("Alerts", "https://cronwell.example.com/alerts/"),
    ]
    assert context["elements"][0]["text"] == "Cronwell · 2026-06-01T12:00:00Z"
    assert message["text"] == "Job failed for good: nightly &lt;report&gt;"


def test_the_teams_card_holds_the_same_facts_and_links():
    card = teams_message(notice_from_payload(DEAD_LETTER, BASE))["attachments"][0]["content"]
    title, facts, excerpt = card["body"]
    assert title["text"] == "Job failed for good: nightly <report>"
    assert facts["facts"] == [
        {"title": "Job", "value": "nightly <report>"},
        {"title": "Status", "value": "dead_letter"},
        {"title": "When", "value": "2026-06-01T12:00:00Z"},
    ]
    assert excerpt["text"].startswith("execution 41 failed") and excerpt["fontType"] == "Monospace"
    assert [a["url"] for a in card["actions"]][:2] == [
        "https://cronwell.example.com/executions/41",
        "https://cronwell.example.com/jobs/3",
    ]


def test_without_a_base_url_there_are_no_links():
    notice = notice_from_payload(DEAD_LETTER, None)
    assert not [b for b in slack_message(notice)["blocks"] if b["type"] == "actions"]
    assert "actions" not in teams_message(notice)["attachments"][0]["content"]


def test_a_long_excerpt_and_title_are_cut_to_the_limits():
    long = {"type": "alert", "alert": {**DEAD_LETTER["alert"], "message": "x" * 5000, "job_name": "j" * 300}}
    message = slack_message(notice_from_payload(long, BASE))
    jsonschema.validate(message, SLACK)
    assert len(message["blocks"][0]["text"]["text"]) == 150
    assert message["blocks"][2]["text"]["text"] == "```" + "x" * 500 + "```"


def test_the_email_has_a_text_and_an_escaped_html_part():
    subject, text, page = email_parts(notice_from_payload(DEAD_LETTER, BASE))
    assert subject.startswith("[Cronwell] dead_letter: execution 41 failed")
    assert "Job: nightly <report>" in text and "Open job: https://cronwell.example.com/jobs/3" in text
    assert "nightly &lt;report&gt;" in page and "<report>" not in page and "&lt;b&gt;503" in page
    assert "<a href='https://cronwell.example.com/jobs/3'>Open job</a>" in page


@pytest.mark.parametrize(
    "url,shown",
    [
        ("https://hooks.slack.com/services/T000/B000/XXXXabcd", "https://hooks.slack.com/…abcd"),
        (
            "https://example.webhook.office.com/webhookb2/secret-part/IncomingWebhook/x/y1234",
            "https://example.webhook.office.com/…1234",
        ),
        ("http://127.0.0.1:9/hook", "http://127.0.0.1/…hook"),
    ],
)
def test_a_channel_url_is_shown_without_its_path(url, shown):
    assert masked_url(url) == shown
    assert "T000" not in masked_url(url) and "secret-part" not in masked_url(url)


GROUPED_FAILURES = {
    "type": "notice",
    "notice": {
        "event": "failure",
        "job_id": 3,
        "job_name": "nightly <report>",
        "project_id": 1,
        "execution_id": 60,
        "message": "job 'nightly <report>': run #60 failed: boom",
        "created_at": "2026-06-01T12:09:00Z",
        "first_at": "2026-06-01T12:00:00Z",
        "count": 20,
    },
}
RECOVERY = {
    "type": "notice",
    "notice": {
        **GROUPED_FAILURES["notice"],
        "event": "recovery",
        "message": "job 'nightly <report>' is working again: run #61 succeeded",
        "count": 1,
        "closed_alert_ids": [7],
    },
}


@pytest.mark.parametrize("payload", [GROUPED_FAILURES, RECOVERY], ids=["grouped-failures", "recovery"])
def test_notices_match_the_slack_and_teams_schemas_and_say_how_many(payload):
    notice = notice_from_payload(payload, BASE)
    slack, teams = slack_message(notice), teams_message(notice)
    jsonschema.validate(slack, SLACK)
    jsonschema.validate(teams, TEAMS)
    subject, text, page = email_parts(notice)
    if payload is GROUPED_FAILURES:
        assert notice.title == "Job failed: nightly <report>" and notice.count == 20
        assert notice.excerpt.startswith("20 failures since 2026-06-01T12:00:00Z; the latest:")
        assert {"type": "mrkdwn", "text": "*Count*\n20"} in slack["blocks"][1]["fields"]
        assert {"title": "Count", "value": "20"} in teams["attachments"][0]["content"]["body"][1]["facts"]
        assert "Count: 20" in text and "nightly &lt;report&gt;" in page
    else:
        assert notice.title == "Job is working again: nightly <report>" and notice.count == 1
        assert "Count" not in text and "working again" in notice.excerpt
    assert ("Open execution", f"{BASE.rstrip('/')}/executions/60") in notice.links
