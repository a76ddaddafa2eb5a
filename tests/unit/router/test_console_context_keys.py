"""The console's query context form (services/router/console/query_context.js) lists only keys
strata reads: each is looked up by name in the broker's or the engine's code, so a form field
never sets something that is silently ignored."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FORM = ROOT / "services" / "router" / "console" / "query_context.js"


def _form_keys() -> list[tuple[str, str]]:
    text = FORM.read_text(encoding="utf-8")
    return re.findall(r'\{\s*key:\s*"([A-Za-z]+)",\s*type:\s*"([a-z]+)"', text)


def _python_sources() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for d in ("common", "services")
                     for p in (ROOT / d).rglob("*.py"))


def test_every_form_key_is_read_by_strata():
    keys = _form_keys()
    assert len(keys) >= 10 and len({k for k, _ in keys}) == len(keys)
    sources = _python_sources()
    for key, kind in keys:
        assert kind in ("integer", "string", "boolean", "choice"), (key, kind)
        assert re.search(rf"[\"']{key}[\"']", sources), f"the form offers {key}, which no Python code reads"


def test_the_form_offers_the_keys_the_readme_names():
    keys = {k for k, _ in _form_keys()}
    assert {"timeout", "sqlQueryId", "sqlTimeZone", "maxBytesInMemory", "noProjections", "useProjection",
            "forceProjections"} <= keys


def test_column_type_merge_policy_choices_are_the_brokers():
    from services.broker.core.schema_merge import POLICIES

    text = FORM.read_text(encoding="utf-8")
    choices = re.search(r'key: "columnTypeMergePolicy", type: "choice", choices: \[([^\]]*)\]', text).group(1)
    assert tuple(re.findall(r'"([A-Za-z]+)"', choices)) == POLICIES
