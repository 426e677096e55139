"""Migration 0027 (channel secrets) on both databases: up widens the target and secret columns and
seals every plaintext value with CHANNEL_SECRET_KEY; down opens them and restores the old lengths;
with DEBUG=0, no key and channels to seal it stops saying so (and without channels it needs none)."""

from __future__ import annotations

from cryptography.fernet import Fernet
from sqlalchemy import inspect, text

from app import create_app
from app.secret_box import SecretBox
from tests.helpers import migrations
from tests.helpers.databases import CHANNEL_SECRET_KEY, app_env_for
from tests.helpers.migrations import engine_for, flask_db, rows

fresh_url = migrations.fresh_url  # the fixture: an empty database on each backend

CHANNELS = [
    ("hook", "webhook", "https://hooks.example.com/very/secret/path", "signing-secret"),
    ("desk", "email", "desk@example.com", None),
    ("env", "slack", "env:OPS_SLACK_URL", None),
]
BOX = SecretBox.from_settings({"CHANNEL_SECRET_KEY": CHANNEL_SECRET_KEY})


def _add_channels(url: str) -> None:
    engine = engine_for(url)
    try:
        with engine.begin() as conn:
            project = conn.execute(text("SELECT id FROM projects ORDER BY id LIMIT 1")).scalar()
            for name, kind, target, secret in CHANNELS:
                conn.execute(
                    text(
                        "INSERT INTO alert_channels (project_id, name, kind, target, secret, kinds, enabled,"
                        " created_at, updated_at) VALUES (:project, :name, :kind, :target, :secret, '[]', true,"
                        " CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
                    ),
                    {"project": project, "name": name, "kind": kind, "target": target, "secret": secret},
                )
    finally:
        engine.dispose()


def _stored(url: str) -> list[tuple]:
    return rows(url, "SELECT name, target, secret FROM alert_channels ORDER BY id")


def _lengths(url: str) -> dict[str, int | None]:
    engine = engine_for(url)
    try:
        columns = inspect(engine).get_columns("alert_channels")
        return {c["name"]: getattr(c["type"], "length", None) for c in columns if c["name"] in ("target", "secret")}
    finally:
        engine.dispose()


def _upgrade_without_a_key(url: str, instance) -> tuple[int, str]:
    env = {k: v for k, v in app_env_for(url, instance).items() if k != "CHANNEL_SECRET_KEY"}
    app = create_app(env=env)
    with app.app_context():
        result = app.test_cli_runner().invoke(args=["db", "upgrade"])
        from app.extensions import db

        db.engine.dispose()
    return result.exit_code, f"{result.output}{result.exception!r}"


def test_0027_seals_plaintext_values_and_a_downgrade_opens_them(fresh_url, tmp_path):
    flask_db(fresh_url, tmp_path, "upgrade", "0026")
    _add_channels(fresh_url)
    plaintext = [(name, target, secret) for name, _kind, target, secret in CHANNELS]
    assert _stored(fresh_url) == plaintext

    flask_db(fresh_url, tmp_path, "upgrade", "0027")
    sealed = _stored(fresh_url)
    for (name, target, secret), (_, stored_target, stored_secret) in zip(plaintext, sealed, strict=True):
        assert stored_target.startswith("fernet:") and BOX.open(stored_target) == target, name
        assert "example.com" not in stored_target
        assert (stored_secret is None) == (secret is None)
        if secret:
            assert stored_secret.startswith("fernet:") and BOX.open(stored_secret) == secret
    assert _lengths(fresh_url) == {"target": None, "secret": None}  # TEXT: a sealed value is longer
    flask_db(fresh_url, tmp_path, "upgrade", "0027")  # again: nothing to do, nothing sealed twice
    assert _stored(fresh_url) == sealed

    flask_db(fresh_url, tmp_path, "downgrade", "0026")
    assert _stored(fresh_url) == plaintext
    assert _lengths(fresh_url) == {"target": 500, "secret": 200}
    flask_db(fresh_url, tmp_path, "downgrade", "0017")  # the older migrations still go down after it
    assert rows(fresh_url, "SELECT name FROM alert_channels ORDER BY id") == [("hook",), ("desk",)]


def test_0027_in_production_needs_the_key_only_when_there_is_something_to_seal(fresh_url, tmp_path, caplog):
    flask_db(fresh_url, tmp_path, "upgrade", "0026")
    code, output = _upgrade_without_a_key(fresh_url, tmp_path)
    assert code == 0, output  # no channel: no key needed
    flask_db(fresh_url, tmp_path, "downgrade", "0026")
    _add_channels(fresh_url)
    code, _output = _upgrade_without_a_key(fresh_url, tmp_path)
    [error] = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert code == 1 and error.startswith("Error: DEBUG=0 but CHANNEL_SECRET_KEY is unset") and "\n" not in error
    assert rows(fresh_url, "SELECT version_num FROM alembic_version") == [("0026",)]
    assert [row[1] for row in _stored(fresh_url)] == [target for _n, _k, target, _s in CHANNELS]
    flask_db(fresh_url, tmp_path, "upgrade", "0027")  # with the key it goes through
    assert all(row[1].startswith("fernet:") for row in _stored(fresh_url))


def test_0027_goes_down_and_up_again_past_values_no_key_opens(fresh_url, tmp_path):
    flask_db(fresh_url, tmp_path, "upgrade", "0026")
    _add_channels(fresh_url)
    flask_db(fresh_url, tmp_path, "upgrade", "0027")
    # The hook's URL and secret sealed under a key the app no longer lists; a long secret's
    # ciphertext is over the 200 characters the column held before 0027.
    other = SecretBox.from_settings({"CHANNEL_SECRET_KEY": Fernet.generate_key().decode()})
    foreign_target = other.seal("https://hooks.example.com/other/key")
    foreign_secret = other.seal("s" * 150)
    assert len(foreign_target) <= 500 and len(foreign_secret) > 200
    engine = engine_for(fresh_url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text("UPDATE alert_channels SET target = :target, secret = :secret WHERE name = 'hook'"),
                {"target": foreign_target, "secret": foreign_secret},
            )
    finally:
        engine.dispose()
    [hook_id] = [row[0] for row in rows(fresh_url, "SELECT id FROM alert_channels WHERE name = 'hook'")]

    said = flask_db(fresh_url, tmp_path, "downgrade", "0026")
    warnings = [line for line in said.splitlines() if line.startswith("Warning:")]
    assert warnings == [
        f"Warning: alert channel {hook_id}: its URL cannot be decrypted with CHANNEL_SECRET_KEY: kept"
        " encrypted; its signing secret cannot be decrypted with CHANNEL_SECRET_KEY: cleared (too long"
        " for the column); the channel is disabled"
    ], said
    stored = rows(fresh_url, "SELECT name, target, secret, enabled FROM alert_channels ORDER BY id")
    assert stored == [
        ("hook", foreign_target, None, False),
        ("desk", "desk@example.com", None, True),
        ("env", "env:OPS_SLACK_URL", None, True),
    ]
    assert _lengths(fresh_url) == {"target": 500, "secret": 200}

    assert "Warning:" not in flask_db(fresh_url, tmp_path, "upgrade", "0027")
    hook, desk, env = rows(fresh_url, "SELECT target, secret, enabled FROM alert_channels ORDER BY id")
    assert hook == (foreign_target, None, False)  # as it was: it opens again once its key is listed
    assert other.open(hook[0]) == "https://hooks.example.com/other/key"
    assert BOX.open(desk[0]) == "desk@example.com" and BOX.open(env[0]) == "env:OPS_SLACK_URL"
