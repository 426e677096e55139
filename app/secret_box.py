"""Alert channels' URLs, addresses and signing secrets, sealed at rest.

A sealed value is `fernet:` followed by a Fernet token (AES-128-CBC with HMAC-SHA256,
`cryptography.fernet`). The key is the setting `CHANNEL_SECRET_KEY`: one Fernet key, or several
separated by commas to rotate (the first seals, every one opens; `flask channel reseal` rewrites
every row with the first). A value without the prefix is plaintext from before sealing (migration
0027 seals those it finds) and is read as it is; its next write seals it.

Without `CHANNEL_SECRET_KEY`, development (DEBUG=1) derives a key from SECRET_KEY and warns once;
production (DEBUG=0) has no key: the web and the scheduler refuse to start
(`config.refuse_insecure_start`), and anything else that touches a channel fails with one line
saying so.

`create_app` installs the app's box (`init_app`); the column type `SealedText`
(app/models/types.py) seals and opens through the installed one, so the ORM, the engine's Core
statements and migrations all read plaintext and write sealed values without knowing it.

A sealed value that no listed key opens (sealed under another key, or damaged) reads as an
`Unreadable` marker instead of failing the whole read: the channel still lists, pages and the API
show it with `UNREADABLE_HINT`, and sending to it fails that delivery with the reason. Written
back (an edit of another field, a reseal), the marker stores the original ciphertext unchanged, so
the value opens again once its key is listed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography.fernet import MultiFernet
    from flask import Flask

PREFIX = "fernet:"
SETTING = "CHANNEL_SECRET_KEY"
GENERATE = "python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'"
EXTENSION = "cronwell.secret_box"

log = logging.getLogger("cronwell.secrets")


class SecretKeyProblem(RuntimeError):
    """CHANNEL_SECRET_KEY is missing or unusable, or a sealed value does not open with it."""


class SealedValueUnreadable(SecretKeyProblem):
    """A sealed value that no listed key opens: sealed under another key, or damaged."""


# What a channel shows in place of a value that cannot be decrypted, and what to do about it
# (`{it}`: "it", or "them" for two values).
UNREADABLE_TEXT = "(unreadable)"
UNREADABLE_HINT = (
    f"stored with a different {SETTING} (or, in development without one, a different SECRET_KEY), "
    f"or damaged; set {{it}} again (or add the old key to {SETTING}, after the first)"
)


class Unreadable(str):
    """A sealed value that does not open: reads as "(unreadable)", keeps the stored ciphertext.

    A str so that every reader of a channel (lists, the audit trail, routing) works unchanged; the
    column type writes `stored` back as it was, never the marker's text."""

    stored: str

    def __new__(cls, stored: str) -> Unreadable:
        marker = super().__new__(cls, UNREADABLE_TEXT)
        marker.stored = stored
        return marker


def is_unreadable(value: object) -> bool:
    """Whether a channel's value is the marker of one that could not be decrypted."""
    return isinstance(value, Unreadable)


def key_problem(settings: Mapping) -> str | None:
    """Why this deployment cannot seal channel secrets (None: it can): DEBUG=0 without
    CHANNEL_SECRET_KEY, or a key that is not a Fernet key (32 bytes, URL-safe base64)."""
    raw = settings.get(SETTING)
    if not raw:
        if settings.get("CRONWELL_DEBUG", settings.get("DEBUG")):
            return None  # development derives one
        return f"DEBUG=0 but {SETTING} is unset; it encrypts alert channels' URLs and secrets: set it to {GENERATE}"
    for number, key in enumerate(_keys(str(raw)), start=1):
        if not _is_fernet_key(key):
            return f"{SETTING} key {number} is not a Fernet key (32 bytes, URL-safe base64): make one with {GENERATE}"
    return None


def _keys(raw: str) -> list[str]:
    return [key.strip() for key in raw.split(",") if key.strip()]


def _is_fernet_key(key: str) -> bool:
    try:
        return len(base64.urlsafe_b64decode(key.encode())) == 32
    except (binascii.Error, ValueError):
        return False


def derived_key(secret_key: str) -> str:
    """The development key: a Fernet key derived from SECRET_KEY (stable while SECRET_KEY is)."""
    digest = hashlib.sha256(("cronwell-channel-secrets:" + secret_key).encode()).digest()
    return base64.urlsafe_b64encode(digest).decode()


class SecretBox:
    """Seals and opens text with a list of Fernet keys (or says why it cannot)."""

    def __init__(self, keys: list[str], *, problem: str | None = None, derived: bool = False) -> None:
        self._keys = keys
        self._problem = problem
        self._derived = derived
        self._fernet: MultiFernet | None = None

    @classmethod
    def from_settings(cls, settings: Mapping) -> SecretBox:
        """The box these settings give: their keys, the development key, or one that refuses."""
        problem = key_problem(settings)
        if problem:
            return cls([], problem=problem)
        raw = settings.get(SETTING)
        if raw:
            return cls(_keys(str(raw)))
        return cls([derived_key(str(settings.get("SECRET_KEY") or ""))], derived=True)

    def _cipher(self) -> MultiFernet:
        if self._problem:
            raise SecretKeyProblem(self._problem)
        if self._fernet is None:
            from cryptography.fernet import Fernet, MultiFernet

            if self._derived:
                log.warning(
                    "%s is unset: channel secrets are encrypted with a key derived from SECRET_KEY "
                    "(development only; set %s before production)",
                    SETTING,
                    SETTING,
                    extra={"event": "channel_key_derived"},
                )
            self._fernet = MultiFernet([Fernet(key.encode()) for key in self._keys])
        return self._fernet

    def seal(self, value: str) -> str:
        """`value` encrypted with the first key, prefixed."""
        return PREFIX + self._cipher().encrypt(value.encode()).decode()

    def open(self, stored: str) -> str:
        """The plaintext of a stored value (a value from before sealing is returned as it is)."""
        if not is_sealed(stored):
            return stored
        from cryptography.fernet import InvalidToken

        try:
            return self._cipher().decrypt(stored[len(PREFIX) :].encode()).decode()
        except InvalidToken:
            raise SealedValueUnreadable(
                f"a channel secret does not open with {SETTING}: was the key replaced? "
                "List the new key first and the old one after it (comma-separated), then run `flask channel reseal`"
            ) from None

    def open_or_mark(self, stored: str) -> str:
        """The plaintext of a stored value, or an `Unreadable` marker when no key opens it (a
        missing or invalid key still raises: that is the deployment's problem, not the value's)."""
        try:
            return self.open(stored)
        except SealedValueUnreadable:
            return Unreadable(stored)


def is_sealed(value: str) -> bool:
    return value.startswith(PREFIX)


_installed: SecretBox | None = None


def init_app(app: Flask) -> SecretBox:
    """Build the app's box from its settings and install it for the column type."""
    global _installed
    box = SecretBox.from_settings(app.config)
    app.extensions[EXTENSION] = box
    _installed = box
    return box


def installed() -> SecretBox:
    """The box `create_app` installed (the column type seals and opens with it)."""
    if _installed is None:
        raise SecretKeyProblem("no secret box installed: build the app with create_app() first")
    return _installed
