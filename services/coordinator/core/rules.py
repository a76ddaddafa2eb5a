"""Retention and load rules: Druid's rule types, their JSON, and which segments each applies to.

A datasource has an ordered list of rules, followed by the cluster default list (datasource
``_default``, seeded ``loadForever {"_default_tier": 2}``). For each segment the first rule
that applies wins: a load rule says how many replicas each tier holds, a broadcast rule puts a
copy on every server, a drop rule makes the segment unused (it stays in deep storage and the
metadata store until killed).

Which segment interval a rule applies to at reference time ``now`` follows Druid's rule classes
(and Joda's interval predicates they use), with P = [now - period, now):
- ``*Forever``: every interval.
- ``loadByInterval`` / ``broadcastByInterval``: the rule's interval overlaps the segment's.
- ``dropByInterval``: the rule's interval contains the segment's.
- ``loadByPeriod`` / ``broadcastByPeriod``: P overlaps the segment; with ``includeFuture`` (the
  default) anything that ends after P starts, so segments in the future match too.
- ``dropByPeriod``: P contains the segment; with ``includeFuture`` (the default) the segment
  starts at or after P's start.
- ``dropBeforeByPeriod``: the segment ends at or before now - period.
``now - period`` subtracts the period's fields in Joda's order (years, months, weeks, days, then
time) in UTC, with day-of-month clamping (Mar 31 - P1M = Feb 28/29).

Partial load rules (Druid master's ``loadPartialForever``, ``loadPartialByInterval``,
``loadPartialByPeriod``) are load rules with a ``matcher`` that names which of a segment's
projections a tier holds (``{"type": "exactProjection", "names": [...]}`` or
``{"type": "globProjection", "patterns": [...], "excludes": [...]}``; ``*`` and ``?`` are the
only glob metacharacters), so a cold tier can keep just the small pre-aggregated tables. When the
matcher selects none of a segment's projections, ``onCannotMatch`` decides: ``fullLoad`` (the
default) applies the rule and loads the whole segment, ``fallThrough`` skips the rule so the next
one is tried. (Druid also has ``loadOnDemand`` and ``baseLoad``, which need virtual storage that
strata does not have; they are refused by name.)

Pure: no I/O. The metadata store keeps the lists as the JSON this module writes.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from common.errors import ValidationError
from common.types.granularity import Period
from common.types.interval import Interval

DEFAULT_DATASOURCE = "_default"  # the cluster default rules, appended to every datasource's
DEFAULT_TIER = "_default_tier"
DEFAULT_REPLICANTS = 2  # Druid's replicas on the default tier for a load rule without tieredReplicants


class RuleError(ValidationError):
    """A rule list that cannot be used; the message names the rule (position and type) and field."""


@functools.lru_cache(maxsize=4096)  # one duty run asks the same (now, period) for every segment
def minus_period(ms: int, period: Period) -> int:
    """``ms - period`` as Joda subtracts a period from a UTC DateTime: field by field, largest
    first (so Feb 29 2024 - P1Y1M is Jan 28 2023, not Jan 29)."""
    for part in (Period(years=period.years), Period(months=period.months)):
        if not part.is_zero:
            ms = part.add_to(ms, -1)
    return ms - period.fixed_millis


def _overlaps(a: Interval, b: Interval) -> bool:
    # Joda's Interval.overlaps for intervals of non-zero length: half-open, touching is not overlap.
    return a.start < b.end and b.start < a.end


def _contains(outer: Interval, inner: Interval) -> bool:
    # Joda's Interval.contains(Interval): inner lies in outer, and inner's start is before outer's end.
    return outer.start <= inner.start and inner.start < outer.end and inner.end <= outer.end


@dataclass(frozen=True)
class Rule:
    """Base of all rules. ``kind`` is the JSON ``type``; ``action`` is load, drop or broadcast."""

    kind: ClassVar[str] = ""
    action: ClassVar[str] = ""

    def applies_to(self, interval: Interval, now_ms: int) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def to_json(self) -> dict:
        return {"type": self.kind}


@dataclass(frozen=True)
class LoadRule(Rule):
    """A load rule: ``tiered_replicants`` tier -> replicas (0: the tier holds none; the segment
    stays in deep storage, used but unloaded there)."""

    action: ClassVar[str] = "load"
    tiered_replicants: tuple[tuple[str, int], ...] = ((DEFAULT_TIER, DEFAULT_REPLICANTS),)
    use_default_tier_for_null: bool = True

    @property
    def replicants(self) -> dict[str, int]:
        return dict(self.tiered_replicants)

    def to_json(self) -> dict:
        return {"type": self.kind, "tieredReplicants": dict(self.tiered_replicants),
                "useDefaultTierForNull": self.use_default_tier_for_null}


def _replicants(tiers: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(tiers.items()))


@dataclass(frozen=True)
class LoadForever(LoadRule):
    kind: ClassVar[str] = "loadForever"

    def applies_to(self, interval: Interval, now_ms: int) -> bool:
        return True


@dataclass(frozen=True)
class LoadByInterval(LoadRule):
    kind: ClassVar[str] = "loadByInterval"
    interval: Interval = field(default=Interval(0, 0), kw_only=True)

    def applies_to(self, interval: Interval, now_ms: int) -> bool:
        return _overlaps(self.interval, interval)

    def to_json(self) -> dict:
        return {"type": self.kind, "interval": str(self.interval), **_load_fields(self)}


@dataclass(frozen=True)
class LoadByPeriod(LoadRule):
    kind: ClassVar[str] = "loadByPeriod"
    period: Period = field(default=Period(days=1), kw_only=True)
    include_future: bool = field(default=True, kw_only=True)

    def applies_to(self, interval: Interval, now_ms: int) -> bool:
        return _eligible_for_load(self.period, self.include_future, interval, now_ms)

    def to_json(self) -> dict:
        return {"type": self.kind, "period": str(self.period), "includeFuture": self.include_future,
                **_load_fields(self)}


def _load_fields(rule: LoadRule) -> dict:
    return {"tieredReplicants": dict(rule.tiered_replicants), "useDefaultTierForNull": rule.use_default_tier_for_null}


def _eligible_for_load(period: Period, include_future: bool, interval: Interval, now_ms: int) -> bool:
    start = minus_period(now_ms, period)
    if include_future:
        return start < interval.end
    return _overlaps(Interval(start, now_ms), interval)


@dataclass(frozen=True)
class DropForever(Rule):
    kind: ClassVar[str] = "dropForever"
    action: ClassVar[str] = "drop"

    def applies_to(self, interval: Interval, now_ms: int) -> bool:
        return True


@dataclass(frozen=True)
class DropByInterval(Rule):
    kind: ClassVar[str] = "dropByInterval"
    action: ClassVar[str] = "drop"
    interval: Interval = Interval(0, 0)

    def applies_to(self, interval: Interval, now_ms: int) -> bool:
        return _contains(self.interval, interval)

    def to_json(self) -> dict:
        return {"type": self.kind, "interval": str(self.interval)}


@dataclass(frozen=True)
class DropByPeriod(Rule):
    kind: ClassVar[str] = "dropByPeriod"
    action: ClassVar[str] = "drop"
    period: Period = Period(days=1)
    include_future: bool = True

    def applies_to(self, interval: Interval, now_ms: int) -> bool:
        start = minus_period(now_ms, self.period)
        if self.include_future:
            return start <= interval.start
        return _contains(Interval(start, now_ms), interval)

    def to_json(self) -> dict:
        return {"type": self.kind, "period": str(self.period), "includeFuture": self.include_future}


@dataclass(frozen=True)
class DropBeforeByPeriod(Rule):
    kind: ClassVar[str] = "dropBeforeByPeriod"
    action: ClassVar[str] = "drop"
    period: Period = Period(days=1)

    def applies_to(self, interval: Interval, now_ms: int) -> bool:
        return interval.end <= minus_period(now_ms, self.period)

    def to_json(self) -> dict:
        return {"type": self.kind, "period": str(self.period)}


@dataclass(frozen=True)
class BroadcastForever(Rule):
    """A copy on every historical of every tier (strata has no broadcast-only servers)."""

    kind: ClassVar[str] = "broadcastForever"
    action: ClassVar[str] = "broadcast"

    def applies_to(self, interval: Interval, now_ms: int) -> bool:
        return True


@dataclass(frozen=True)
class BroadcastByInterval(Rule):
    kind: ClassVar[str] = "broadcastByInterval"
    action: ClassVar[str] = "broadcast"
    interval: Interval = Interval(0, 0)

    def applies_to(self, interval: Interval, now_ms: int) -> bool:
        return _overlaps(self.interval, interval)

    def to_json(self) -> dict:
        return {"type": self.kind, "interval": str(self.interval)}


@dataclass(frozen=True)
class BroadcastByPeriod(Rule):
    kind: ClassVar[str] = "broadcastByPeriod"
    action: ClassVar[str] = "broadcast"
    period: Period = Period(days=1)
    include_future: bool = True

    def applies_to(self, interval: Interval, now_ms: int) -> bool:
        return _eligible_for_load(self.period, self.include_future, interval, now_ms)

    def to_json(self) -> dict:
        return {"type": self.kind, "period": str(self.period), "includeFuture": self.include_future}


# ---- partial load rules ---------------------------------------------------------------------
FULL_LOAD, FALL_THROUGH = "fullLoad", "fallThrough"
CANNOT_MATCH = (FULL_LOAD, FALL_THROUGH)
_VIRTUAL_STORAGE_ONLY = ("loadOnDemand", "baseLoad")


@functools.lru_cache(maxsize=1024)  # a handful of patterns, asked once per segment per run
def _glob(pattern: str) -> re.Pattern:
    # As Druid's wildcard match: '*' any run, '?' one character, everything else literal.
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), re.S)


@dataclass(frozen=True)
class ExactProjections:
    """``exactProjection``: the projections with these names."""

    kind: ClassVar[str] = "exactProjection"
    names: tuple[str, ...]

    def select(self, projections: Iterable[str]) -> tuple[str, ...]:
        return tuple(sorted(set(projections) & set(self.names)))

    def to_json(self) -> dict:
        return {"type": self.kind, "names": list(self.names)}


@dataclass(frozen=True)
class GlobProjections:
    """``globProjection``: projections whose name matches a pattern, less the ``excludes`` (literal
    names)."""

    kind: ClassVar[str] = "globProjection"
    patterns: tuple[str, ...]
    excludes: tuple[str, ...] = ()

    def select(self, projections: Iterable[str]) -> tuple[str, ...]:
        return tuple(sorted({p for p in projections if p not in self.excludes
                             and any(_glob(pat).fullmatch(p) for pat in self.patterns)}))

    def to_json(self) -> dict:
        return {"type": self.kind, "patterns": list(self.patterns), "excludes": list(self.excludes)}


ProjectionMatcher = ExactProjections | GlobProjections


@dataclass(frozen=True)
class PartialLoadRule(LoadRule):
    """A load rule whose tiers hold only the projections ``matcher`` selects of each segment."""

    matcher: ProjectionMatcher = field(default=ExactProjections(("",)), kw_only=True)
    on_cannot_match: str = field(default=FULL_LOAD, kw_only=True)

    def projections_to_load(self, projections: Iterable[str]) -> tuple[str, ...] | None:
        """What a tier loads of a segment with these projections: the selected names, or None
        when the matcher selects none (the whole segment under ``fullLoad``; under
        ``fallThrough`` the rule does not apply, see ``matching_rule``)."""
        return self.matcher.select(projections) or None

    def _partial_json(self) -> dict:
        return {"matcher": self.matcher.to_json(), "onCannotMatch": self.on_cannot_match}


@dataclass(frozen=True)
class LoadPartialForever(PartialLoadRule):
    kind: ClassVar[str] = "loadPartialForever"

    def applies_to(self, interval: Interval, now_ms: int) -> bool:
        return True

    def to_json(self) -> dict:
        return {"type": self.kind, **_load_fields(self), **self._partial_json()}


@dataclass(frozen=True)
class LoadPartialByInterval(PartialLoadRule):
    kind: ClassVar[str] = "loadPartialByInterval"
    interval: Interval = field(default=Interval(0, 0), kw_only=True)

    def applies_to(self, interval: Interval, now_ms: int) -> bool:
        return _overlaps(self.interval, interval)

    def to_json(self) -> dict:
        return {"type": self.kind, "interval": str(self.interval), **_load_fields(self), **self._partial_json()}


@dataclass(frozen=True)
class LoadPartialByPeriod(PartialLoadRule):
    kind: ClassVar[str] = "loadPartialByPeriod"
    period: Period = field(default=Period(days=1), kw_only=True)
    include_future: bool = field(default=True, kw_only=True)

    def applies_to(self, interval: Interval, now_ms: int) -> bool:
        return _eligible_for_load(self.period, self.include_future, interval, now_ms)

    def to_json(self) -> dict:
        return {"type": self.kind, "period": str(self.period), "includeFuture": self.include_future,
                **_load_fields(self), **self._partial_json()}


RULE_TYPES: dict[str, type[Rule]] = {t.kind: t for t in (
    LoadForever, LoadByInterval, LoadByPeriod, DropForever, DropByInterval, DropByPeriod, DropBeforeByPeriod,
    BroadcastForever, BroadcastByInterval, BroadcastByPeriod, LoadPartialForever, LoadPartialByInterval,
    LoadPartialByPeriod)}

# JSON fields each type takes besides "type".
_LOAD_FIELDS = ("tieredReplicants", "useDefaultTierForNull")
_PARTIAL_FIELDS = ("matcher", "onCannotMatch")
_FIELDS: dict[str, tuple[str, ...]] = {
    "loadForever": _LOAD_FIELDS,
    "loadByInterval": ("interval", *_LOAD_FIELDS),
    "loadByPeriod": ("period", "includeFuture", *_LOAD_FIELDS),
    "dropForever": (),
    "dropByInterval": ("interval",),
    "dropByPeriod": ("period", "includeFuture"),
    "dropBeforeByPeriod": ("period",),
    "broadcastForever": (),
    "broadcastByInterval": ("interval",),
    "broadcastByPeriod": ("period", "includeFuture"),
    "loadPartialForever": (*_LOAD_FIELDS, *_PARTIAL_FIELDS),
    "loadPartialByInterval": ("interval", *_LOAD_FIELDS, *_PARTIAL_FIELDS),
    "loadPartialByPeriod": ("period", "includeFuture", *_LOAD_FIELDS, *_PARTIAL_FIELDS),
}


def rule_from_json(value: object, index: int = 0) -> Rule:
    """One rule from its Druid JSON; ``index`` (0-based) names it in errors."""
    where = f"rule {index}"
    if not isinstance(value, dict):
        raise RuleError(f"{where} must be a JSON object with a 'type', got {type(value).__name__}")
    kind = value.get("type")
    if kind not in RULE_TYPES:
        raise RuleError(f"{where}: unknown type {kind!r}; one of: {', '.join(RULE_TYPES)}")
    where = f"rule {index} ({kind})"
    allowed = _FIELDS[kind]
    extra = sorted(set(value) - {"type", *allowed})
    if extra:
        raise RuleError(f"{where}: unknown field '{extra[0]}'; this type takes "
                        f"{', '.join(repr(f) for f in allowed) or 'no other fields'}")
    kwargs: dict = {}
    if "interval" in allowed:
        raw = value.get("interval")
        if not isinstance(raw, str):
            raise RuleError(f"{where}: field 'interval' is required, an ISO-8601 interval such as "
                            f"'2012-01-01/2013-01-01'")
        try:
            kwargs["interval"] = Interval.parse(raw)
        except ValidationError as e:
            raise RuleError(f"{where}: field 'interval': {e}") from None
    if "period" in allowed:
        raw = value.get("period")
        if not isinstance(raw, str):
            raise RuleError(f"{where}: field 'period' is required, an ISO-8601 period such as 'P1M' or 'P30D'")
        try:
            kwargs["period"] = Period.parse(raw)
        except ValidationError as e:
            raise RuleError(f"{where}: field 'period': {e}") from None
    for name, attr in (("includeFuture", "include_future"), ("useDefaultTierForNull", "use_default_tier_for_null")):
        if name in allowed and value.get(name) is not None:
            if not isinstance(value[name], bool):
                raise RuleError(f"{where}: field '{name}' must be true or false, got {value[name]!r}")
            kwargs[attr] = value[name]
    if "tieredReplicants" in allowed:
        kwargs["tiered_replicants"] = _parse_replicants(value.get("tieredReplicants"),
                                                        kwargs.get("use_default_tier_for_null", True), where)
    if "matcher" in allowed:
        kwargs["matcher"] = _parse_matcher(value.get("matcher"), where)
        behaviour = value.get("onCannotMatch")
        if behaviour is not None:
            if behaviour in _VIRTUAL_STORAGE_ONLY:
                raise RuleError(f"{where}: field 'onCannotMatch' {behaviour!r} needs Druid's virtual storage, which "
                                f"strata does not have; use {FULL_LOAD!r} (load the whole segment) or "
                                f"{FALL_THROUGH!r} (try the next rule)")
            if behaviour not in CANNOT_MATCH:
                raise RuleError(f"{where}: field 'onCannotMatch' must be {FULL_LOAD!r} or {FALL_THROUGH!r}, "
                                f"got {behaviour!r}")
            kwargs["on_cannot_match"] = behaviour
    return RULE_TYPES[kind](**kwargs)


_MATCHER_EXAMPLE = '{"type": "exactProjection", "names": ["daily"]}'


def _names(raw: object, where: str, field_name: str, required: bool) -> tuple[str, ...]:
    if raw is None and not required:
        return ()
    if not isinstance(raw, list) or (required and not raw) or not all(isinstance(n, str) and n for n in raw):
        raise RuleError(f"{where}: field '{field_name}' must be a {'non-empty ' if required else ''}list of "
                        f"projection names{' or patterns' if field_name == 'matcher.patterns' else ''}, got {raw!r}")
    return tuple(dict.fromkeys(raw))


def _parse_matcher(raw: object, where: str) -> ProjectionMatcher:
    if not isinstance(raw, dict):
        raise RuleError(f"{where}: field 'matcher' is required, an object such as {_MATCHER_EXAMPLE}")
    kind = raw.get("type")
    fields = {"exactProjection": ("names",), "globProjection": ("patterns", "excludes")}.get(kind)
    if fields is None:
        raise RuleError(f"{where}: field 'matcher.type' must be 'exactProjection' or 'globProjection', got {kind!r}")
    extra = sorted(set(raw) - {"type", *fields})
    if extra:
        raise RuleError(f"{where}: unknown field 'matcher.{extra[0]}'; a {kind} matcher takes "
                        f"{', '.join(repr(f) for f in fields)}")
    if kind == "exactProjection":
        return ExactProjections(_names(raw.get("names"), where, "matcher.names", True))
    return GlobProjections(_names(raw.get("patterns"), where, "matcher.patterns", True),
                           _names(raw.get("excludes"), where, "matcher.excludes", False))


def _parse_replicants(raw: object, use_default: bool, where: str) -> tuple[tuple[str, int], ...]:
    if raw is None:
        # As Druid: no tieredReplicants means 2 on the default tier, or none at all when
        # useDefaultTierForNull is false (the segment is used but loaded nowhere).
        return _replicants({DEFAULT_TIER: DEFAULT_REPLICANTS} if use_default else {})
    if not isinstance(raw, dict):
        raise RuleError(f"{where}: field 'tieredReplicants' must be an object of tier -> replicas, "
                        f"e.g. {{\"hot\": 2, \"cold\": 1}}")
    out: dict[str, int] = {}
    for tier, count in raw.items():
        if not tier.strip():
            raise RuleError(f"{where}: field 'tieredReplicants' has an empty tier name")
        if isinstance(count, bool) or not isinstance(count, int):
            raise RuleError(f"{where}: field 'tieredReplicants.{tier}' must be a whole number of replicas, "
                            f"got {count!r}")
        if count < 0:
            raise RuleError(f"{where}: field 'tieredReplicants.{tier}' is {count}; replicas must be 0 or more "
                            f"(0 keeps the segment in deep storage only)")
        out[tier] = count
    return _replicants(out)


def rules_from_json(value: object) -> tuple[Rule, ...]:
    """A datasource's whole rule list, as POSTed to ``/druid/coordinator/v1/rules/{ds}``."""
    if not isinstance(value, list):
        raise RuleError(f"rules must be a JSON array of rule objects, got {type(value).__name__}")
    return tuple(rule_from_json(v, i) for i, v in enumerate(value))


def rules_to_json(rules: Iterable[Rule]) -> list[dict]:
    return [r.to_json() for r in rules]


def check_tiers(rules: Sequence[Rule], known: Iterable[str]) -> list[str]:
    """Warnings for tiers a rule names that no historical belongs to (as Druid, not an error:
    the tier's servers may not have started yet)."""
    known = set(known)
    out = []
    for i, rule in enumerate(rules):
        if isinstance(rule, LoadRule):
            for tier, count in rule.tiered_replicants:
                if tier not in known and count > 0:
                    out.append(f"rule {i} ({rule.kind}): tier '{tier}' has no historicals; "
                               f"known tiers: {', '.join(sorted(known)) or 'none'}")
    return out


def default_rules(replication: int = 0) -> tuple[Rule, ...]:
    """The cluster default before anyone set one: ``loadForever`` with ``replication`` replicas on
    the default tier (``[coordinator] replication``; 0 means Druid's 2). A tier never holds more
    copies than it has servers, so 2 on a one-historical cluster is one copy, as before rules."""
    return (LoadForever(tiered_replicants=_replicants({DEFAULT_TIER: replication or DEFAULT_REPLICANTS})),)


def rules_for(datasource: str, rules: Mapping[str, Sequence[Rule]], default: Sequence[Rule] = ()) -> list[Rule]:
    """A datasource's rules followed by the cluster default ones (``rules['_default']`` if set,
    else ``default``)."""
    own = list(rules.get(datasource, ())) if datasource != DEFAULT_DATASOURCE else []
    return own + list(rules.get(DEFAULT_DATASOURCE, default))


def matching_rule(rules: Iterable[Rule], interval: Interval, now_ms: int,
                  projections: Iterable[str] = ()) -> Rule | None:
    """The first rule that applies to a segment of ``interval`` with ``projections`` (its
    projection names) at ``now_ms``; None if none does. A partial rule whose matcher selects none
    of the segment's projections applies only with ``onCannotMatch: fullLoad``, as Druid's."""
    projections = tuple(projections)
    for rule in rules:
        if not rule.applies_to(interval, now_ms):
            continue
        if (isinstance(rule, PartialLoadRule) and rule.on_cannot_match == FALL_THROUGH
                and rule.projections_to_load(projections) is None):
            continue
        return rule
    return None


def wanted_replicas(rule: Rule | None, tiers: Mapping[str, int]) -> dict[str, int]:
    """tier -> replicas a segment under ``rule`` should have, given ``tiers`` (tier -> servers).
    Broadcast: every server of every tier. Drop or no rule: none."""
    if isinstance(rule, LoadRule):
        return {t: n for t, n in rule.tiered_replicants}
    if rule is not None and rule.action == "broadcast":
        return dict(tiers)
    return {}



__all__ = ["BroadcastByInterval", "BroadcastByPeriod", "BroadcastForever", "CANNOT_MATCH", "DEFAULT_DATASOURCE",
           "DEFAULT_REPLICANTS", "ExactProjections", "FALL_THROUGH", "FULL_LOAD", "GlobProjections",
           "LoadPartialByInterval", "LoadPartialByPeriod", "LoadPartialForever", "PartialLoadRule",
           "ProjectionMatcher",
           "DEFAULT_TIER", "DropBeforeByPeriod", "DropByInterval", "DropByPeriod", "DropForever", "LoadByInterval",
           "LoadByPeriod", "LoadForever", "LoadRule", "RULE_TYPES", "Rule", "RuleError", "check_tiers", "default_rules",
           "matching_rule", "minus_period", "rule_from_json", "rules_for", "rules_from_json", "rules_to_json",
           "wanted_replicas"]
