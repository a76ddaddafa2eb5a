"""BasicAuthorizer: users with passwords and READ/WRITE grants, as Druid's basic security has them.

Who may log in:
  - the admin from config (``[auth] admin_user`` / ``admin_password``), who holds every permission;
  - the users of ``[auth] users_file``, a TOML file (see deploy/users.toml.example)::

        [[users]]
        name = "alice"
        password_hash = "scrypt$16384$8$1$..."   # python -m services.security.basic_authorizer

        [[users.grants]]
        action = "READ"            # "READ", "WRITE", or a list of both
        type = "DATASOURCE"        # "DATASOURCE" (schema druid) or "EXTERNAL" (input tables, schema ext)
        pattern = "wiki.*"         # a regular expression matched against the WHOLE name

A pattern is a Python regular expression that must match the entire resource name
(``re.fullmatch``), so a plain name such as ``wiki`` is a pattern matching exactly ``wiki`` (and
not ``wikipedia``); write ``wiki.*`` for every name starting with ``wiki``. Names with regex
characters (``.``) in them match themselves too, and a little more (``a.b`` also matches ``axb``);
escape them (``a\\.b``) to be exact. As in Druid, WRITE does not include READ: grant both to
let a user read what it writes. Inline external data in INSERT (``TABLE(EXTERN(...))``,
``TABLE(localfiles(...))``, ...) needs READ on the EXTERNAL resource named ``EXTERNAL``, as in
Druid; input tables of the catalog (``ext.name``) need READ on EXTERNAL ``name``.

How a request proves who it is: ``Authorization: Basic base64(user:password)``, or
``Authorization: Bearer <token>`` with a token ``issue_token`` handed out (random, kept in memory
only, valid ``token_ttl_s`` seconds from issue; a restart forgets them). Passwords are kept only as
salted scrypt hashes (services/security/password_hash.py; the admin's and plain-text development
passwords are hashed on load), so checking one costs a slow derivation; an unknown user is checked
against a decoy hash of the same cost, so timing reveals neither the password nor whether the
user exists. Successful checks are cached for a few minutes (keyed by an in-process HMAC) so
clients sending Basic credentials on every call do not pay the derivation every time. The older
``password_sha256`` (unsalted SHA-256, fast to guess) is still read, with a warning in the log
naming the user; passwords themselves are never logged, and config and user objects leave them
out of their repr.

``python -m services.security.basic_authorizer`` reads a password (no echo) and prints the
``password_hash`` line for the users file.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import re
import secrets
import time
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from common.bounded_cache import BoundedCache
from common.errors import ValidationError
from services.security.authorizer import ALLOW_ALL, Action, Authorizer, ResourceType, Unauthenticated
from services.security.password_hash import PasswordHash, VerifiedCache, hash_password

log = logging.getLogger("strata.security")

ACTIONS: tuple[str, ...] = ("READ", "WRITE")
RESOURCE_TYPES: tuple[str, ...] = ("DATASOURCE", "EXTERNAL")
# Inline external data (EXTERN and the input-source table functions) is this EXTERNAL resource.
INLINE_EXTERNAL = "EXTERNAL"
USER_HEADER = "x-strata-user"


def sha256_password(password: str) -> str:
    """The legacy ``password_sha256`` value of a password (hex SHA-256 of its UTF-8 bytes)."""
    return hashlib.sha256(password.encode("utf-8")).hexdigest()


class _Sha256Check:
    """A legacy unsalted SHA-256 digest: still accepted, but fast to guess (see the warning)."""

    def __init__(self, digest: bytes) -> None:
        self._digest = digest

    def verify(self, password: str) -> bool:
        return hmac.compare_digest(hashlib.sha256(password.encode("utf-8")).digest(), self._digest)


@dataclass(frozen=True)
class Grant:
    """``action`` on every resource of ``resource_type`` whose whole name matches ``pattern``."""

    action: Action
    resource_type: ResourceType
    pattern: str
    regex: re.Pattern = field(compare=False, repr=False, default=None)

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValidationError(f"grant action '{self.action}' is not one of {', '.join(ACTIONS)}")
        if self.resource_type not in RESOURCE_TYPES:
            raise ValidationError(f"grant type '{self.resource_type}' is not one of {', '.join(RESOURCE_TYPES)}")
        if self.regex is None:
            try:
                object.__setattr__(self, "regex", re.compile(self.pattern))
            except re.error as exc:
                raise ValidationError(f"grant pattern '{self.pattern}' is not a valid regular expression: {exc}") \
                    from None

    def covers(self, action: str, resource_type: str, name: str) -> bool:
        return (action == self.action and resource_type == self.resource_type
                and self.regex.fullmatch(name) is not None)


@dataclass(frozen=True)
class UserSpec:
    """A user of the users file: ``password_hash`` (scrypt, see password_hash.py), or the legacy
    ``password_sha256``, or ``password`` in plain text (development only). None of them is in
    the repr, so a logged or printed UserSpec shows no secret."""

    name: str
    password_sha256: str = field(default="", repr=False)
    password: str = field(default="", repr=False)
    grants: tuple[Grant, ...] = ()
    password_hash: str = field(default="", repr=False)

    def checker(self):
        """What checks this user's password (``.verify(password) -> bool``)."""
        given = [k for k in ("password_hash", "password_sha256", "password") if getattr(self, k)]
        if len(given) > 1:
            raise ValidationError(f"user '{self.name}': give one of password_hash, password_sha256 or password, "
                                  f"not {' and '.join(given)}")
        if self.password_hash:
            return PasswordHash.parse(self.password_hash, f"user '{self.name}': password_hash")
        if self.password_sha256:
            try:
                raw = bytes.fromhex(self.password_sha256)
            except ValueError:
                raw = b""
            if len(raw) != 32:
                raise ValidationError(f"user '{self.name}': password_sha256 must be 64 hex digits (better: replace it "
                                      "by password_hash, printed by python -m services.security.basic_authorizer)")
            log.warning("user '%s' has a password_sha256 (unsalted SHA-256, fast to guess); replace it by "
                        "password_hash, printed by python -m services.security.basic_authorizer", self.name)
            return _Sha256Check(raw)
        if self.password:
            return PasswordHash.of(self.password)
        raise ValidationError(f"user '{self.name}' has no password_hash (or password)")


class Tokens:
    """Bearer tokens -> user, each valid ``ttl_s`` from issue; at most ``max_tokens`` (oldest go)."""

    def __init__(self, ttl_s: float = 3600.0, max_tokens: int = 100_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.max_tokens = max_tokens
        self._tokens = BoundedCache(max_tokens, ttl_s=ttl_s, clock=clock)

    def issue(self, user: str) -> str:
        token = secrets.token_urlsafe(32)
        self._tokens.put(token, user)
        return token

    def user_of(self, token: str) -> str | None:
        return self._tokens.get(token, touch=False)  # oldest issued go first, used or not

    def revoke(self, token: str) -> None:
        self._tokens.pop(token)

    def __len__(self) -> int:
        return len(self._tokens)


class BasicAuthorizer:
    """The Authorizer (services/security/authorizer.py) of the admin and the users file."""

    enabled = True

    def __init__(self, admin_user: str, admin_password: str, users: Iterable[UserSpec] = (), *,
                 token_ttl_s: float = 3600.0, clock: Callable[[], float] = time.monotonic) -> None:
        if not admin_user:
            raise ValidationError("config [auth] enabled needs admin_user")
        if not admin_password:
            raise ValidationError("config [auth] enabled needs admin_password "
                                  "(give it by environment: STRATA_AUTH_ADMIN_PASSWORD)")
        self.admin_user = admin_user
        self._checks: dict = {admin_user: PasswordHash.of(admin_password)}
        self._grants: dict[str, tuple[Grant, ...]] = {admin_user: ()}
        for user in users:
            _check_name(user.name)
            if user.name in self._checks:
                what = "the admin_user of [auth]" if user.name == admin_user else "defined twice"
                raise ValidationError(f"users file: user '{user.name}' is {what}; user names must be unique")
            self._checks[user.name] = user.checker()
            self._grants[user.name] = tuple(user.grants)
        # Unknown users are checked against this (a hash of nothing a client knows), so they cost
        # what a known user costs.
        self._decoy = PasswordHash.of(secrets.token_urlsafe(32))
        self._verified = VerifiedCache(clock=clock)
        self.tokens = Tokens(token_ttl_s, clock=clock)

    # ---- authentication ---------------------------------------------------------------------------
    def users(self) -> list[str]:
        return sorted(self._checks)

    def authenticate(self, user: str, password: str) -> bool:
        if self._verified.hit(user, password):
            return True
        check = self._checks.get(user)
        ok = (check if check is not None else self._decoy).verify(password) and check is not None
        if ok:
            self._verified.add(user, password)
        return ok

    def issue_token(self, user: str) -> str:
        """A bearer token for ``user`` (authenticate first), accepted by ``user_from_headers``."""
        if user not in self._checks:
            raise ValidationError(f"no user '{user}' to issue a token to")
        return self.tokens.issue(user)

    def revoke_token(self, token: str) -> None:
        self.tokens.revoke(token)

    def user_from_headers(self, headers) -> str | None:
        scheme, credentials = authorization_header(headers)
        if scheme is None:
            raise Unauthenticated("authentication required: send 'Authorization: Basic base64(user:password)' "
                                  "or 'Authorization: Bearer <token>'")
        if scheme == "basic":
            user, password = decode_basic(credentials)
            if not self.authenticate(user, password):
                raise Unauthenticated(f"invalid user name or password for '{user}'")
            return user
        if scheme == "bearer":
            user = self.tokens.user_of(credentials)
            if user is None:
                raise Unauthenticated("bearer token unknown or expired; authenticate again with basic credentials")
            return user
        raise Unauthenticated(f"unsupported authorization scheme '{scheme}'; use Basic or Bearer")

    # ---- authorization ----------------------------------------------------------------------------
    def grants(self, user: str) -> tuple[Grant, ...]:
        return self._grants.get(user, ())

    def can(self, user: str | None, action: Action, resource_type: ResourceType, name: str) -> bool:
        if user is None or user not in self._grants:
            return False
        if user == self.admin_user:
            return True
        return any(g.covers(action, resource_type, name) for g in self._grants[user])

    def require(self, user: str | None, action: Action, resource_type: ResourceType, name: str) -> None:
        if self.can(user, action, resource_type, name):
            return
        raise PermissionError(denied_message(user, action, resource_type, name))


def denied_message(user: str | None, action: str, resource_type: str, name: str) -> str:
    what = f"{action} on {resource_type} '{name}'"
    if user is None:
        return (f"unauthenticated caller may not {what}: authentication is on; send basic credentials "
                "(or a bearer token) of a user granted it")
    return (f"user '{user}' may not {what}: no grant of that user covers it (the table may also not exist). "
            f"Ask an administrator to grant {action} on {resource_type} '{name}' (a [[users.grants]] entry of "
            "the [auth] users_file, by name or regular expression)")


def _check_name(name) -> None:
    if not isinstance(name, str) or not name:
        raise ValidationError("users file: every [[users]] entry needs a non-empty name")
    if ":" in name or any(ch.isspace() or ord(ch) < 32 for ch in name):
        raise ValidationError(f"users file: user name '{name}' may not contain ':', spaces or control characters")


# ---- headers ---------------------------------------------------------------------------------------
def authorization_header(headers) -> tuple[str | None, str]:
    """(lower-case scheme, credentials) of the ``Authorization`` header, in any case, from a dict of
    str values (HTTP), of lists of str/bytes (Flight), or an iterable of (key, value) (gRPC metadata)."""
    items = headers.items() if hasattr(headers, "items") else headers or ()
    value = None
    for key, v in items:
        if isinstance(key, str) and key.lower() == "authorization":
            value = v
            break
    if isinstance(value, (list, tuple)):
        value = value[0] if value else None
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    if not value or not value.strip():
        return None, ""
    scheme, _, credentials = value.strip().partition(" ")
    return scheme.lower(), credentials.strip()


def decode_basic(credentials: str) -> tuple[str, str]:
    padded = credentials + "=" * (-len(credentials) % 4)  # some clients drop the '=' padding
    try:
        text = base64.b64decode(padded, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise Unauthenticated("malformed basic credentials: expected base64 of 'user:password'") from None
    user, sep, password = text.partition(":")
    if not sep:
        raise Unauthenticated("malformed basic credentials: no ':' between user and password")
    return user, password


def basic_header(user: str, password: str) -> str:
    """The ``Authorization`` header value for basic credentials (for clients and tests)."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


# ---- users file --------------------------------------------------------------------------------------
_USER_KEYS = ("name", "password_hash", "password_sha256", "password", "grants")
_GRANT_KEYS = ("action", "type", "pattern")


def load_users_file(path: str) -> list[UserSpec]:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ValidationError(f"config [auth] users_file '{path}' does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValidationError(f"users file '{path}' is not valid TOML: {exc}") from None
    try:
        return parse_users(data)
    except ValidationError as exc:
        raise ValidationError(f"users file '{path}': {exc}") from None


def parse_users(data: dict) -> list[UserSpec]:
    """UserSpecs from the parsed TOML of a users file."""
    unknown = sorted(set(data) - {"users"})
    if unknown:
        raise ValidationError(f"unknown top-level keys {unknown}; the file holds [[users]] entries")
    entries = data.get("users", [])
    if not isinstance(entries, list):
        raise ValidationError("'users' must be an array of tables: write [[users]]")
    users = []
    for i, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict):
            raise ValidationError(f"users entry {i} must be a table")
        name = entry.get("name")
        where = f"user '{name}'" if isinstance(name, str) and name else f"users entry {i}"
        bad = sorted(set(entry) - set(_USER_KEYS))
        if bad:
            raise ValidationError(f"{where}: unknown keys {bad}; valid: {', '.join(_USER_KEYS)}")
        _check_name(name)
        for key in ("password_hash", "password_sha256", "password"):
            if not isinstance(entry.get(key, ""), str):
                raise ValidationError(f"{where}: {key} must be a string")
        grants = []
        raw_grants = entry.get("grants", [])
        if not isinstance(raw_grants, list):
            raise ValidationError(f"{where}: grants must be an array of tables: write [[users.grants]]")
        for j, g in enumerate(raw_grants, start=1):
            grants.extend(_parse_grant(g, f"{where}, grant {j}"))
        spec = UserSpec(name, entry.get("password_sha256", ""), entry.get("password", ""), tuple(grants),
                        entry.get("password_hash", ""))
        spec.checker()  # password problems surface at load, not at first login
        users.append(spec)
    return users


def _parse_grant(g, where: str) -> list[Grant]:
    if not isinstance(g, dict):
        raise ValidationError(f"{where} must be a table")
    bad = sorted(set(g) - set(_GRANT_KEYS))
    if bad:
        raise ValidationError(f"{where}: unknown keys {bad}; valid: {', '.join(_GRANT_KEYS)}")
    actions = g.get("action")
    actions = [actions] if isinstance(actions, str) else actions
    if not actions or not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
        raise ValidationError(f"{where}: action must be {' or '.join(ACTIONS)} (or a list of them)")
    rtype = g.get("type", "DATASOURCE")
    pattern = g.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        raise ValidationError(f"{where}: pattern must be a non-empty string (a name or a regular expression "
                              "matched against the whole name)")
    if not isinstance(rtype, str):
        raise ValidationError(f"{where}: type must be {' or '.join(RESOURCE_TYPES)}")
    try:
        return [Grant(a.upper(), rtype.upper(), pattern) for a in actions]
    except ValidationError as exc:
        raise ValidationError(f"{where}: {exc}") from None


# ---- config -----------------------------------------------------------------------------------------------
def authorizer_from_config(config) -> Authorizer:
    """ALLOW_ALL when ``[auth] enabled`` is false; else the admin plus the users file."""
    auth = config.auth
    if not auth.enabled:
        return ALLOW_ALL
    if not auth.admin_password:
        raise ValidationError("config [auth] enabled needs admin_password "
                              "(give it by environment: STRATA_AUTH_ADMIN_PASSWORD)")
    users = load_users_file(auth.users_file) if auth.users_file else []
    return BasicAuthorizer(auth.admin_user, auth.admin_password, users, token_ttl_s=auth.token_ttl_s)


def main(argv: list[str] | None = None) -> int:
    import getpass
    import sys

    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        print("usage: python -m services.security.basic_authorizer  (reads a password, prints password_hash)")
        return 0
    password = sys.stdin.readline().rstrip("\n") if not sys.stdin.isatty() else getpass.getpass("password: ")
    print(f'password_hash = "{hash_password(password)}"')
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
