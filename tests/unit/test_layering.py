"""The layering rules docs/architecture.md states, enforced on the source (ast only, nothing runs).

- ``common`` never imports ``services``, nor grpc or protobuf (RPC lives in ``services/rpc``);
- ``services/<role>/core`` (pure logic) never imports grpc, asyncio, pyspark or ``services.rpc``;
- within ``common``, each package imports only the packages its row in the architecture table
  allows (segment and types know nothing of queries, SQL or RPC);
- roles talk to each other through per-role clients, never through the command line's
  ``ClusterClient`` (no module outside ``services/cli`` imports ``services.cli``);
- no grab-bag modules (utils.py, helpers.py), and every package says what lives in it;
- roles (broker, coordinator, historical, ingestion) reach each other only through the per-role
  clients (``services/<role>/client.py``, ``catalog_client.py``): what two roles share lives in
  ``common`` (``common/ingest``, ``common/segment/allocation``) or a shared ``services`` package;
- no import cycles among modules (module-level imports; a function-level import is how a cycle is
  broken, and it says so);
- a function-level import of strata's own modules says why beside it (a cycle, start-up cost);
- nothing writes state into frozen query or segment objects (``object.__setattr__`` outside a
  constructor, ``setattr`` on another object, ``.memo(...)``), and no cache in the query path is
  keyed by ``id()``: per-query state belongs in a prepared query, not on the objects;
- no cache outside the runtime: no OrderedDict LRU, functools cache or id()-keyed state but in
  the listed modules (common/bounded_cache.py is the one cache class);
- no ambient per-query state: no ContextVar, copied context or thread-local in common/ or
  services/ (what a query needs is passed to it: the call's origin, the running query).

The last rules name today's offenders in allow-lists; an entry that no longer offends fails too,
so each list only shrinks.
"""

from __future__ import annotations

import ast
import functools
import os

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# common/<package> -> the common packages it may import (besides itself and common.errors).
ALLOWED_COMMON = {
    "types": set(),
    "json": {"types"},
    "segment": {"types", "json"},
    "expr": {"types", "json"},
    "query": {"segment", "expr", "types", "json"},
    "catalog": {"types", "query", "segment", "expr", "json"},
    "sql": {"query", "expr", "types", "catalog", "segment", "json"},
    "demo": {"types"},
    "ingest": {"types", "sql", "json", "query", "expr"},  # transformSpec: the engine's expressions and filters
}
# Leaf modules of common/ that every package may import (they import nothing of common).
LEAVES = ("errors", "bounded_cache")
IO_LIBRARIES = ("grpc", "asyncio", "pyspark")
RPC_LIBRARIES = ("grpc", "grpc_tools", "grpc_health", "grpc_reflection", "google.protobuf")


def modules(top: str):
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, top)):
        dirnames[:] = [d for d in dirnames if d not in ("gen", "__pycache__")]
        for name in filenames:
            if name.endswith(".py"):
                yield os.path.relpath(os.path.join(dirpath, name), ROOT)


@functools.lru_cache(maxsize=None)
def source(path: str) -> tuple[str, ast.Module]:
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        text = f.read()
    return text, ast.parse(text, path)


def imports(path: str) -> list[tuple[int, str]]:
    tree = source(path)[1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
    return out


COMMON = sorted(modules("common"))
SERVICES = sorted(modules("services"))


def test_common_never_imports_services():
    bad = [f"{m}:{line} imports {name}" for m in COMMON for line, name in imports(m)
           if name == "services" or name.startswith("services.")]
    assert bad == [], "common/ must not import services/:\n" + "\n".join(bad)


def _is_rpc(name: str) -> bool:
    return any(name == lib or name.startswith(lib + ".") for lib in RPC_LIBRARIES) or \
        name == "services.rpc" or name.startswith("services.rpc.")


def test_common_never_imports_rpc():
    stale = [m for m in COMMON if m.startswith(os.path.join("common", "rpc") + os.sep)]
    assert stale == [], f"RPC code (generated or not) lives in services/rpc: {stale}"
    bad = [f"{m}:{line} imports {name}" for m in COMMON for line, name in imports(m) if _is_rpc(name)]
    assert bad == [], "common/ must not import grpc, protobuf or services.rpc:\n" + "\n".join(bad)


def test_service_cores_do_no_io():
    cores = [m for m in SERVICES if f"{os.sep}core{os.sep}" in m]
    assert cores, "no services/*/core modules found"
    bad = [f"{m}:{line} imports {name}" for m in cores for line, name in imports(m)
           if name.split(".")[0] in IO_LIBRARIES or _is_rpc(name)]
    assert bad == [], "services/*/core must stay pure (no grpc, asyncio, pyspark, services.rpc):\n" + "\n".join(bad)


@pytest.mark.parametrize("package", sorted(ALLOWED_COMMON))
def test_common_packages_import_only_what_they_may(package):
    allowed = ALLOWED_COMMON[package] | {package}
    bad = []
    for m in COMMON:
        parts = m.split(os.sep)
        if len(parts) < 3 or parts[1] != package:
            continue
        for line, name in imports(m):
            segs = name.split(".")
            if segs[0] == "common" and len(segs) > 1 and segs[1] not in allowed and segs[1] not in LEAVES:
                bad.append(f"{m}:{line} imports {name}")
    assert bad == [], f"common/{package} may import only {sorted(allowed)}:\n" + "\n".join(bad)


def test_roles_never_use_the_command_lines_client():
    outside = [m for m in SERVICES if not m.startswith(os.path.join("services", "cli") + os.sep)]
    bad = [f"{m}:{line} imports {name}" for m in outside for line, name in imports(m)
           if name == "services.cli" or name.startswith("services.cli.")]
    assert bad == [], "use services/<role>/client.py, not the CLI's ClusterClient:\n" + "\n".join(bad)


def test_no_grab_bag_modules_and_every_package_says_what_it_holds():
    grab = [m for m in COMMON + SERVICES if os.path.basename(m) in ("utils.py", "helpers.py")]
    assert grab == [], f"name modules after what they define: {grab}"
    silent = []
    for m in COMMON + SERVICES:
        if os.path.basename(m) == "__init__.py":
            with open(os.path.join(ROOT, m), encoding="utf-8") as f:
                if ast.get_docstring(ast.parse(f.read())) is None:
                    silent.append(m)
    assert silent == [], f"packages without a docstring saying what lives there: {silent}"


# ---- roles ------------------------------------------------------------------------------------------------
ROLES = ("broker", "coordinator", "historical", "ingestion")
ROLE_CLIENTS = ("client", "catalog_client")  # services/<role>/<this>.py: how other roles call a role
# (importing module, imported module) -> why it is allowed for now.
ROLE_IMPORTS_ALLOWED: dict[tuple[str, str], str] = {}


def _role_of(path: str) -> str | None:
    parts = path.split(os.sep)
    return parts[1] if len(parts) > 2 and parts[0] == "services" and parts[1] in ROLES else None


def test_roles_import_each_other_only_through_their_clients():
    found = set()
    for m in SERVICES:
        role = _role_of(m)
        if role is None:
            continue
        for line, name in imports(m):
            segs = name.split(".")
            if len(segs) < 2 or segs[0] != "services" or segs[1] not in ROLES or segs[1] == role:
                continue
            if len(segs) == 3 and segs[2] in ROLE_CLIENTS:
                continue
            found.add((m.replace(os.sep, "/"), name, line))
    bad = [f"{m}:{line} imports {name}" for m, name, line in sorted(found) if (m, name) not in ROLE_IMPORTS_ALLOWED]
    assert bad == [], ("a role imports another role's internals; call it through services/<role>/client.py, "
                       "or move what both need to common/ or a shared services package:\n" + "\n".join(bad))
    stale = set(ROLE_IMPORTS_ALLOWED) - {(m, name) for m, name, _ in found}
    assert not stale, f"drop these ROLE_IMPORTS_ALLOWED entries, they no longer happen: {sorted(stale)}"


# ---- import cycles ----------------------------------------------------------------------------------------
def _module_name(path: str) -> str:
    name = path[:-3].replace(os.sep, ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def _module_level_imports(path: str, known: set[str]) -> set[str]:
    """The strata modules ``path`` imports at module level (not under TYPE_CHECKING): ``from pkg
    import sub`` is an edge to the submodule when ``sub`` is one, else to ``pkg``."""
    tree = source(path)[1]
    out = set()
    statements = []
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        statements.extend(node.body if isinstance(node, ast.Try) else [node])
    for node in statements:
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if full in known:
                    out.add(full)
                elif node.module in known:
                    out.add(node.module)
    return out


def import_cycles(paths) -> list[list[str]]:
    by_name = {_module_name(p): p for p in paths}
    known = set(by_name)
    return cycles_of({n: _module_level_imports(p, known) - {n} for n, p in by_name.items()})


def cycles_of(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one node (Tarjan), each sorted."""
    index, low, on_stack, stack, cycles = {}, {}, set(), [], []

    def visit(v):
        # Iterative: the module graph is deep enough to matter for Python's recursion limit.
        work = [(v, iter(sorted(graph[v])))]
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    group.append(w)
                    if w == node:
                        break
                if len(group) > 1:
                    cycles.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_import_cycles_are_found():
    assert cycles_of({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles_of({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    cycles = import_cycles(COMMON + SERVICES)
    assert cycles == [], ("modules import each other at module level; move what both need into a third "
                          "module (or, if a cycle is inherent, import inside the function and say why):\n"
                          + "\n".join(" <-> ".join(c) for c in cycles))


# ---- function-level imports -------------------------------------------------------------------------------
# Function-level imports of strata's own modules without a comment saying why (a cycle, start-up
# cost), per module, as of issue #24. A module may have fewer; a new one needs its reason.
UNEXPLAINED_FUNCTION_IMPORTS = {
    "common/catalog/table_spec.py": 1,
    "common/catalog/validation.py": 3,
    "common/expr/json_functions.py": 10,
    "common/json/path_steps.py": 1,
    "common/query/aggregators.py": 7,
    "common/query/filters.py": 3,
    "common/query/grouped_engine.py": 3,
    "common/query/model.py": 2,
    "common/query/nested_field.py": 1,
    "common/query/ordering.py": 1,
    "common/query/post_aggregators.py": 2,
    "common/query/projection.py": 1,
    "common/query/projection_report.py": 2,
    "common/query/sketch_aggregators.py": 1,
    "common/query/virtual_column.py": 5,
    "common/segment/builder.py": 1,
    "common/segment/nested_column.py": 2,
    "common/segment/nested_fields.py": 1,
    "common/sql/rules/equi_join.py": 1,
    "common/sql/rules/fold_constants.py": 2,
    "common/sql/scalar_translator.py": 3,
    "common/sql/sql_literals.py": 1,
    "common/sql/sql_plan.py": 1,
    "common/sql/stages.py": 1,
    "common/sql/translator.py": 1,
    "common/types/granularity.py": 3,
    "services/broker/core/catalog_overlay.py": 2,
    "services/broker/core/served_view.py": 1,
    "services/broker/front_door.py": 1,
    "services/broker/ingestion_submit.py": 5,
    "services/broker/main.py": 2,
    "services/broker/query_registry.py": 1,
    "services/broker/sql_service.py": 12,
    "services/cli/catalog_command.py": 1,
    "services/cli/cluster_client.py": 1,
    "services/cli/cluster_overview.py": 1,
    "services/cli/demo.py": 3,
    "services/cli/main.py": 29,
    "services/cli/sql_command.py": 2,
    "services/coordinator/main.py": 2,
    "services/discovery/factory.py": 4,
    "services/ingestion/arrow_scan.py": 1,
    "services/ingestion/json_udfs.py": 10,
    "services/ingestion/parquet_source.py": 1,
    "services/ingestion/schema_discovery.py": 5,
    "services/ingestion/source_reader.py": 3,
    "services/ingestion/spark_api.py": 1,
    "services/ingestion/spark_job.py": 8,
    "services/ingestion/spark_sql.py": 1,
    "services/ingestion/task_driver.py": 3,
    "services/ingestion/task_main.py": 13,
    "services/ingestion/text_scan.py": 6,
    "services/node_process.py": 1,
    "services/security/authorizer.py": 1,
}


def unexplained_function_imports(path: str) -> int:
    text, tree = source(path)
    lines = text.split("\n")
    count = 0
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.iter_child_nodes(func):
            for inner in _same_scope(node):
                if not isinstance(inner, (ast.Import, ast.ImportFrom)):
                    continue
                name = inner.module if isinstance(inner, ast.ImportFrom) else inner.names[0].name
                if not name or name.split(".")[0] not in ("common", "services"):
                    continue
                line, before = lines[inner.lineno - 1], lines[inner.lineno - 2].strip()
                if "#" not in line and not before.startswith("#"):
                    count += 1
    return count


def _same_scope(node):
    """``node`` and what it holds, not descending into nested functions (counted on their own)."""
    yield node
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from _same_scope(child)


def test_function_level_imports_say_why():
    over = []
    for m in COMMON + SERVICES:
        n = unexplained_function_imports(m)
        allowed = UNEXPLAINED_FUNCTION_IMPORTS.get(m.replace(os.sep, "/"), 0)
        if n > allowed:
            over.append(f"{m}: {n} function-level imports of strata modules without a reason (allowed {allowed})")
    assert over == [], ("import at module level, or put the reason (a cycle, start-up cost) in a comment "
                        "beside a function-level import:\n" + "\n".join(over))


# ---- state on frozen objects, id()-keyed caches ------------------------------------------------------------
CONSTRUCTORS = ("__init__", "__post_init__", "__new__", "__setstate__")
# module -> why it writes into a frozen object; empty since issue #24's runtime work (per-query
# state is made at construction, kept on the PreparedQuery or the plan, or cached by value).
FROZEN_WRITES_ALLOWED: dict[str, str] = {}
QUERY_PATH = ("common/query", "common/sql", "common/segment", "common/expr", "services/broker", "services/historical")
ID_KEYED_ALLOWED: dict[str, str] = {}


def _enclosing_function(parents, node):
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node.name
    return None


def frozen_writes(path: str) -> list[str]:
    tree = source(path)[1]
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func
        if (isinstance(fn, ast.Attribute) and fn.attr == "__setattr__" and isinstance(fn.value, ast.Name)
                and fn.value.id == "object" and _enclosing_function(parents, node) not in CONSTRUCTORS):
            out.append(f"{node.lineno}: object.__setattr__ outside a constructor")
        elif (isinstance(fn, ast.Name) and fn.id == "setattr" and node.args
              and not (isinstance(node.args[0], ast.Name) and node.args[0].id in ("self", "cls"))):
            out.append(f"{node.lineno}: setattr on another object")
        elif isinstance(fn, ast.Attribute) and fn.attr == "memo":
            out.append(f"{node.lineno}: .memo(...)")
    return out


def id_keys(path: str) -> list[str]:
    """Uses of ``id`` as a function (``id(x)``, ``map(id, xs)``): how identity-keyed caches are built."""
    tree = source(path)[1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "id":
            out.append(f"{node.lineno}: id(...)")
        elif isinstance(node, ast.Call) and any(isinstance(a, ast.Name) and a.id == "id" for a in node.args):
            out.append(f"{node.lineno}: id passed as a function")
    return out


def _allowed_or_stale(check, paths, allowed: dict, what: str) -> None:
    found = {m.replace(os.sep, "/"): check(m) for m in paths}
    found = {m: hits for m, hits in found.items() if hits}
    bad = [f"{m}:{h}" for m, hits in sorted(found.items()) if m not in allowed for h in hits]
    assert bad == [], what + ":\n" + "\n".join(bad)
    stale = sorted(set(allowed) - set(found))
    assert not stale, f"drop these allow-list entries, they no longer offend: {stale}"


def test_no_state_written_into_frozen_query_or_segment_objects():
    _allowed_or_stale(frozen_writes, COMMON + SERVICES, FROZEN_WRITES_ALLOWED,
                      "per-query state is written into a frozen object; keep it in the prepared query "
                      "(or pass it in a context object) instead")


def test_no_id_keyed_caches_in_the_query_path():
    paths = [m for m in COMMON + SERVICES if m.replace(os.sep, "/").startswith(QUERY_PATH)]
    _allowed_or_stale(id_keys, paths, ID_KEYED_ALLOWED,
                      "a cache keyed by id() outlives or confuses the object it names; key it by a typed, "
                      "stable key in the prepared query")


# ---- caches ------------------------------------------------------------------------------------------------
# Where kept state may live (issue 24): the one bounded cache class, the node's memory budget of
# decoded parts, the on-disk segment cache's plan; and memoized pure functions of their arguments
# (parsing a time zone, an interval, a format), each listed here with its module.
CACHE_MODULES = {"common/bounded_cache.py", "common/segment/part_cache.py", "services/historical/core/cache_plan.py"}
MEMOIZED = {
    "common/types/granularity.py", "common/types/interval.py", "common/types/time_zone.py",
    "common/sql/statement_kind.py", "common/json/path_steps.py", "common/query/projection.py",
    "common/demo/wikipedia.py", "common/expr/functions.py", "services/transport_security.py",
    "common/query/projection_match.py",
    "services/coordinator/core/rules.py",  # minus_period: Joda period arithmetic, pure in (instant, period)
    "services/broker/druid_http/result_format.py",  # _clock_tables: two constant tables, built on first use
}
# ``id()`` of an object as a key keeps state that the object's identity, not its value, names: a
# reused id answers for another object. Listed: a label (no state).
ID_CALLS = {"services/ingestion/spark_session.py"}


def _cache_smells(path: str) -> list[str]:
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    out = []
    for node in ast.walk(tree):
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if name == "OrderedDict" and path not in CACHE_MODULES:
            out.append(f"{path}:{node.lineno} an OrderedDict (a hand-rolled LRU?): use common/bounded_cache.py")
        if name in ("lru_cache", "cache") and isinstance(node, (ast.Name, ast.Attribute)) and \
                (name == "lru_cache" or (isinstance(node, ast.Attribute) and getattr(node.value, "id", "") == "functools")) \
                and path not in MEMOIZED:
            out.append(f"{path}:{node.lineno} functools.{name}: keep state in common/bounded_cache.py "
                       f"(or list a pure function's memo in MEMOIZED)")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "id" \
                and path not in ID_CALLS:
            out.append(f"{path}:{node.lineno} id(...): key kept state by a typed value, not an object's identity")
    return out


def test_no_cache_outside_the_runtime():
    bad = [smell for m in COMMON + SERVICES for smell in _cache_smells(m)]
    assert bad == [], "kept state outside the runtime's caches:\n" + "\n".join(bad)


def test_the_cache_rule_catches_a_new_cache(tmp_path, monkeypatch):
    monkeypatch.setitem(globals(), "ROOT", str(tmp_path))
    (tmp_path / "common").mkdir()
    (tmp_path / "common" / "kept.py").write_text(
        "import functools\nfrom collections import OrderedDict\n_K = OrderedDict()\n"
        "@functools.lru_cache(maxsize=8)\ndef f(x):\n    return x\n"
        "def g(q, memo={}):\n    return memo.setdefault(id(q), q)\n")
    found = _cache_smells("common/kept.py")
    assert any("OrderedDict" in s for s in found)
    assert any("functools.lru_cache" in s for s in found) and any("id(...)" in s for s in found)


# ---- ambient per-query state ------------------------------------------------------------------------------
# Per-query state travels in explicit objects (issue 24): the call's origin on the QueryRequest
# (``services/broker/core/call_origin.py``), the running query handed to the planner and the
# executor (``tracked``), the planning deadline and the merge policy in the plan's context. A
# ContextVar, a copied context or a thread-local read deep inside is state nobody passed: a
# query run on another thread sees what happened to be copied, and a reader cannot see where it
# comes from. Checked in all of common/ and services/ (the query path runs through the broker, the
# historical, security and rpc). module -> why it may have one; empty since the query origin
# became a CallOrigin.
AMBIENT_ALLOWED: dict[str, str] = {}
AMBIENT_NAMES = ("ContextVar", "copy_context", "local")


def ambient_state(path: str) -> list[str]:
    """``contextvars`` imported, ``ContextVar`` / ``copy_context`` used, or ``threading.local``."""
    tree = source(path)[1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == "contextvars" for a in node.names):
            out.append(f"{node.lineno}: import contextvars")
        elif isinstance(node, ast.ImportFrom) and node.module == "contextvars":
            out.append(f"{node.lineno}: from contextvars import ...")
        elif isinstance(node, ast.ImportFrom) and node.module == "threading" and \
                any(a.name == "local" for a in node.names):
            out.append(f"{node.lineno}: from threading import local")
        elif isinstance(node, ast.Attribute) and node.attr in AMBIENT_NAMES and isinstance(node.value, ast.Name) \
                and node.value.id in ("contextvars", "threading"):
            out.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return out


def test_no_ambient_per_query_state_in_the_query_path():
    _allowed_or_stale(ambient_state, COMMON + SERVICES, AMBIENT_ALLOWED,
                      "per-query state read from a ContextVar or thread-local; pass it explicitly (on the "
                      "QueryRequest, the CallOrigin, the running query or the plan's context)")


def test_the_ambient_state_rule_catches_a_new_context_var(tmp_path, monkeypatch):
    monkeypatch.setitem(globals(), "ROOT", str(tmp_path))
    (tmp_path / "common").mkdir()
    (tmp_path / "common" / "ambient.py").write_text(
        "import contextvars\nimport threading\nfrom contextvars import ContextVar\n"
        "CURRENT = contextvars.ContextVar('current', default=None)\n_T = threading.local()\n"
        "def run(fn):\n    return contextvars.copy_context().run(fn)\n")
    found = ambient_state(os.path.join("common", "ambient.py"))
    assert [f.split(": ", 1)[1] for f in found] == [
        "import contextvars", "from contextvars import ...", "contextvars.ContextVar", "threading.local",
        "contextvars.copy_context"], found
