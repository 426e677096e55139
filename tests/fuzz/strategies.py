"""Hostile input for the fuzz tests: what an operator (or an attacker) can type or post.

Text mixes plausible schedule fragments with unicode, control characters, markup and sheer size;
JSON values nest arbitrary types. Hypothesis shrinks a failure to the smallest such input.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# database=None: keep the working tree clean; a failure prints its reproduction (@reproduce_failure).
# CRONWELL_FUZZ_SCALE multiplies the number of examples for a deeper run by hand.
SCALE = float(os.environ.get("CRONWELL_FUZZ_SCALE", "1"))
FUZZ = settings(
    max_examples=int(300 * SCALE),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
FUZZ_DB = settings(FUZZ, max_examples=int(60 * SCALE))

NASTY = [
    "",
    " ",
    "\x00",
    "\n",
    "\r\n",
    "\t",
    "\x1b[31m",
    "\u202e",
    "\ufeff",
    "\u2028",
    "\ud7ff",
    "é",
    "日本",
    "🙂",
    "<script>alert(1)</script>",
    "\"'><img src=x onerror=alert(1)>",
    "{{7*7}}",
    "{% raw %}",
    "${jndi:x}",
    "../../etc/passwd",
    "/etc/passwd",
    "..\\..\\windows",
    "%2e%2e%2f",
    "NaN",
    "Infinity",
    "-0",
    "1e309",
    "0x10",
    "٣",
    "１",
    "²",
    "9" * 40,
    "America",
    "Etc/GMT+99",
    "@reboot",
    "* * * * * *",
    "*/0 * * * *",
]
FRAGMENTS = [
    "*",
    "/",
    "-",
    ",",
    " ",
    "0",
    "1",
    "5",
    "7",
    "12",
    "30",
    "59",
    "60",
    "99",
    "L",
    "W",
    "#",
    "?",
    "mon",
    "jan",
    "s",
    "m",
    "h",
    "d",
    "ms",
    "seconds",
    "min",
    ".",
    "e",
    "+",
    ":",
    "T",
    "Z",
    "@daily",
    "@hourly",
    "@every",
]


def hostile_text(max_size: int = 60) -> st.SearchStrategy[str]:
    """Short text from fragments, nasty samples, any unicode, and occasionally something huge."""
    return st.one_of(
        st.sampled_from(NASTY),
        st.lists(st.sampled_from(FRAGMENTS + NASTY[:20]), max_size=12).map("".join),
        st.text(max_size=max_size),
        st.text(alphabet=st.characters(codec="utf-8"), max_size=max_size),
        st.integers(min_value=1_000, max_value=200_000).map(lambda n: "x" * n),
    )


json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True), hostile_text()
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(hostile_text(20), inner, max_size=4)),
    max_leaves=12,
)


def schedule_values(schedule_type: str) -> st.SearchStrategy:
    key = {"one_time": "run_at", "interval": "every", "cron": "expression"}[schedule_type]
    return st.one_of(
        st.dictionaries(st.sampled_from([key, "start_at", "extra", key.upper()]), json_values, max_size=3),
        st.builds(lambda v: {key: v}, json_values),
        hostile_text(),
        json_values,
    )


# Paths that must never leave a task's artifact directory, and URLs that must never reach an
# internal address (shared by the task-config and job-creation fuzz tests).
TRAVERSAL = [
    "../x",
    "..",
    ".",
    "/etc/passwd",
    "a/../../b",
    "..\\..\\x",
    "x/y",
    "\x00x",
    "x\x00",
    "-rf",
    " x",
    "x ",
    "\u202eexe.txt",
    "x\u2028y",
    "a" * 256,
    "é" * 128,
    "/",
    "\\",
    "C:\\x",
    "./x",
    "~/.ssh/id_rsa",
]
SSRF = [
    "http://10.0.0.1/",
    "http://169.254.169.254/latest/meta-data/",
    "http://[::ffff:127.0.0.1]/",
    "http://2130706433/",
    "http://0x7f.1/",
    "http://017700000001/",
    "http://127.1/",
    "http://0/",
    "http://0.0.0.0/",
    "http://localhost.evil.com/",
    "http://evil.com#@127.0.0.1/",
    "http://user@127.0.0.1/",
    "http://127.0.0.1@evil.com/",
    "file:///etc/passwd",
    "gopher://127.0.0.1:6379/_FLUSHALL",
    "ftp://127.0.0.1/",
    "http://[::1%25eth0]/",
    "http://127.0.0.1:99999/",
    "http://127.0.0.1:0/",
    "//127.0.0.1/",
    "127.0.0.1",
    "http://127.0.0.1 /",
    "http://127.0.0.1\r\nHost: evil/",
    "http://loc\u0430lhost/",
    "http://LOCALHOST./",
    "http://[0:0:0:0:0:0:0:1]/",
    "http://metadata.google.internal/",
    "http://256.0.0.1/",
]
