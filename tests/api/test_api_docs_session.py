"""The curl session of docs/api.md, run verbatim against a real gunicorn and a real worker."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from tests.factories import make_user
from tests.helpers.api import PASSWORD
from tests.helpers.databases import IN_CI
from tests.helpers.processes import PROJECT_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def curl_session() -> str:
    text = (PROJECT_ROOT / "docs" / "api.md").read_text()
    match = re.search(r"<!-- curl-session -->\s*```sh\n(.*?)```", text, re.S)
    assert match, "docs/api.md has no curl session block"
    return match.group(1)


def test_the_documented_curl_session_works(app, api_server, flask_processes):
    for tool in ("curl", "jq"):
        if shutil.which(tool) is None:
            (pytest.fail if IN_CI else pytest.skip)(f"{tool} is not installed")
    base, _log = api_server
    make_user("docs", PASSWORD, role="operator")
    worker = flask_processes.start_worker("--workers", "1")
    env = {**os.environ, "BASE": base, "CRONWELL_USER": "docs", "CRONWELL_PASSWORD": PASSWORD}
    finished = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", curl_session()], env=env, capture_output=True, text=True, timeout=150
    )
    output = finished.stdout
    assert finished.returncode == 0, f"{output}\n{finished.stderr}\n{worker.describe()}"
    assert '"organization":"default","role":"operator"' in output
    assert re.search(r"execution \d+: succeeded", output), output
    assert '[{"number":1,"status":"succeeded","exit_code":0}]' in output
    assert "logout: 204" in output and "after logout: 401" in output
