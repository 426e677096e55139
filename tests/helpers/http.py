"""A tiny browser for tests against a real web process (flask run or gunicorn): keeps cookies,
reads the CSRF token from the page's meta tag, never follows redirects (tests look at them).
"""

from __future__ import annotations

import http.cookiejar
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

_CSRF_META = re.compile(r'<meta name="csrf-token" content="([^"]+)"')


@dataclass
class Response:
    status: int
    body: str
    headers: dict

    @property
    def location(self) -> str:
        return self.headers.get("Location", "")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


class Browser:
    def __init__(self, base: str) -> None:
        self.base = base.rstrip("/")
        self.cookies = http.cookiejar.CookieJar()
        self._opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.cookies), _NoRedirect())

    def request(
        self, method: str, path: str, data: dict | None = None, headers: dict | None = None, timeout: float = 10
    ) -> Response:
        body = urllib.parse.urlencode(data).encode() if data is not None else None
        request = urllib.request.Request(self.base + path, data=body, method=method, headers=headers or {})
        try:
            with self._opener.open(request, timeout=timeout) as answer:
                return Response(answer.status, answer.read().decode(errors="replace"), dict(answer.headers))
        except urllib.error.HTTPError as error:
            return Response(error.code, error.read().decode(errors="replace"), dict(error.headers))
        except OSError:
            return Response(0, "", {})

    def get(self, path: str, **kwargs) -> Response:
        return self.request("GET", path, **kwargs)

    def csrf_token(self, path: str = "/auth/login") -> str:
        page = self.get(path)
        match = _CSRF_META.search(page.body)
        assert match, f"no csrf-token meta tag on {path} ({page.status})"
        return match.group(1)

    def post_form(self, path: str, data: dict, *, token_from: str = "/auth/login") -> Response:
        return self.request("POST", path, {**data, "csrf_token": self.csrf_token(token_from)})

    def sign_in(self, username: str, password: str) -> Response:
        return self.post_form("/auth/login", {"username": username, "password": password})

    def session_cookie(self) -> str | None:
        for cookie in self.cookies:
            if cookie.name.endswith("cronwell_session"):
                return cookie.value
        return None
