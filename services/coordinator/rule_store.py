"""RuleStore: retention rules in the metadata DB, with an audit row for every change.

As Druid's coordinator: ``strata_rules`` holds each datasource's current list (POST replaces
the whole list) and ``strata_audit`` who changed it, why and when, with the list they set.
The cluster default (``_default``) is not written at startup: until someone sets it, it is
``loadForever`` with ``[coordinator] replication`` replicas on ``_default_tier`` (see
``rules.default_rules``), so changing that setting keeps working as before rules existed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import insert, select, update

from common.types.interval import Interval, format_instant
from services.coordinator.core.rules import (DEFAULT_DATASOURCE, Rule, RuleError, default_rules, rules_from_json,
                                             rules_to_json)
from services.coordinator.store import SegmentStore, audit_table, rules_table

AUDIT_TYPE = "rules"


@dataclass(frozen=True)
class AuditEntry:
    key: str
    author: str
    comment: str
    ip: str
    payload: str  # the rule list set, as JSON text (as Druid's audit payload)
    created_ms: int

    def to_json(self) -> dict:
        """Druid's AuditEntry shape."""
        return {"key": self.key, "type": AUDIT_TYPE,
                "auditInfo": {"author": self.author, "comment": self.comment, "ip": self.ip},
                "payload": self.payload, "auditTime": format_instant(self.created_ms)}


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class RuleStore:
    def __init__(self, store: SegmentStore, replication: int = 0, clock: Callable[[], int] = _now_ms) -> None:
        self.store = store
        self.replication = replication
        self._clock = clock

    def stored(self) -> dict[str, tuple[Rule, ...]]:
        """datasource -> rules, as stored (``_default`` only if someone set it)."""
        with self.store.transaction(write=False) as conn:
            rows = conn.execute(select(rules_table.c.datasource, rules_table.c.payload)).all()
        out = {}
        for ds, payload in rows:
            try:
                out[ds] = rules_from_json(json.loads(payload))
            except (RuleError, ValueError) as e:
                # Written by this module, so only a hand-edited row gets here; naming it lets
                # an operator fix it with a POST, while the other datasources keep their rules.
                raise RuleError(f"stored rules of datasource '{ds}' are invalid ({e}); "
                                f"POST a valid list to /druid/coordinator/v1/rules/{ds}") from None
        return out

    def all(self) -> dict[str, tuple[Rule, ...]]:
        """As GET /rules shows them: the stored ones, and the default even when not stored."""
        out = self.stored()
        out.setdefault(DEFAULT_DATASOURCE, default_rules(self.replication))
        return out

    def get(self, datasource: str) -> tuple[Rule, ...]:
        return self.all().get(datasource, ())

    def set(self, datasource: str, rules: Sequence[Rule], author: str = "", comment: str = "", ip: str = "") -> int:
        """Replaces the datasource's whole list and audits the change, in one transaction."""
        if not datasource or not datasource.strip():
            raise RuleError("the datasource name is empty; POST to /druid/coordinator/v1/rules/{datasource}")
        payload = json.dumps(rules_to_json(rules))
        now = self._clock()
        with self.store.transaction() as conn:
            exists = conn.execute(select(rules_table.c.datasource).where(rules_table.c.datasource == datasource)).first()
            if exists:
                conn.execute(update(rules_table).where(rules_table.c.datasource == datasource)
                             .values(payload=payload, updated_ms=now))
            else:
                conn.execute(insert(rules_table).values(datasource=datasource, payload=payload, updated_ms=now))
            conn.execute(insert(audit_table).values(audit_key=datasource, type=AUDIT_TYPE, author=author or "",
                                                    comment=comment or "", ip=ip or "", payload=payload,
                                                    created_ms=now))
        return now

    def history(self, datasource: str | None = None, count: int | None = None,
                interval: Interval | None = None) -> list[AuditEntry]:
        """Audit entries, newest first: the last ``count``, or those inside ``interval``
        (default: as Druid, the last week)."""
        if count is not None and count <= 0:
            raise RuleError(f"count must be a positive number of entries, got {count}")
        query = select(audit_table).where(audit_table.c.type == AUDIT_TYPE)
        if datasource is not None:
            query = query.where(audit_table.c.audit_key == datasource)
        if count is None:
            if interval is None:
                now = self._clock()
                interval = Interval(now - 7 * 86_400_000, now + 1)
            query = query.where(audit_table.c.created_ms >= interval.start, audit_table.c.created_ms < interval.end)
        query = query.order_by(audit_table.c.created_ms.desc(), audit_table.c.id.desc())
        if count is not None:
            query = query.limit(count)
        with self.store.transaction(write=False) as conn:
            rows = conn.execute(query).all()
        return [AuditEntry(r.audit_key, r.author, r.comment, r.ip, r.payload, r.created_ms) for r in rows]
