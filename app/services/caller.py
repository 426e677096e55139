"""Who is asking: the one value every use case and read model takes to scope what it touches.

Adapters build it (the web from the signed-in user and the chosen project, the CLI as the host
operator, the API from a JWT or an API token, the engine as `system`); services filter by it and
check `Caller.may(action)`. An object outside the caller's organization is reported exactly like a
missing one (NotFound), never as forbidden.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from app.domain.permissions import Action, allows

_REFUSALS = {
    Action.READ: "you are not a member of this organization",
    Action.OPERATE: "your role may view but not change anything; ask an admin for the operator role",
    Action.ADMINISTER: "only an admin of the organization may do this",
}


@dataclass(frozen=True)
class Caller:
    actor: str  # what the event and audit logs record: "web:alice", "cli", "api:alice", "token:ci-deploy", "system"
    source: str  # web | cli | api | system
    role: str | None = None  # the role in `organization_id`; None when superuser or system
    superuser: bool = False  # the installation's operator: every organization
    user_id: int | None = None
    organization_id: int | None = None  # None: every organization (superuser, CLI, system)
    project_id: int | None = None  # None: every project of the organization
    address: str | None = None  # client address for the audit log

    def may(self, action: Action) -> bool:
        return allows(self.role, action, superuser=self.superuser)

    def require(self, action: Action) -> None:
        """Raise Forbidden unless this caller may perform `action`."""
        if not self.may(action):
            from app.services.errors import Forbidden

            raise Forbidden(_REFUSALS[action])

    def in_project(self, project_id: int) -> Caller:
        """This caller narrowed to one of the projects it sees (what it names by name, such as a
        queue, is then looked up there). Narrowing never widens: scoping still applies."""
        return replace(self, project_id=project_id)

    @property
    def sees_everything(self) -> bool:
        return self.superuser or self.source == "system"

    @classmethod
    def system(cls) -> Caller:
        return cls(actor="system", source="system", superuser=True)

    @classmethod
    def cli(cls, project_id: int | None = None) -> Caller:
        """The host operator at the `flask` command line: a superuser, optionally narrowed to a project."""
        return cls(actor="cli", source="cli", superuser=True, project_id=project_id)
