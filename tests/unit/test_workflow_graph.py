"""A workflow's graph (app/domain/workflow.py) and its steps' definition (app/definitions/workflow.py):
order, readiness, what a failure holds back, and refusals that name the step."""

from __future__ import annotations

import pytest
from marshmallow import ValidationError

from app.definitions.workflow import load_steps, nodes_of
from app.domain.workflow import GraphError, Node, check_graph, downstream, held_back, ready_steps, roots, run_status
from app.tasks import load_catalog

DIAMOND = [Node("a"), Node("b", ("a",)), Node("c", ("a",)), Node("d", ("b", "c"))]


@pytest.fixture(scope="module", autouse=True)
def catalog():
    load_catalog()


def test_a_diamond_runs_a_then_b_and_c_then_d():
    assert check_graph(DIAMOND) == ["a", "b", "c", "d"]
    assert roots(DIAMOND) == ["a"]
    assert ready_steps(DIAMOND, {}) == ["a"]
    assert ready_steps(DIAMOND, {"a": "running"}) == []
    assert ready_steps(DIAMOND, {"a": "succeeded"}) == ["b", "c"]  # side by side
    assert ready_steps(DIAMOND, {"a": "succeeded", "b": "succeeded", "c": "running"}) == []
    assert ready_steps(DIAMOND, {"a": "succeeded", "b": "succeeded", "c": "succeeded"}) == ["d"]


def test_a_failed_step_holds_back_everything_downstream_and_fails_the_run():
    assert downstream(DIAMOND, "a") == ["b", "c", "d"]
    assert downstream(DIAMOND, "c") == ["d"]
    statuses = {"a": "succeeded", "b": "succeeded", "c": "failed"}
    assert held_back(DIAMOND, statuses) == ["d"]
    assert run_status(DIAMOND, statuses) == "running"  # d is not marked yet
    assert run_status(DIAMOND, {**statuses, "d": "upstream_failed"}) == "failed"
    assert run_status(DIAMOND, dict.fromkeys("abcd", "succeeded")) == "succeeded"


def test_the_order_is_topological_whatever_order_the_steps_are_given_in():
    nodes = [Node("d", ("b", "c")), Node("c", ("a",)), Node("b", ("a",)), Node("a")]
    order = check_graph(nodes)
    for node in nodes:
        assert all(order.index(up) < order.index(node.name) for up in node.after)


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        ([Node("a", ("b",)), Node("b", ("a",))], "step 'a': is part of a cycle: a -> b -> a"),
        ([Node("a"), Node("b", ("x",))], "step 'b': waits for unknown step 'x'"),
        ([Node("a", ("a",))], "step 'a': waits for itself"),
        ([Node("a"), Node("a")], "step 'a': is named twice"),
    ],
)
def test_graphs_that_cannot_run_are_refused_naming_the_step(nodes, message):
    with pytest.raises(GraphError) as refused:
        check_graph(nodes)
    assert str(refused.value) == message


def step(name, after=(), task="always_succeed", **more):
    return {"name": name, "task": task, "after": list(after), **more}


def test_steps_load_with_their_defaults_and_give_their_graph():
    steps = load_steps([step("export"), step("report", ["export"], max_attempts=2, timeout_seconds=60)])
    assert steps[0] == {
        "name": "export",
        "task": "always_succeed",
        "config": {},
        "after": [],
        "max_attempts": None,
        "timeout_seconds": None,
        "queue": None,
    }
    assert steps[1]["max_attempts"] == 2
    assert nodes_of(steps) == [Node("export"), Node("report", ("export",))]


@pytest.mark.parametrize(
    ("steps", "problem"),
    [
        ([step("a"), step("b", ["a", "c"]), step("c", ["b"])], "step 'b': is part of a cycle: b -> c -> b"),
        ([step("a"), step("b", ["exprot"])], "step 'b': waits for unknown step 'exprot'"),
        ([step("a", task="no_such_task")], "step 'a': unknown task 'no_such_task'"),
        ([step("a", task="sleep_for_seconds", config={"seconds": "long"})], "step 'a': config: "),
        ([step("Bad Name")], "step 'Bad Name': name: must be 1-64 lower-case letters, digits, '_' or '-'"),
        ([step("a", max_attempts=0)], "step 'a': max_attempts: "),
        ([{"task": "always_succeed"}], "step #1: name: "),
    ],
)
def test_bad_steps_are_refused_naming_the_step(steps, problem):
    with pytest.raises(ValidationError) as refused:
        load_steps(steps)
    messages = refused.value.messages
    assert any(message.startswith(problem) for message in messages), messages


def test_steps_may_come_as_json_text_and_must_be_a_list():
    assert load_steps('[{"name": "a", "task": "always_succeed"}]')[0]["name"] == "a"
    for bad in ("{}", "[]", "not json", 3):
        with pytest.raises(ValidationError):
            load_steps(bad)
