"""Authorizer: the one question every front end asks: may this user do this to that table?

The interface is fixed here so the catalog REST/gRPC API, Flight SQL and the SQL layer can call it
while its implementation (users, grants, password checks) lives beside it: BasicAuthorizer in
basic_authorizer.py; ``authorizer_from_config(config)`` picks ALLOW_ALL or it from ``[auth]``.

Conventions every front end follows: ``user=None`` means "nobody authenticated"; with
authentication on, None may do nothing (``can`` is False). HTTP route handlers find the
authenticated user in ``headers["x-strata-user"]`` (services/http_endpoint.py sets it after
dropping any value the client sent).
"""

from __future__ import annotations

from typing import Literal, Protocol

from common.errors import ErrorKind, StrataError

Action = Literal["READ", "WRITE"]
ResourceType = Literal["DATASOURCE", "EXTERNAL"]  # datasources (schema druid), input tables (schema ext)


class Unauthenticated(StrataError):
    """No or wrong credentials while authentication is on (HTTP 401, gRPC UNAUTHENTICATED)."""

    kind = ErrorKind.UNAUTHENTICATED


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


def is_admin(authorizer: Authorizer, user: str | None) -> bool:
    """Whether ``user`` administers the cluster: sees and ends every user's queries (others see and
    end only their own). Everyone is, when authentication is off."""
    if not authorizer.enabled:
        return True
    return user is not None and user == getattr(authorizer, "admin_user", None)


def authorizer_from_config(config) -> Authorizer:
    """ALLOW_ALL when ``[auth] enabled`` is false; else a BasicAuthorizer of the admin and the
    ``[auth] users_file``. Raises ValidationError when enabled without an admin password."""
    from services.security.basic_authorizer import authorizer_from_config as build

    return build(config)
