"""BasicAuthorizer: grants by name and regular expression, the admin, passwords, bearer tokens,
the Authorization header, the users file and config errors."""

from __future__ import annotations

import base64
import os

import pytest

from common.errors import ValidationError
from services.node_config import load_config
from services.security import ALLOW_ALL, Unauthenticated, authorizer_from_config
from services.security import basic_authorizer as ba
from services.security import password_hash
from services.security.basic_authorizer import BasicAuthorizer, Grant, UserSpec, basic_header, hash_password

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def user(name, password, *grants):
    return UserSpec(name, password_hash=hash_password(password), grants=tuple(Grant(*g) for g in grants))


@pytest.fixture
def clock():
    now = [1000.0]
    return now


@pytest.fixture
def auth(clock):
    return BasicAuthorizer("admin", "root-pw", [
        user("reader", "r-pw", ("READ", "DATASOURCE", "wiki")),
        user("regex", "x-pw", ("READ", "DATASOURCE", "wi.*")),
        user("writer", "w-pw", ("WRITE", "DATASOURCE", "wiki"), ("READ", "EXTERNAL", "EXTERNAL")),
        UserSpec("dev", password="plain"),
    ], token_ttl_s=60, clock=lambda: clock[0])


# ---- grants ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("who, action, rtype, name, allowed", [
    ("admin", "READ", "DATASOURCE", "anything", True),
    ("admin", "WRITE", "EXTERNAL", "files", True),
    ("reader", "READ", "DATASOURCE", "wiki", True),
    ("reader", "READ", "DATASOURCE", "wikipedia", False),  # a plain name matches only itself
    ("reader", "READ", "DATASOURCE", "Wiki", False),  # case-sensitive, as Druid names are
    ("reader", "WRITE", "DATASOURCE", "wiki", False),
    ("reader", "READ", "EXTERNAL", "wiki", False),  # the type is part of the resource
    ("regex", "READ", "DATASOURCE", "wiki", True),
    ("regex", "READ", "DATASOURCE", "wikipedia", True),
    ("regex", "READ", "DATASOURCE", "awiki", False),  # full match: no implicit .* in front
    ("regex", "READ", "DATASOURCE", "sales", False),
    ("writer", "WRITE", "DATASOURCE", "wiki", True),
    ("writer", "READ", "DATASOURCE", "wiki", False),  # WRITE does not include READ
    ("writer", "READ", "EXTERNAL", "EXTERNAL", True),
    ("dev", "READ", "DATASOURCE", "wiki", False),  # no grants
    ("stranger", "READ", "DATASOURCE", "wiki", False),  # not a user
    (None, "READ", "DATASOURCE", "wiki", False),  # unauthenticated
])
def test_permission_matrix(auth, who, action, rtype, name, allowed):
    assert auth.can(who, action, rtype, name) is allowed
    if allowed:
        auth.require(who, action, rtype, name)
    else:
        with pytest.raises(PermissionError):
            auth.require(who, action, rtype, name)


def test_denial_names_user_action_resource_and_how_to_get_access(auth):
    with pytest.raises(PermissionError) as err:
        auth.require("reader", "WRITE", "DATASOURCE", "wiki")
    text = str(err.value)
    assert "'reader'" in text and "WRITE" in text and "DATASOURCE 'wiki'" in text
    assert "grant" in text and "users_file" in text
    with pytest.raises(PermissionError, match="unauthenticated.*credentials"):
        auth.require(None, "READ", "DATASOURCE", "wiki")


def test_allow_all_when_off():
    assert ALLOW_ALL.enabled is False
    assert ALLOW_ALL.can(None, "WRITE", "DATASOURCE", "x") and ALLOW_ALL.user_from_headers({}) is None
    ALLOW_ALL.require(None, "READ", "EXTERNAL", "x")


def test_grant_regex_with_alternatives_is_anchored_as_a_whole():
    g = Grant("READ", "DATASOURCE", "a|b.*")
    assert g.covers("READ", "DATASOURCE", "a") and g.covers("READ", "DATASOURCE", "bcd")
    assert not g.covers("READ", "DATASOURCE", "ab")


# ---- passwords ---------------------------------------------------------------------------------------
def test_authenticate(auth):
    assert auth.authenticate("admin", "root-pw")
    assert auth.authenticate("reader", "r-pw")
    assert auth.authenticate("dev", "plain")  # plain-text password (development)
    assert not auth.authenticate("reader", "R-pw")
    assert not auth.authenticate("reader", "")
    assert not auth.authenticate("reader", "r-pw ")
    assert not auth.authenticate("admin", "r-pw")  # another user's password
    assert not auth.authenticate("nobody", "r-pw")
    assert not auth.authenticate("", "")


def test_every_uncached_check_is_one_scrypt_derivation_of_the_same_cost(auth, monkeypatch):
    """Whatever the user or password, a check is one scrypt derivation at the same cost and one
    hmac.compare_digest of two 32-byte keys: unknown users included (the decoy hash), so timing
    tells neither password nor existence; guessing costs a slow hash per guess."""
    derivations, compares = [], []
    real_scrypt, real_compare = password_hash.hashlib.scrypt, password_hash.hmac.compare_digest

    def scrypt(password, **kw):
        derivations.append((kw["n"], kw["r"], kw["p"]))
        return real_scrypt(password, **kw)

    def compare(a, b):
        compares.append((len(a), len(b)))
        return real_compare(a, b)

    monkeypatch.setattr(password_hash.hashlib, "scrypt", scrypt)
    monkeypatch.setattr(password_hash.hmac, "compare_digest", compare)
    for name, password in [("reader", "x"), ("reader", "x" * 10_000), ("nobody", "r-pw"), ("nobody", ""),
                           ("admin", "wrong"), ("dev", "plain"), ("reader", "r-pw")]:
        derivations.clear()
        compares.clear()
        auth.authenticate(name, password)
        assert derivations == [(password_hash.N, password_hash.R, password_hash.P)], (name, len(password))
        assert compares == [(32, 32)]


def test_a_successful_check_is_cached_a_failed_one_never(auth, clock, monkeypatch):
    derivations = []
    real_scrypt = password_hash.hashlib.scrypt
    monkeypatch.setattr(password_hash.hashlib, "scrypt", lambda pw, **kw: derivations.append(1) or real_scrypt(pw, **kw))
    assert auth.authenticate("reader", "r-pw") and len(derivations) == 1
    assert auth.authenticate("reader", "r-pw") and len(derivations) == 1  # from the cache
    assert not auth.authenticate("reader", "wrong") and not auth.authenticate("reader", "wrong")
    assert len(derivations) == 3  # each failure pays the hash again
    assert not auth.authenticate("writer", "r-pw")  # the cache is per user and password
    clock[0] += 301  # past the cache's lifetime: checked again
    assert auth.authenticate("reader", "r-pw") and len(derivations) == 5


def test_passwords_are_kept_hashed_and_never_in_a_repr(auth):
    spec = UserSpec("dev", password="plain-secret")
    assert "plain-secret" not in repr(spec)
    assert "plain-secret" not in repr(vars(auth))
    stored = hash_password("s3cret")
    assert stored.startswith("scrypt$16384$8$1$") and "s3cret" not in stored
    assert stored != hash_password("s3cret")  # salted: equal passwords do not give equal hashes
    assert password_hash.PasswordHash.parse(stored, "x").verify("s3cret")
    assert not password_hash.PasswordHash.parse(stored, "x").verify("s3cret ")


def test_legacy_sha256_passwords_still_work_with_a_warning(caplog):
    spec = UserSpec("old", password_sha256=ba.sha256_password("old-pw"))
    with caplog.at_level("WARNING", logger="strata.security"):
        auth = BasicAuthorizer("admin", "pw", [spec])
    assert auth.authenticate("old", "old-pw") and not auth.authenticate("old", "old-pw!")
    assert "user 'old' has a password_sha256" in caplog.text and "old-pw" not in caplog.text


def test_unknown_user_is_refused_even_with_the_decoy_digest(auth):
    # The decoy is random bytes, not a hash of anything a client could send.
    assert not any(auth.authenticate("ghost", p) for p in ("", "admin", "root-pw"))


# ---- tokens and headers -----------------------------------------------------------------------------
def test_basic_and_bearer_headers(auth, clock):
    assert auth.user_from_headers({"Authorization": basic_header("reader", "r-pw")}) == "reader"
    assert auth.user_from_headers({"authorization": [basic_header("regex", "x-pw").encode()]}) == "regex"  # Flight
    assert auth.user_from_headers([("authorization", basic_header("admin", "root-pw"))]) == "admin"  # gRPC metadata
    token = auth.issue_token("reader")
    assert auth.user_from_headers({"AUTHORIZATION": f"Bearer {token}"}) == "reader"
    assert auth.issue_token("reader") != token  # random per issue
    clock[0] += 59
    assert auth.user_from_headers({"Authorization": f"Bearer {token}"}) == "reader"
    clock[0] += 2  # past the TTL from issue
    with pytest.raises(Unauthenticated, match="expired"):
        auth.user_from_headers({"Authorization": f"Bearer {token}"})


def test_revoked_and_forged_tokens_are_refused(auth):
    token = auth.issue_token("writer")
    auth.revoke_token(token)
    for value in (f"Bearer {token}", "Bearer forged", "Bearer "):
        with pytest.raises(Unauthenticated):
            auth.user_from_headers({"Authorization": value})
    with pytest.raises(ValidationError, match="no user 'ghost'"):
        auth.issue_token("ghost")


@pytest.mark.parametrize("headers, match", [
    ({}, "authentication required"),
    ({"Authorization": ""}, "authentication required"),
    ({"x-strata-user": "admin"}, "authentication required"),  # a claimed user is no credential
    ({"Authorization": basic_header("reader", "wrong")}, "invalid user name or password for 'reader'"),
    ({"Authorization": basic_header("ghost", "r-pw")}, "invalid user name or password for 'ghost'"),
    ({"Authorization": "Basic !!!"}, "malformed basic credentials"),
    ({"Authorization": "Basic " + base64.b64encode(b"no-colon").decode()}, "no ':'"),
    ({"Authorization": "Digest abc"}, "unsupported authorization scheme 'digest'"),
])
def test_bad_headers_are_unauthenticated(auth, headers, match):
    with pytest.raises(Unauthenticated, match=match):
        auth.user_from_headers(headers)


def test_basic_without_padding_and_with_colons_in_the_password():
    auth = BasicAuthorizer("admin", "a:b:c=")
    encoded = base64.b64encode(b"admin:a:b:c=").decode().rstrip("=")
    assert auth.user_from_headers({"Authorization": f"Basic {encoded}"}) == "admin"


def test_token_table_is_bounded():
    tokens = ba.Tokens(ttl_s=60, max_tokens=3)
    issued = [tokens.issue("u") for _ in range(5)]
    assert len(tokens) == 3
    assert tokens.user_of(issued[0]) is None and tokens.user_of(issued[-1]) == "u"


# ---- users file and config ------------------------------------------------------------------------------
def write(tmp_path, text, name="users.toml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def config(tmp_path, **auth):
    env = {f"STRATA_AUTH_{k.upper()}": str(v) for k, v in auth.items()}
    return load_config("broker", None, env=env)


def test_users_file_round_trip(tmp_path):
    path = write(tmp_path, f'''
[[users]]
name = "alice"
password_hash = "{hash_password('alice-pw')}"
[[users.grants]]
action = "read"
pattern = "wiki.*"
[[users.grants]]
action = ["READ", "WRITE"]
type = "external"
pattern = "files"

[[users]]
name = "bob"
password = "bob-pw"
''')
    auth = authorizer_from_config(config(tmp_path, enabled=True, admin_password="pw", users_file=path))
    assert isinstance(auth, BasicAuthorizer) and auth.users() == ["admin", "alice", "bob"]
    assert auth.authenticate("alice", "alice-pw") and auth.authenticate("bob", "bob-pw")
    assert auth.can("alice", "READ", "DATASOURCE", "wikipedia")  # type defaults to DATASOURCE
    assert auth.can("alice", "WRITE", "EXTERNAL", "files") and auth.can("alice", "READ", "EXTERNAL", "files")
    assert not auth.can("alice", "WRITE", "DATASOURCE", "wikipedia")
    assert not auth.can("bob", "READ", "DATASOURCE", "wikipedia")


def test_example_users_file_loads():
    users = ba.load_users_file(os.path.join(ROOT, "deploy", "users.toml.example"))
    auth = BasicAuthorizer("admin", "pw", users)
    assert auth.can("analyst", "READ", "DATASOURCE", "wikipedia")
    assert auth.can("loader", "WRITE", "DATASOURCE", "wikipedia")
    assert auth.can("loader", "READ", "EXTERNAL", "EXTERNAL") and auth.can("loader", "READ", "EXTERNAL", "wiki_files")
    assert auth.can("paul", "WRITE", "DATASOURCE", "paul-temp3") and not auth.can("paul", "READ", "DATASOURCE", "wiki")


def test_auth_off_is_allow_all(tmp_path):
    assert authorizer_from_config(load_config("broker", None, env={})) is ALLOW_ALL
    # Off, a users file is not even read.
    assert authorizer_from_config(config(tmp_path, users_file=str(tmp_path / "missing.toml"))) is ALLOW_ALL


def test_enabled_without_admin_password_is_a_clear_error(tmp_path):
    with pytest.raises(ValidationError, match="admin_password.*STRATA_AUTH_ADMIN_PASSWORD"):
        authorizer_from_config(config(tmp_path, enabled=True))


@pytest.mark.parametrize("text, match", [
    ("[[users]]\nname = 'a'\n", "user 'a' has no password_hash"),
    ("[[users]]\nname = 'a'\npassword = 'x'\npassword_sha256 = 'ab'\n", "not password_sha256 and password"),
    ("[[users]]\nname = 'a'\npassword_sha256 = 'abc'\n", "64 hex digits"),
    ("[[users]]\nname = 'a'\npassword_hash = 'sha1$abc'\n", r"password_hash must be 'scrypt\$N"),
    ("[[users]]\nname = 'a'\npassword_hash = 'scrypt$1024$8$1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5'\n",
     "out of bounds"),
    ("[[users]]\nname = 'a'\npassword_hash = 'scrypt$16384$8$1$c2FsdHNhbHQ$%%%'\n", "must be 'scrypt"),
    ("[[users]]\npassword = 'x'\n", "non-empty name"),
    ("[[users]]\nname = 'a:b'\npassword = 'x'\n", "may not contain ':'"),
    ("[[users]]\nname = 'a'\npassword = 'x'\nrole = 'admin'\n", r"unknown keys \['role'\]"),
    ("[[users]]\nname = 'a'\npassword = 'x'\n[[users.grants]]\naction = 'DELETE'\npattern = 'x'\n",
     "action 'DELETE' is not one of READ, WRITE"),
    ("[[users]]\nname = 'a'\npassword = 'x'\n[[users.grants]]\naction = 'READ'\ntype = 'VIEW'\npattern = 'x'\n",
     "type 'VIEW'"),
    ("[[users]]\nname = 'a'\npassword = 'x'\n[[users.grants]]\naction = 'READ'\npattern = 'wiki['\n",
     r"user 'a', grant 1: grant pattern 'wiki\[' is not a valid regular expression"),
    ("[[users]]\nname = 'a'\npassword = 'x'\n[[users.grants]]\naction = 'READ'\n", "pattern must be"),
    ("[[users]]\nname = 'a'\npassword = 'x'\n[[users]]\nname = 'a'\npassword = 'y'\n", "defined twice"),
    ("[[users]]\nname = 'admin'\npassword = 'x'\n", "admin_user"),
    ("[roles]\nx = 1\n", "unknown top-level keys"),
    ("users = [", "not valid TOML"),
])
def test_users_file_errors(tmp_path, text, match):
    path = write(tmp_path, text)
    with pytest.raises(ValidationError, match=match) as err:
        authorizer_from_config(config(tmp_path, enabled=True, admin_password="pw", users_file=path))
    assert "users" in str(err.value)


def test_missing_users_file(tmp_path):
    with pytest.raises(ValidationError, match="users_file .* does not exist"):
        authorizer_from_config(config(tmp_path, enabled=True, admin_password="pw",
                                      users_file=str(tmp_path / "nope.toml")))


def test_hash_helper_prints_the_users_file_line(capsys, monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("s3cret\n"))
    assert ba.main([]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith('password_hash = "scrypt$') and line.endswith('"')
    assert password_hash.PasswordHash.parse(line.split('"')[1], "printed").verify("s3cret")
