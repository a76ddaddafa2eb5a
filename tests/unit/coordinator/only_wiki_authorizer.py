"""``OnlyWiki``: a test authorizer with authentication on, where 'ann' may read and write wiki
only and 'admin' is the admin (may do anything). The coordinator's REST handler tests share it."""

from __future__ import annotations


class OnlyWiki:
    enabled = True
    admin_user = "admin"

    def can(self, user, action, resource_type, name) -> bool:
        return user == "admin" or (user == "ann" and name == "wiki")

    def require(self, user, action, resource_type, name) -> None:
        if not self.can(user, action, resource_type, name):
            raise PermissionError(f"user '{user}' lacks {action} on {name}")
