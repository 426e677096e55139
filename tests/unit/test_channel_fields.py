"""`check_edit`'s text fields: a name or target is stripped, a value that is not a string counts
as empty, and every refused field comes back at once, keyed by field (no database: the channel is
an unsaved row)."""

from __future__ import annotations

import pytest

from app.models import AlertChannel
from app.services.errors import ValidationFailed
from app.services.use_cases.channel_fields import NAME_MAX, TARGET_MAX, check_edit


def _slack() -> AlertChannel:
    return AlertChannel(name="ops", kind="slack", target="https://hooks.slack.com/services/T0/B0/X")


def test_a_name_and_a_target_are_stripped():
    values = check_edit(_slack(), {"name": "  ops-2 ", "target": " https://hooks.slack.com/services/T0/B0/Y "})
    assert values == {"name": "ops-2", "target": "https://hooks.slack.com/services/T0/B0/Y"}


def test_fields_not_sent_stay_out_of_the_values():
    assert check_edit(_slack(), {"enabled": False}) == {"enabled": False}


@pytest.mark.parametrize("sent", [None, 5, ["ops"], "   "])
def test_a_name_and_a_target_that_are_not_text_are_refused_together(sent):
    with pytest.raises(ValidationFailed) as refused:
        check_edit(_slack(), {"name": sent, "target": sent, "enabled": True})
    assert refused.value.errors == {
        "name": f"must be 1-{NAME_MAX} printable characters",
        "target": f"is required (at most {TARGET_MAX} characters)",
    }


def test_the_target_is_checked_for_the_channels_kind():
    email = AlertChannel(name="desk", kind="email", target="desk@example.com")
    assert check_edit(email, {"target": "ops@example.com"}) == {"target": "ops@example.com"}
    with pytest.raises(ValidationFailed) as refused:
        check_edit(email, {"target": "https://hooks.slack.com/services/T0/B0/Y"})
    assert refused.value.errors == {"target": "must be an email address"}
    with pytest.raises(ValidationFailed) as refused:
        check_edit(_slack(), {"target": "desk@example.com"})
    assert refused.value.errors == {"target": "a slack channel needs an http:// or https:// URL"}
