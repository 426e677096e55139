"""The lock check: a lock that no longer matches the file people edit fails `make lint`.

The check runs on copies of the real inputs and locks in a temporary checkout, so a planted stale
pin never touches the repository's own files.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "dependency_lock.py"
FILES = ("requirements.txt", "requirements-dev.txt", "requirements.lock", "requirements-dev.lock")


@pytest.fixture
def checkout(tmp_path) -> Path:
    for name in FILES:
        shutil.copyfile(ROOT / name, tmp_path / name)
    return tmp_path


def check(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "check", "--root", str(root)], capture_output=True, text=True, timeout=60
    )


def test_the_repositorys_locks_match_their_inputs(checkout):
    result = check(checkout)
    assert result.returncode == 0, result.stderr


def test_a_planted_stale_pin_fails_the_check_naming_the_package(checkout):
    source = checkout / "requirements.txt"
    source.write_text(source.read_text().replace("croniter==7.0.0", "croniter==6.0.0"))
    result = check(checkout)
    assert result.returncode == 1
    assert "requirements.lock has croniter==7.0.0 but requirements.txt pins 6.0.0: run `make lock`" in result.stderr
    # The dev lock includes the runtime file, so it is stale too.
    assert "requirements-dev.lock has croniter==7.0.0 but requirements-dev.txt pins 6.0.0" in result.stderr


def test_a_new_dependency_without_make_lock_fails_the_check(checkout):
    source = checkout / "requirements-dev.txt"
    source.write_text(source.read_text() + "pytest-randomly==3.16.0\n")
    result = check(checkout)
    assert result.returncode == 1
    assert "requirements-dev.lock has no pytest-randomly (requirements-dev.txt pins 3.16.0)" in result.stderr
    assert "requirements.lock" not in result.stderr.replace("requirements-dev.lock", "")


def test_an_input_edited_without_a_version_change_is_still_caught_by_the_digest(checkout):
    source = checkout / "requirements.txt"
    source.write_text(source.read_text() + "Flask-Caching==2.3.1\n")
    # Put the new pin into the lock by hand, as someone skipping `make lock` might: the digest differs.
    lock = checkout / "requirements.lock"
    lock.write_text(lock.read_text() + "flask-caching==2.3.1 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    result = check(checkout)
    assert result.returncode == 1
    assert "requirements.lock was made from another requirements.txt (its digest differs)" in result.stderr


def test_a_missing_lock_fails_the_check(checkout):
    (checkout / "requirements.lock").unlink()
    result = check(checkout)
    assert result.returncode == 1
    assert "requirements.lock is missing: run `make lock`" in result.stderr
