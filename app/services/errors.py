"""Errors services raise for the adapters (CLI, web, API) to show; never a traceback."""

from __future__ import annotations


class ServiceError(Exception):
    """A handled failure with a message fit to show an operator."""


class NotFound(ServiceError):
    pass


class Forbidden(ServiceError):
    """The caller's role does not allow this (only for objects it may see: others are NotFound)."""


class Conflict(ServiceError):
    """The request is valid but the current state forbids it (disabled job, running execution...)."""


class ValidationFailed(ServiceError):
    """Input was refused; `errors` maps each field to one message."""

    def __init__(self, errors: dict[str, str]) -> None:
        self.errors = dict(errors)
        super().__init__("; ".join(f"{field}: {message}" for field, message in self.errors.items()))
