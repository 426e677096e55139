"""The secret box that seals alert channels' URLs and secrets: what a sealed value looks like, key
rotation, a value from before sealing, a key that does not open a value, and which settings give
which box (development derives a key and warns; production without a key refuses); a value no key
opens reads as a marker that writes back the stored value unchanged."""

from __future__ import annotations

import logging

import pytest

from app.secret_box import (
    PREFIX,
    SecretBox,
    SecretKeyProblem,
    Unreadable,
    derived_key,
    is_sealed,
    is_unreadable,
    key_problem,
)

OLD = "Kpu2vVHcH4qkRrJ2rI8Dh3uEQ3b1j2cM4nq0mYt6sXo="
NEW = "3H9NjK_KsCsvBJcGB35pyR-DYTOfPuGNzwIaQgPgorA="
URL = "https://hooks.slack.com/services/T0/B0/XXXXSECRET"


def box(*keys: str) -> SecretBox:
    return SecretBox.from_settings({"CRONWELL_DEBUG": False, "CHANNEL_SECRET_KEY": ",".join(keys)})


def test_a_sealed_value_hides_the_plaintext_and_opens_to_it():
    sealed = box(OLD).seal(URL)
    assert sealed.startswith(PREFIX) and is_sealed(sealed)
    assert "hooks.slack.com" not in sealed and "SECRET" not in sealed
    assert box(OLD).open(sealed) == URL
    assert box(OLD).seal(URL) != sealed  # a fresh token each time: equal URLs do not look equal


def test_a_value_from_before_sealing_reads_as_it_is():
    assert box(OLD).open(URL) == URL
    assert box(OLD).open("env:OPS_HOOK") == "env:OPS_HOOK"


def test_a_value_that_looks_sealed_is_still_sealed_when_given():
    secret = PREFIX + "chosen-by-someone"
    sealed = box(OLD).seal(secret)
    assert sealed != secret and box(OLD).open(sealed) == secret


def test_rotation_the_first_key_seals_every_key_opens():
    before = box(OLD).seal(URL)
    rotated = box(NEW, OLD)
    assert rotated.open(before) == URL
    after = rotated.seal(URL)
    assert box(NEW).open(after) == URL
    with pytest.raises(SecretKeyProblem, match="does not open with CHANNEL_SECRET_KEY"):
        box(OLD).open(after)


def test_a_replaced_key_says_how_to_recover():
    sealed = box(OLD).seal(URL)
    with pytest.raises(SecretKeyProblem) as refused:
        box(NEW).open(sealed)
    assert "old one after it" in str(refused.value) and "flask channel reseal" in str(refused.value)


def test_which_settings_give_which_box(caplog):
    assert key_problem({"CRONWELL_DEBUG": False, "CHANNEL_SECRET_KEY": OLD}) is None
    assert key_problem({"CRONWELL_DEBUG": True}) is None
    assert "CHANNEL_SECRET_KEY is unset" in key_problem({"CRONWELL_DEBUG": False})
    assert "key 2 is not a Fernet key" in key_problem({"CRONWELL_DEBUG": True, "CHANNEL_SECRET_KEY": f"{OLD},short"})

    refusing = SecretBox.from_settings({"CRONWELL_DEBUG": False, "SECRET_KEY": "x" * 40})
    with pytest.raises(SecretKeyProblem, match="CHANNEL_SECRET_KEY is unset"):
        refusing.seal(URL)
    with pytest.raises(SecretKeyProblem, match="CHANNEL_SECRET_KEY is unset"):
        refusing.open(box(OLD).seal(URL))
    assert refusing.open(URL) == URL  # a plaintext value needs no key

    development = SecretBox.from_settings({"CRONWELL_DEBUG": True, "SECRET_KEY": "dev key"})
    with caplog.at_level(logging.WARNING, logger="cronwell.secrets"):
        sealed = development.seal(URL)
        development.seal(URL)
    [warning] = [r for r in caplog.records if getattr(r, "event", None) == "channel_key_derived"]
    assert "derived from SECRET_KEY" in warning.getMessage()
    assert box(derived_key("dev key")).open(sealed) == URL  # stable while SECRET_KEY is


def test_a_value_no_key_opens_reads_as_a_marker_that_keeps_the_stored_value():
    sealed = box(OLD).seal(URL)
    damaged = sealed[:-6] + ("A" if sealed[-6] != "A" else "B") + sealed[-5:]
    for stored, keys in ((sealed, (NEW,)), (damaged, (OLD,)), (PREFIX + "not a token", (OLD,))):
        marker = box(*keys).open_or_mark(stored)
        assert is_unreadable(marker) and marker == "(unreadable)" and marker.stored == stored
    assert box(NEW, OLD).open_or_mark(sealed) == URL and not is_unreadable(box(OLD).open_or_mark(sealed))
    assert not is_unreadable("(unreadable)")  # only the marker itself, not text that looks like it


def test_a_missing_key_is_still_the_deployments_error_not_an_unreadable_value():
    refusing = SecretBox.from_settings({"CRONWELL_DEBUG": False})
    with pytest.raises(SecretKeyProblem, match="CHANNEL_SECRET_KEY is unset"):
        refusing.open_or_mark(box(OLD).seal(URL))


def test_the_column_type_writes_a_marker_back_as_the_value_it_stands_for():
    from app import secret_box
    from app.models.types import SealedText

    column = SealedText()
    sealed = box(OLD).seal(URL)
    previous = secret_box._installed
    secret_box._installed = box(NEW)
    try:
        marker = column.process_result_value(sealed, None)
        assert isinstance(marker, Unreadable)
        assert column.process_bind_param(marker, None) == sealed  # unchanged, not the marker sealed
        assert (
            box(NEW).open(column.process_bind_param("https://new.example.com/x", None)) == "https://new.example.com/x"
        )
    finally:
        secret_box._installed = previous
