"""The job preview shows the jitter offset."""

import json

from app.domain.jitter import jitter_offset
from tests.helpers.cli import ok


def test_preview_shows_the_offset(cli):
    doc = json.loads(
        ok(
            cli(
                "job",
                "add",
                "spread",
                "always_succeed",
                "cron",
                "--cron",
                "0 * * * *",
                "--jitter-seconds",
                "300",
                "--json",
            )
        )
    )
    assert doc["jitter_seconds"] == 300
    offset = jitter_offset(doc["id"], 300)
    items = json.loads(ok(cli("job", "preview", doc["id"], "--count", "2", "--json")))
    for item in items:
        assert item["available_at"] != item["utc"]
    text = ok(cli("job", "preview", doc["id"], "--count", "2"))
    assert f"starts {offset.total_seconds():.3f}s after its time" in text


def test_preview_without_jitter_keeps_the_plain_shape(cli):
    doc = json.loads(ok(cli("job", "add", "plain", "always_succeed", "cron", "--cron", "0 * * * *", "--json")))
    items = json.loads(ok(cli("job", "preview", doc["id"], "--count", "1", "--json")))
    assert set(items[0]) == {"utc", "local", "note"}
