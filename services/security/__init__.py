"""Authentication and authorization: users, their READ/WRITE grants on datasources and external
(input) tables by name or regular expression, and how each front end (REST, Flight SQL, SQL
planning) asks. Off by default; on, every request names a user."""

from services.security.authorizer import (ALLOW_ALL, Action, Authorizer, ResourceType, Unauthenticated,
                                          authorizer_from_config)

__all__ = ["ALLOW_ALL", "Action", "Authorizer", "ResourceType", "Unauthenticated", "authorizer_from_config"]
