"""Run the fault scenarios and print their figures as one table (what docs/reliability.md shows).

    .venv/bin/python -m tests.faults.report                 # every fault scenario except the soak
    .venv/bin/python -m tests.faults.report -k failover     # any pytest arguments narrow the run
    make faults                                             # the same as the first line

Each scenario prints its figures on a line of its own, `[scenario name] ...` (the ledger check's
`ledger: jobs=.. occurrences=.. executions=.. duplicates=.. lost=..`, and the scenario's own
measurements: overlap window, recovery time, loss window, ...). This runs pytest with output
shown, collects those lines and prints them grouped by scenario, then pytest's summary line. The
exit status is pytest's.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIGURES = re.compile(r"^\[(?P<scenario>[^\]]+)\] (?P<figures>.+)$")
SUMMARY = re.compile(r"^=*\s*\d+ (passed|failed).*$|^\d+ (passed|failed).*$")


def collect(output: str) -> tuple[dict[str, list[str]], list[str]]:
    """{scenario: [figure lines]} in the order seen, and pytest's summary lines."""
    scenarios: dict[str, list[str]] = {}
    summary = []
    for line in output.splitlines():
        line = line.strip()
        match = FIGURES.match(line)
        if match:
            scenarios.setdefault(match["scenario"], []).append(match["figures"])
        elif SUMMARY.match(line) or line.startswith(("FAILED", "ERROR")):
            summary.append(line)
    return scenarios, summary


def render(scenarios: dict[str, list[str]]) -> str:
    rows = ["| scenario | figures |", "| --- | --- |"]
    for scenario, lines in scenarios.items():
        cell = "<br>".join(line.replace("|", "\\|") for line in lines)
        rows.append(f"| {scenario} | {cell} |")
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", "-m", "not soak"]
    command += argv or ["tests/faults"]
    if argv and not any(arg.startswith("tests/") for arg in argv):
        command.append("tests/faults")
    print("running:", " ".join(command[2:]), flush=True)
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    scenarios, summary = collect(result.stdout)
    print(render(scenarios))
    print()
    print("\n".join(summary) or result.stdout[-3000:])
    if result.returncode != 0:
        print(result.stdout[-6000:], result.stderr[-3000:], sep="\n", file=sys.stderr)
    return result.returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
