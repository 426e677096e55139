"""Schemathesis against the live published document: a real gunicorn on a loopback port, every
operation, with an admin's API token, positive and negative data, every check (no 5xx, status
codes, content types, headers and bodies as documented, negative data refused).

Every phase runs: the document's examples, coverage (boundary values of every parameter and
unexpected methods), fuzzing, and stateful sequences that follow the document's links (create a
job, then read, edit, trigger it; follow the execution it answers; a batch, a queue, a token...).

`make test` runs SCHEMATHESIS_EXAMPLES (default 6) examples per operation and phase, and
SCHEMATHESIS_STATEFUL_SCENARIOS (default 20) sequences of up to SCHEMATHESIS_STATEFUL_STEPS
(default 8) calls, on SQLite. Larger by hand:
SCHEMATHESIS_EXAMPLES=100 SCHEMATHESIS_STATEFUL_SCENARIOS=300 SCHEMATHESIS_STATEFUL_STEPS=12 \
  .venv/bin/pytest -p no:cacheprovider -s tests/api/test_api_schemathesis.py
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.clock import utcnow
from app.services.caller import Caller
from app.services.use_cases import tokens
from tests.factories import make_execution, make_job, make_queue, make_user

EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "6"))
STATEFUL_SCENARIOS = int(os.environ.get("SCHEMATHESIS_STATEFUL_SCENARIOS", "20"))
STATEFUL_STEPS = int(os.environ.get("SCHEMATHESIS_STATEFUL_STEPS", "8"))
RUN_SECONDS = int(os.environ.get("SCHEMATHESIS_TIMEOUT", "840"))  # raise it for a larger run by hand
pytestmark = [pytest.mark.slow, pytest.mark.timeout(RUN_SECONDS + 60)]


@pytest.fixture
def backend():
    return "sqlite"


def test_every_operation_answers_as_documented(app, api_server, tmp_path):
    base, log_path = api_server
    admin = make_user("schemathesis", "schemathesis-pw", role="admin")
    job = make_job("fuzzed")
    make_execution(job, "failed")
    make_queue("reports")  # the queue of the document's job example, so that the example creates a job
    # Decoys: hypothesis likes small ids, and revoking one of these leaves the fuzzer's token alone.
    for n in range(30):
        tokens.create_token(
            Caller.cli(), name=f"decoy-{n}", project=None, role="viewer", user_id=admin.id, now=utcnow()
        )
    secret = tokens.create_token(
        Caller.cli(), name="fuzzer", project=None, role="admin", user_id=admin.id, now=utcnow()
    ).secret
    report = tmp_path / "schemathesis.txt"
    config = tmp_path / "schemathesis.toml"
    config.write_text(
        Path(__file__).with_name("schemathesis.toml").read_text()
        + f"""
[phases.stateful]
max-steps = {STATEFUL_STEPS}

[phases.stateful.generation]
max-examples = {STATEFUL_SCENARIOS}

# The document's links, and the Location headers of what creation answers.
[phases.stateful.inference]
algorithms = ["location-headers"]
"""
    )
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--config-file",
        str(config),
        "run",
        f"{base}/api/v1/openapi.json",
        "--url",
        base,
        "--phases",
        "examples,coverage,fuzzing,stateful",
        "--checks",
        "all",
        "--max-examples",
        str(EXAMPLES),
        "--header",
        f"Authorization: Bearer {secret}",
        "--seed",
        os.environ.get("SCHEMATHESIS_SEED", "20261201"),
        "--no-color",
        # A loaded CI machine can take seconds for one answer; that is not what this test judges.
        "--request-timeout",
        "30",
        "--max-response-time",
        "60",
    ]
    if os.environ.get("SCHEMATHESIS_INCLUDE"):  # by hand: only the operations whose path matches
        command += ["--include-path-regex", os.environ["SCHEMATHESIS_INCLUDE"]]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=RUN_SECONDS, cwd=tmp_path)
    report.write_text(finished.stdout + finished.stderr)
    print(finished.stdout)
    summary = finished.stdout[-8000:]
    errors = [line for line in log_path.read_text(errors="replace").splitlines() if "api_error" in line]
    assert finished.returncode == 0, summary + "\n--- server errors ---\n" + "\n".join(errors[:5])
    # The stateful phase ran the sequences the document's links describe (none would mean no links).
    assert re.search(r"Stateful \(in [0-9.]+s\)", finished.stdout), summary
    scenarios = re.search(r"Scenarios:\s+(\d+)", finished.stdout)
    assert scenarios and int(scenarios.group(1)) >= 1, summary
