"""Security headers and cookie flags for every response.

The Content-Security-Policy allows scripts and styles from this origin only: no inline script,
no inline style, no eval. The vendored HTMX fits inside it because the base template's
`htmx-config` meta tag turns off its injected indicator style and its eval-based features.
"""

from __future__ import annotations

from flask import Flask, request

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "manifest-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    ]
)


def configure_cookies(app: Flask) -> None:
    """HttpOnly and SameSite always; Secure (and a __Host- name) with SECURE_COOKIES=1."""
    secure = bool(app.config.get("SECURE_COOKIES"))
    app.config.update(
        SESSION_COOKIE_NAME="__Host-cronwell_session" if secure else "cronwell_session",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=secure,
        REMEMBER_COOKIE_HTTPONLY=True,
        REMEMBER_COOKIE_SAMESITE="Lax",
        REMEMBER_COOKIE_SECURE=secure,
    )


def add_security_headers(response):
    headers = response.headers
    headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    headers.setdefault("X-Frame-Options", "DENY")
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("Referrer-Policy", "same-origin")
    headers.setdefault("Cross-Origin-Opener-Policy", "same-origin")
    headers.setdefault("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()")
    if request.endpoint != "static":
        # Pages show live state and sometimes private output: never keep them in a shared cache.
        headers.setdefault("Cache-Control", "no-store")
        headers.add("Vary", "HX-Request")
    from flask import current_app

    if current_app.config.get("SECURE_COOKIES"):
        headers.setdefault("Strict-Transport-Security", "max-age=31536000; includeSubDomains")
    return response
