"""Authorizer: the one question every front end asks: may this user do this to that table?

The interface is fixed here so the catalog REST/gRPC API, Flight SQL and the SQL layer can call it
while its implementation (users, grants, password checks) lives beside it.
"""

from __future__ import annotations

from typing import Literal, Protocol

from common.errors import StrataError

Action = Literal["READ", "WRITE"]
ResourceType = Literal["DATASOURCE", "EXTERNAL"]  # datasources (schema druid), input tables (schema ext)


class Unauthenticated(StrataError):
    """No or wrong credentials while authentication is on (HTTP 401, gRPC UNAUTHENTICATED)."""


class Authorizer(Protocol):
    enabled: bool

    def authenticate(self, user: str, password: str) -> bool:
        """True when the password is the user's."""

    def user_from_headers(self, headers: dict) -> str | None:
        """The user of a request from its ``Authorization`` header (Basic or a Bearer token this
        node issued). None when authentication is off; raises Unauthenticated when it is on and
        the header is missing or wrong."""

    def can(self, user: str | None, action: Action, resource_type: ResourceType, name: str) -> bool:
        """Whether ``user`` holds ``action`` on the resource (always True when off)."""

    def require(self, user: str | None, action: Action, resource_type: ResourceType, name: str) -> None:
        """Raise PermissionError naming the user, action and resource unless ``can``."""


class _AllowAll:
    enabled = False

    def authenticate(self, user: str, password: str) -> bool:
        return True

    def user_from_headers(self, headers: dict) -> str | None:
        return None

    def can(self, user, action, resource_type, name) -> bool:
        return True

    def require(self, user, action, resource_type, name) -> None:
        return None


ALLOW_ALL: Authorizer = _AllowAll()
