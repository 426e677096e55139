"""What the zygote prepares for its task processes (task_child.prepare_in_zygote).

The stdout/stderr streams are built once in the zygote, on fds 1 and 2 while they briefly point at
a pipe, because that is what they are in every task process. The probe runs in a fresh interpreter
whose fd 1 is a regular file: seekable, the case where a stream built on the real fd would cache
the wrong answer.
"""

import json
import subprocess
import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, os, sys
from app.executor import task_child
before = sorted(os.listdir("/proc/self/fd"))
task_child.prepare_in_zygote()
after = sorted(os.listdir("/proc/self/fd"))
streams = task_child._STREAMS
report = {
    "streams": streams is not None,
    "seekable": streams[0].seekable() if streams else None,
    "new_fds": len(after) - len(before),
}
print("zygote's own stdout still works", flush=True)
os.write(2, json.dumps(report).encode())
"""


def run_probe(code: str, **kwargs) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", code], stderr=subprocess.PIPE, cwd=PROJECT_ROOT, timeout=60, check=True, **kwargs
    )
    return json.loads(result.stderr)


def test_streams_built_in_the_zygote_behave_as_on_a_pipe_and_leave_fd_1_alone(tmp_path):
    with open(tmp_path / "out.txt", "w") as out:
        report = run_probe(PROBE, stdout=out)
    written = (tmp_path / "out.txt").read_text()

    assert report["streams"] is True
    assert report["seekable"] is False  # fd 1 is a seekable file here; in a task it is a pipe
    assert report["new_fds"] == 1  # /dev/null for the children's stdin, nothing else left open
    assert written == "zygote's own stdout still works\n"
