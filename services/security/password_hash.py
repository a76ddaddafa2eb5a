"""Password hashes for the users file: scrypt, a memory-hard key derivation function (hashlib's
binding of OpenSSL), with a random salt per password and its cost parameters in the text, so the
cost can be raised later without invalidating existing files::

    password_hash = "scrypt$16384$8$1$<salt, base64>$<derived key, base64>"

Checking a password costs one derivation (tens of milliseconds and 16 MiB at the default cost),
which is what makes guessing slow; callers cache successful checks (see ``VerifiedCache``) so a
client sending Basic credentials on every call does not pay it every time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from common.bounded_cache import BoundedCache
from common.errors import ValidationError

SCHEME = "scrypt"
N = 2 ** 14
R = 8
P = 1
KEY_BYTES = 32
SALT_BYTES = 16
# Bounds on what a users file may ask for: weaker is not a slow hash, stronger could exhaust memory.
_MIN_N, _MAX_N = 2 ** 12, 2 ** 20
_MAX_MEMORY = 256 * 1024 * 1024


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)


def _derive(password: str, salt: bytes, n: int, r: int, p: int, length: int) -> bytes:
    return hashlib.scrypt(password.encode("utf-8"), salt=salt, n=n, r=r, p=p, dklen=length,
                          maxmem=_MAX_MEMORY + 1024 * 1024)


@dataclass(frozen=True)
class PasswordHash:
    n: int
    r: int
    p: int
    salt: bytes = field(repr=False)
    key: bytes = field(repr=False)

    @staticmethod
    def of(password: str, *, n: int = N, r: int = R, p: int = P, salt: bytes | None = None) -> PasswordHash:
        salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
        return PasswordHash(n, r, p, salt, _derive(password, salt, n, r, p, KEY_BYTES))

    @staticmethod
    def parse(text: str, where: str) -> PasswordHash:
        """Parses the text form; ``where`` names the setting in errors (never the hash itself)."""
        how = f"{where} must be '{SCHEME}$N$r$p$salt$key' as printed by python -m services.security.basic_authorizer"
        parts = text.split("$") if isinstance(text, str) else []
        if len(parts) != 6 or parts[0] != SCHEME:
            raise ValidationError(how)
        try:
            n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
            salt, key = _unb64(parts[4]), _unb64(parts[5])
        except (ValueError, binascii.Error):
            raise ValidationError(how) from None
        if not (_MIN_N <= n <= _MAX_N and n & (n - 1) == 0) or not 1 <= r <= 32 or not 1 <= p <= 16:
            raise ValidationError(f"{where}: scrypt cost N={n}, r={r}, p={p} is out of bounds (N a power of two "
                                  f"from {_MIN_N} to {_MAX_N}, r 1..32, p 1..16)")
        if 128 * n * r > _MAX_MEMORY:
            raise ValidationError(f"{where}: scrypt N={n}, r={r} needs more than {_MAX_MEMORY >> 20} MiB per check")
        if len(salt) < 8 or len(key) < 16:
            raise ValidationError(f"{where}: the salt (at least 8 bytes) or the key (at least 16) is too short")
        return PasswordHash(n, r, p, salt, key)

    def text(self) -> str:
        return f"{SCHEME}${self.n}${self.r}${self.p}${_b64(self.salt)}${_b64(self.key)}"

    def verify(self, password: str) -> bool:
        return hmac.compare_digest(_derive(password, self.salt, self.n, self.r, self.p, len(self.key)), self.key)


def hash_password(password: str) -> str:
    """The ``password_hash`` value of a password for the users file."""
    return PasswordHash.of(password).text()


class VerifiedCache:
    """(user, password) pairs that passed a check in the last ``ttl_s`` seconds, so repeated
    requests skip the slow hash. Entries are keyed by an HMAC under a key that lives only in this
    process: the cache holds no password and nothing a stolen memory dump could check offline
    faster than the scrypt hashes themselves. Failed checks are never cached."""

    def __init__(self, ttl_s: float = 300.0, max_entries: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._key = secrets.token_bytes(32)
        self._entries = BoundedCache(max_entries, ttl_s=ttl_s, clock=clock)

    def _id(self, user: str, password: str) -> bytes:
        return hmac.new(self._key, user.encode("utf-8") + b"\0" + password.encode("utf-8"), "sha256").digest()

    def hit(self, user: str, password: str) -> bool:
        return self._entries.get(self._id(user, password), touch=False) is not None

    def add(self, user: str, password: str) -> None:
        self._entries.put(self._id(user, password), True)


__all__ = ["PasswordHash", "VerifiedCache", "hash_password"]
