"""Fuzzing every CLI parameter that takes an id or a number, on SQLite and PostgreSQL.

The parameters come from walking the Click command tree under `flask`: every parameter whose type
is the CLI id type or one of Click's int/float types (ranges included), so a new command is fuzzed
as soon as it is registered. Each gets huge, negative, zero, non-numeric and other scripts' digits.

Asserted (the CLI's error contract, docs/cli.md): exit 0, 1 with exactly one `Error: ...` line on stderr (never
"database error"), or 2 for a usage error; never a traceback. An id no row can have is a missing
object: `Error: <noun> N does not exist`. Commands that run a process until stopped are only
parsed, never run: whatever their parser accepts is a finite number a process can use.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import click
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli.common import IdType
from tests.factories import make_alert, make_execution, make_job
from tests.fuzz.strategies import SCALE

CLI_FUZZ = settings(
    max_examples=int(80 * SCALE),
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# Commands that run until stopped (a scheduler, a worker pool): parsed here, never invoked.
PROCESS_COMMANDS = {("scheduler", "run"), ("worker", "run")}
INT32_MAX = 2**31 - 1
BAD_NUMBERS = [
    "99999999999999999999",  # beyond PostgreSQL's integer: once "Error: database error: integer out of range"
    "2147483648",
    "9223372036854775808",
    "-1",
    "0",
    "-0",
    "abc",
    "",
    "1.5",
    "1e3",
    "nan",
    "inf",
    "٣",  # int() accepts other scripts' digits
    "9" * 5000,  # int() refuses more than 4,300 digits
]
# Values for the other required parameters of a command, by parameter name.
FILLERS = {"name": "fuzz-cli-job", "task": "always_succeed", "schedule_type": "interval", "kind": "worker"}


def numeric(param: click.Parameter) -> bool:
    return isinstance(param.type, IdType | click.types.IntParamType | click.types.FloatParamType)


def commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name), command


def targets(app) -> list[tuple[tuple[str, ...], str]]:
    """(command path, parameter name) for every numeric parameter of every command."""
    found = [
        (path, param.name)
        for path, command in commands(app.cli)
        for param in command.params
        if numeric(param) and param.name
    ]
    assert found, "no command takes an id or a number: the walk would test nothing"
    return found


def command_at(app, path: tuple[str, ...]) -> click.Command:
    command = app.cli
    for name in path:
        command = command.commands[name]
    return command


def argv(app, path: tuple[str, ...], target: str, value: str, world: dict) -> list[str]:
    """The command line giving `value` to `target` and a plain value to every other required parameter."""
    command = command_at(app, path)
    arguments, options = [], []
    for param in command.params:
        if isinstance(param, click.Argument):
            if param.name == target:
                arguments += ["--", value] if value.startswith("-") else [value]
                continue
            if param.required:
                arguments.append(filler(param, world))
        elif param.name == target:
            options += [param.opts[0], value]
    if "--every" in {opt for param in command.params for opt in param.opts} and target != "every":
        options += ["--every", "1m"]
    return [*path, *options, *arguments]


def filler(param: click.Parameter, world: dict) -> str:
    if isinstance(param.type, IdType):
        return str(world.get(param.name, 1))
    if param.name in FILLERS:
        return FILLERS[param.name]
    if isinstance(param.type, click.Choice):
        return str(param.type.choices[0])
    return "x"


@pytest.fixture
def world(app) -> dict:
    job = make_job("fuzz-cli-existing")
    execution = make_execution(job, "failed")
    alert = make_alert(job, execution)
    return {"job_id": job.id, "execution_id": execution.id, "alert_ids": alert.id}


def assert_cli_contract(result, what: str) -> None:
    assert not (result.exception and not isinstance(result.exception, SystemExit)), (
        f"{what}: exception escaped: {result.exception!r}\n{result.output[-2000:]}"
    )
    assert "Traceback" not in result.output, what
    assert result.exit_code in (0, 1, 2), (what, result.exit_code, result.output[-2000:])
    if result.exit_code == 1:
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), (what, result.stderr[-2000:])
        assert "database error" not in lines[0], (what, lines[0])
    if result.exit_code == 2:
        assert "Error:" in result.stderr, (what, result.stderr[-2000:])


def assert_id_refused(result, param: click.Parameter, value: str, what: str) -> None:
    """A value no row can have never succeeds: a usage error, or the missing-object line."""
    assert result.exit_code in (1, 2), (what, result.exit_code, result.output[-500:])
    text = value.strip().lstrip("+")
    if result.exit_code == 1 and text.lstrip("-").isascii() and text.lstrip("-").isdigit():
        assert f"{param.type.noun} " in result.stderr and "does not exist" in result.stderr, (what, result.stderr)


def assert_parses_to_a_usable_number(app, path, target: str, value: str) -> None:
    """For a process command: the parser refuses `value` or yields a finite number of sane size."""
    command = command_at(app, path)
    param = next(p for p in command.params if p.name == target)
    with app.app_context():
        try:
            parsed = param.type_cast_value(click.Context(command), value)
        except click.ClickException:
            return
    assert math.isfinite(parsed) and abs(parsed) <= INT32_MAX, f"{' '.join(path)} {target}={value!r} gave {parsed!r}"


def check(app, world: dict, path: tuple[str, ...], target: str, value: str) -> None:
    if path in PROCESS_COMMANDS:
        assert_parses_to_a_usable_number(app, path, target, value)
        return
    args = argv(app, path, target, value, world)
    what = "flask " + " ".join(args)[:300]
    result = app.test_cli_runner().invoke(args=args)
    assert_cli_contract(result, what)
    param = next(p for p in command_at(app, path).params if p.name == target)
    if isinstance(param.type, IdType) and value not in (str(v) for v in world.values()):
        assert_id_refused(result, param, value, what)


def test_every_numeric_parameter_with_every_bad_number(app, world):
    for path, target in targets(app):
        for value in BAD_NUMBERS:
            check(app, world, path, target, value)


@CLI_FUZZ
@given(data=st.data())
def test_generated_numbers_for_every_numeric_parameter(app, world, data):
    path, target = data.draw(st.sampled_from(targets(app)), label="parameter")
    value = data.draw(
        st.one_of(
            st.sampled_from(BAD_NUMBERS),
            st.integers().map(str),
            st.integers(min_value=INT32_MAX - 2, max_value=2**70).map(str),
            st.floats().map(str),
            st.text(alphabet=st.characters(categories=["Nd"]), min_size=1, max_size=12),
            st.text(max_size=30).map(lambda text: text.replace("\x00", "")),
        ),
        label="value",
    )
    check(app, world, path, target, value)
