"""The one table of roles and actions, and the scope a caller's cached figures are kept under."""

from __future__ import annotations

import pytest

from app.domain.permissions import Action, allows, at_most
from app.services.caller import Caller
from app.services.errors import Forbidden
from app.services.scoping import cache_scope

TABLE = {
    "viewer": {Action.READ},
    "operator": {Action.READ, Action.OPERATE},
    "admin": {Action.READ, Action.OPERATE, Action.ADMINISTER},
    None: set(),
}


@pytest.mark.parametrize("role", list(TABLE))
@pytest.mark.parametrize("action", list(Action))
def test_each_role_may_exactly_its_actions(role, action):
    assert allows(role, action) is (action in TABLE[role])
    assert allows(role, action, superuser=True) is True


def test_a_granted_role_is_never_above_its_holders():
    assert at_most("viewer", "operator") and at_most("operator", "operator")
    assert not at_most("admin", "operator") and not at_most("operator", "viewer")


def test_caller_require_raises_forbidden_with_a_reason():
    viewer = Caller(actor="web:v", source="web", role="viewer", organization_id=1)
    viewer.require(Action.READ)
    with pytest.raises(Forbidden, match="view but not change"):
        viewer.require(Action.OPERATE)
    with pytest.raises(Forbidden, match="admin"):
        Caller(actor="web:o", source="web", role="operator", organization_id=1).require(Action.ADMINISTER)
    Caller.cli().require(Action.ADMINISTER)
    Caller.system().require(Action.ADMINISTER)


def test_cache_scopes_keep_tenants_apart():
    assert cache_scope(None) == "all" and cache_scope(Caller.system()) == "all" and cache_scope(Caller.cli()) == "all"
    assert cache_scope(Caller(actor="a", source="web", role="viewer", organization_id=3)) == "org:3"
    assert cache_scope(Caller(actor="a", source="web", role="viewer", organization_id=3, project_id=7)) == (
        "org:3:project:7"
    )
    assert cache_scope(Caller.cli(project_id=7)) == "project:7"
    assert cache_scope(Caller(actor="nobody", source="web")) == "none"  # a member of nothing sees nothing
